package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// sttServer is an OpenAI-compatible /audio/transcriptions stand-in that
// records what it was sent and answers text.
type sttServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []sttRequest
}

type sttRequest struct {
	auth, model string
	file        []byte
}

func newSTTServer(t *testing.T, text string) *sttServer {
	s := &sttServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" {
			http.NotFound(w, r)
			return
		}
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data, _ := io.ReadAll(f)
		s.mu.Lock()
		s.seen = append(s.seen, sttRequest{auth: r.Header.Get("Authorization"), model: r.FormValue("model"), file: data})
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"text": %q}`, text)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sttServer) requests() []sttRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sttRequest(nil), s.seen...)
}

// testJPEG is a w×h JPEG of a gradient.
func testJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lastUser is the last user message of the model's latest request that
// holds want, or the zero message.
func lastUser(model *testkit.ModelServer, want string) testkit.ModelMessage {
	reqs := model.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		msgs := reqs[i].Messages
		for j := len(msgs) - 1; j >= 0; j-- {
			if msgs[j].Role == "user" && strings.Contains(msgs[j].Content, want) {
				return msgs[j]
			}
		}
	}
	return testkit.ModelMessage{}
}

// TestTelegramFilesReachTheModel runs the real binary against the fake
// Telegram and sends what a person sends a DM assistant: a photo with a
// caption, a voice note, a text document, a file over the limit and a
// file Telegram no longer has. The model sees the photo itself, hears the
// voice note as the person's words, reads the document (saved in the
// workspace's inbox), is told in one line of each file it cannot have,
// and the person is told of the file that was too large. No model
// request and no file on the disk carries the bot's token.
func TestTelegramFilesReachTheModel(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Reply("got it") })
	stt := newSTTServer(t, "remind me to water the plants")
	tg := telegramfake.New(t, "")
	home, workspace := t.TempDir(), t.TempDir()
	writeConfig(t, home, fmt.Sprintf(`
http:
  addr: 127.0.0.1:0
display:
  streaming: false
model:
  base_url: %s
  name: gpt-4o
tools:
  workspace: %s
attachments:
  max_bytes: 1048576
stt:
  base_url: %s/v1
  api_key: stt-secret-key
platforms:
  telegram:
    token: %q
    api_url: %s
    allowed_users: ["42"]
`, model.URL(), workspace, stt.srv.URL, tg.Token(), tg.URL()))
	gw := startChild(t, "gateway", home)
	tg.WaitCalls("getUpdates", 1)

	photo := tg.PutFile(telegramfake.File{Data: testJPEG(t, 320, 240), MIME: "image/jpeg"})
	tg.Queue(telegramfake.Incoming{From: 42, Photo: photo.ID, Text: "what is in this picture?"})
	tg.WaitSent(42, 1)
	seen := lastUser(model, "what is in this picture?")
	if len(seen.Images) != 1 || !strings.HasPrefix(seen.Images[0], "data:image/jpeg;base64,") {
		t.Fatalf("the model was shown %d images %.60q, want the photo as a data URL", len(seen.Images), seen.Images)
	}
	if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(seen.Images[0], "data:image/jpeg;base64,")); err != nil {
		t.Errorf("the photo's data URL does not decode: %v", err)
	}

	voice := tg.PutFile(telegramfake.File{Data: []byte("OggS fake opus"), MIME: "audio/ogg"})
	tg.Queue(telegramfake.Incoming{From: 42, Voice: voice.ID})
	tg.WaitSent(42, 2)
	if m := lastUser(model, "remind me to water the plants"); m.Role == "" {
		t.Errorf("the model never got the voice note's transcript as the user's words")
	}
	if got := stt.requests(); len(got) != 1 || got[0].model != "whisper-1" || got[0].auth != "Bearer stt-secret-key" || string(got[0].file) != "OggS fake opus" {
		t.Errorf("the speech-to-text server got %+v, want one whisper-1 request with the voice note and the key", got)
	}

	doc := tg.PutFile(telegramfake.File{Data: []byte("apples,3\npears,5\n"), Name: "fruit.csv", MIME: "text/csv"})
	tg.Queue(telegramfake.Incoming{From: 42, Document: doc.ID, Text: "add these up"})
	tg.WaitSent(42, 3)
	m := lastUser(model, "add these up")
	if !strings.Contains(m.Content, "apples,3") || !strings.Contains(m.Content, "inbox") {
		t.Errorf("the model got %q, want the document's path in the inbox and its text inline", m.Content)
	}
	matches, _ := filepath.Glob(filepath.Join(workspace, "inbox", "*fruit.csv"))
	if len(matches) != 1 {
		t.Errorf("the workspace's inbox holds %q, want fruit.csv", matches)
	}

	big := tg.PutFile(telegramfake.File{Data: make([]byte, 2<<20), Name: "video.bin", MIME: "application/octet-stream"})
	tg.Queue(telegramfake.Incoming{From: 42, Document: big.ID, Text: "and this one"})
	// The notice and the turn's reply.
	sent := tg.WaitSent(42, 5)
	var notice string
	for _, s := range sent[3:] {
		if strings.Contains(s.Text, "video.bin") {
			notice = s.Text
		}
	}
	if !strings.Contains(notice, "2.0 MiB") || !strings.Contains(notice, "attachments.max_bytes") {
		t.Errorf("the person was told %q, want that video.bin is over the limit and which key sets it", notice)
	}
	tg.Queue(telegramfake.Incoming{From: 42, Document: "BQACAgIAAx0gone", Text: "and the old one"})
	tg.WaitSent(42, 6)
	if m := lastUser(model, "and this one"); !strings.Contains(m.Content, "video.bin") || !strings.Contains(m.Content, "limit") {
		t.Errorf("the model got %q, want a line that video.bin is over the limit", m.Content)
	}
	if m := lastUser(model, "and the old one"); !strings.Contains(m.Content, "could not be downloaded") {
		t.Errorf("the model got %q, want a line that the file could not be downloaded", m.Content)
	}
	gw.stop()

	for _, req := range model.Requests() {
		if bytes.Contains(req.Body, []byte(tg.Token())) {
			t.Errorf("model request %d carries the bot token", req.Seq)
		}
	}
	err := filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(tg.Token())) {
			t.Errorf("%s holds the bot token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
