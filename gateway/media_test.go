package gateway

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// fetchAdapter is an adaptertest.Adapter whose platform serves files
// (adapters.Fetcher) and which hands the test its inbox.
type fetchAdapter struct {
	adaptertest.Adapter
	files map[string][]byte // by PlatformID
	inbox chan adapters.Inbox

	mu   sync.Mutex
	sent []outbox.Message
}

var _ adapters.Fetcher = (*fetchAdapter)(nil)

func newFetchAdapter(files map[string][]byte) *fetchAdapter {
	a := &fetchAdapter{files: files, inbox: make(chan adapters.Inbox, 1)}
	a.Adapter = adaptertest.Adapter{
		Name: "chat",
		OnRun: func(ctx context.Context, inbox adapters.Inbox) error {
			a.inbox <- inbox
			<-ctx.Done()
			return nil
		},
		OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
			a.mu.Lock()
			a.sent = append(a.sent, m)
			a.mu.Unlock()
			return adapters.SendResult{Outcome: adapters.Accepted}
		},
	}
	return a
}

func (a *fetchAdapter) Fetch(_ context.Context, att sessions.Attachment, _ int64) ([]byte, error) {
	return a.files[att.PlatformID], nil
}

func (a *fetchAdapter) texts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, m := range a.sent {
		out = append(out, m.Text)
	}
	return out
}

// A photo sent on a platform reaches a model that does not see images
// as its description: the media capability runs around the turns, with
// the platform's adapter as its fetcher and auxiliary.vision (here the
// main model) as its describer.
func TestGatewayDescribesAPhotoFromAPlatform(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Agent.ImageInputMode = config.ImagesText
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	img.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, img, nil); err != nil {
		t.Fatal(err)
	}
	ad := newFetchAdapter(map[string][]byte{"p1": jpg.Bytes()})
	startGateway(t, cfg, Options{Adapters: []adapters.Adapter{ad}})
	inbox := <-ad.inbox

	model.Script(testkit.Reply("A small red dot on a grey field."), testkit.Reply("It is a dot."))
	err := inbox.Deliver(context.Background(), sessions.Inbound{
		Conv: "chat:1", Sender: "u1", MessageID: "m1", Text: "what is it?",
		Attachments: []sessions.Attachment{{Name: "dot.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, PlatformID: "p1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the reply sent", func() bool { return strings.Contains(strings.Join(ad.texts(), "|"), "It is a dot.") })
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model had %d requests, want the description and the turn", len(reqs))
	}
	if !strings.Contains(reqs[0].LastUser(), "Describe this picture") {
		t.Errorf("the first request asked %q, want a description", reqs[0].LastUser())
	}
	want := "what is it?\n[dot.jpg, a picture, as a vision model described it: A small red dot on a grey field.]"
	if got := reqs[1].LastUser(); got != want {
		t.Errorf("the turn's message = %q\nwant %q", got, want)
	}
	if b, err := os.ReadFile(media.FilePath(cfg.Home, "chat:1", "m1", "dot.jpg")); err != nil || !bytes.Equal(b, jpg.Bytes()) {
		t.Errorf("the photo kept under the home has %d bytes (%v), want %d", len(b), err, jpg.Len())
	}
}

// A photo and a voice note sent on Telegram reach the model through the
// real adapter, the media runner and the agent: the photo as an image
// part of the request, the voice note as its transcript, made by the
// stt endpoint from the note's bytes. No model request, and nothing the
// STT endpoint is sent, carries the bot's token.
func TestGatewayTelegramPhotoAndVoiceReachTheModel(t *testing.T) {
	tg := telegramfake.New(t, "")
	model := testkit.NewModelServer(t)
	var sttMu sync.Mutex
	var sttBodies [][]byte
	stt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sttMu.Lock()
		sttBodies = append(sttBodies, b)
		sttMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"text":"what is in the picture?"}`))
	}))
	t.Cleanup(stt.Close)

	cfg := testConfig(t, model)
	cfg.Agent.ImageInputMode = config.ImagesNative
	cfg.Platforms.Telegram.Token = tg.Token()
	cfg.Platforms.Telegram.APIURL = tg.URL()
	cfg.Platforms.Telegram.AllowedUsers = []string{"42"}
	cfg.STT.BaseURL = stt.URL + "/v1"
	cfg.STT.APIKey = "sk-stt"
	startGateway(t, cfg, Options{})

	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, img, nil); err != nil {
		t.Fatal(err)
	}
	photo := tg.PutFile(telegramfake.File{Data: jpg.Bytes(), Path: "photos/file_1.jpg"})
	voice := tg.PutFile(telegramfake.File{Data: []byte("OggS pretend opus"), MIME: "audio/ogg", Path: "voice/file_2.oga"})
	model.Script(testkit.Reply("a photo"), testkit.Reply("a dark picture"))

	tg.Queue(telegramfake.Incoming{Photo: photo.ID, Text: "look"})
	tg.WaitSent(42, 1)
	tg.Queue(telegramfake.Incoming{Voice: voice.ID})
	tg.WaitSent(42, 2)

	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model had %d requests, want one a message", len(reqs))
	}
	if body := string(reqs[0].Body); !strings.Contains(body, `"url":"data:image/jpeg;base64,`) || reqs[0].LastUser() != "look" {
		t.Errorf("the photo's request does not show it as an image beside %q: %.300s", "look", body)
	}
	if got := reqs[1].LastUser(); got != "what is in the picture?" {
		t.Errorf("the voice note reached the model as %q, want its transcript", got)
	}
	sttMu.Lock()
	defer sttMu.Unlock()
	if len(sttBodies) != 1 || !bytes.Contains(sttBodies[0], []byte("OggS pretend opus")) {
		t.Errorf("the stt endpoint got %d requests, want one with the note's bytes", len(sttBodies))
	}
	for _, r := range reqs {
		if strings.Contains(string(r.Body), tg.Token()) {
			t.Error("a model request carries the bot's token")
		}
	}
}
