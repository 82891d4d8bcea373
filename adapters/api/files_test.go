package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// testFileLimit is attachments.max_bytes in these tests: small, so a
// file over it costs little.
const testFileLimit = 64 << 10

// backend is what these tests use of a store.
type backend interface {
	Sessions() sessions.Store
	Outbox() outbox.Store
	Timeline() sessions.Timeline
	Files() media.Store
	Close() error
}

// storeFixture serves an api.Server whose inbox is a sessions.Router on
// a real store, and whose files are kept in that store.
type storeFixture struct {
	ctx   context.Context
	clk   *clock.Fake
	db    backend
	files *recordingFiles
	api   *api.Server
	srv   *httptest.Server
}

// eachStore runs f against a fixture on a SQLite file and on a
// redis-server of the test's own.
func eachStore(t *testing.T, f func(t *testing.T, sf *storeFixture)) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(epoch)
			var db backend
			var err error
			switch name {
			case "sqlite":
				db, err = sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
			case "redis":
				srv := testkit.StartRedis(t)
				db, err = redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix(), Clock: clk})
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			f(t, newStoreFixture(t, clk, db))
		})
	}
}

func newStoreFixture(t *testing.T, clk *clock.Fake, db backend) *storeFixture {
	t.Helper()
	router, err := sessions.NewRouter(sessions.RouterOptions{Store: db.Sessions(), Outbox: db.Outbox(), Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sf := &storeFixture{ctx: context.Background(), clk: clk, db: db, files: &recordingFiles{Store: db.Files()}}
	sf.api = api.New(api.Options{
		Inbox:        router,
		Timeline:     db.Timeline(),
		APIKey:       testKey,
		Files:        sf.files,
		MaxFileBytes: testFileLimit,
		Clock:        clk,
		Logger:       slog.New(slog.DiscardHandler),
		Poll:         20 * time.Millisecond,
	})
	sf.srv = httptest.NewServer(sf.api)
	t.Cleanup(sf.srv.Close)
	return sf
}

// recordingFiles is the store's media.Store, recording the ids put.
type recordingFiles struct {
	media.Store
	mu   sync.Mutex
	puts []string
}

func (r *recordingFiles) PutFile(ctx context.Context, id string, data []byte) error {
	r.mu.Lock()
	r.puts = append(r.puts, id)
	r.mu.Unlock()
	return r.Store.PutFile(ctx, id, data)
}

func (r *recordingFiles) Puts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.puts)
}

// request sends an authorized request and returns the status and body.
func (sf *storeFixture) request(t *testing.T, path, contentType string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	r := sf.send(path, contentType, body, header...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.status, r.body
}

// send is request for any goroutine: it returns its error.
func (sf *storeFixture) send(path, contentType string, body []byte, header ...string) response {
	req, err := http.NewRequest(http.MethodPost, sf.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, body: b, err: err}
}

type response struct {
	status int
	body   []byte
	err    error
}

// complete posts a completion whose last user message has content, and
// returns where its answer comes: it waits for its turn's reply.
func (sf *storeFixture) complete(t *testing.T, content any, header ...string) <-chan response {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"model":    "herald-test",
		"messages": []any{map[string]any{"role": "user", "content": content}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan response, 1)
	go func() { out <- sf.send("/v1/chat/completions", "application/json", body, header...) }()
	return out
}

// answer waits for the answer of a request complete sent.
func answer(t *testing.T, ch <-chan response) response {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// claim waits for a turn to claim.
func (sf *storeFixture) claim(t *testing.T, worker string) *sessions.Turn {
	t.Helper()
	var turn *sessions.Turn
	testkit.Eventually(t, "a turn to claim", func() bool {
		var err error
		turn, err = sf.db.Sessions().Claim(sf.ctx, worker, sessions.DefaultLeaseTTL)
		if err != nil {
			t.Fatal(err)
		}
		return turn != nil
	})
	return turn
}

// blobs are the store ids of an entry's files.
func blobs(e sessions.Entry) []string {
	var ids []string
	for _, a := range e.Attachments {
		ids = append(ids, a.Blob)
	}
	return ids
}

// commit ends turn as the media capability's turn decorator has it: its
// files released in its commit; then its reply is sent.
func (sf *storeFixture) commit(t *testing.T, turn *sessions.Turn, reply string) {
	t.Helper()
	err := sf.db.Sessions().Finish(sf.ctx, turn.Lease, sessions.Finish{
		EntryID: turn.Entry.ID,
		Writes:  []sessions.Write{media.ReleaseFiles{IDs: blobs(turn.Entry)}},
		Release: true,
	})
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	chatID := strings.TrimPrefix(turn.Entry.Conv, "api:")
	m := outbox.Message{
		ID:      "out-" + turn.Entry.ID,
		Target:  outbox.Target{Platform: "api", Chat: chatID},
		Conv:    turn.Entry.Conv,
		Text:    reply,
		ReplyTo: turn.Entry.MessageID,
		Kind:    "reply",
	}
	if r := sf.api.Send(sf.ctx, m); r.Outcome != adapters.Accepted {
		t.Fatalf("Send: %v %s", r.Outcome, r.Reason)
	}
}

// wantBlob checks that the store keeps want under id.
func (sf *storeFixture) wantBlob(t *testing.T, id string, want []byte) {
	t.Helper()
	got, err := sf.db.Files().File(sf.ctx, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("File(%s) = %d bytes (%v), want the %d sent", id, len(got), err, len(want))
	}
}

// wantNoBlob checks that the store keeps nothing under id.
func (sf *storeFixture) wantNoBlob(t *testing.T, id string) {
	t.Helper()
	if got, err := sf.db.Files().File(sf.ctx, id); !errs.Is(err, errs.NotFound) {
		t.Errorf("File(%s) = %d bytes (%v), want NotFound", id, len(got), err)
	}
}

// wantNothingTaken checks that no entry is queued and no file was put.
func (sf *storeFixture) wantNothingTaken(t *testing.T) {
	t.Helper()
	if n, err := sf.db.Sessions().QueueDepth(sf.ctx, 10); err != nil || n != 0 {
		t.Errorf("QueueDepth = %d (%v), want nothing queued", n, err)
	}
	if puts := sf.files.Puts(); len(puts) != 0 {
		t.Errorf("files put: %q, want none", puts)
	}
}

// wantRefused checks an error answer: its status, and that its message
// says each of says.
func wantRefused(t *testing.T, status int, body []byte, wantStatus int, says ...string) {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if status != wantStatus {
		t.Errorf("status %d (%s), want %d", status, e.Error.Message, wantStatus)
	}
	for _, s := range says {
		if !strings.Contains(e.Error.Message, s) {
			t.Errorf("error %q does not say %q", e.Error.Message, s)
		}
	}
}

var attOpts = cmpopts.IgnoreFields(sessions.Attachment{}, "Blob")

// pngImage is a small PNG.
func pngImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(mimeType string, data []byte) string {
	return "data:" + mimeType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

func textPart(text string) map[string]any { return map[string]any{"type": "text", "text": text} }

func imagePart(url string) map[string]any {
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}
}

func audioPart(data, format string) map[string]any {
	return map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": data, "format": format}}
}

// wavBytes stand for a recording: herald keeps them as they come.
var wavBytes = append([]byte("RIFF\x24\x00\x00\x00WAVEfmt "), make([]byte, 40)...)

func TestCompletionTakesAnImageAndAudioInline(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		pic := pngImage(t)
		content := []any{
			textPart("what is this?"),
			imagePart(dataURL("image/png", pic)),
			audioPart(base64.StdEncoding.EncodeToString(wavBytes), "wav"),
		}
		reply := sf.complete(t, content, "Idempotency-Key", "inline-1", "X-Herald-Conversation", "pics")
		turn := sf.claim(t, "w1")
		e := turn.Entry
		want := []sessions.Attachment{
			{Name: "image-1.png", MIME: "image/png", Size: int64(len(pic)), Kind: sessions.AttachImage},
			{Name: "audio-2.wav", MIME: "audio/wav", Size: int64(len(wavBytes)), Kind: sessions.AttachVoice},
		}
		if d := cmp.Diff(want, e.Attachments, attOpts); e.Text != "what is this?" || d != "" {
			t.Fatalf("entry %q, attachments (-want +got):\n%s", e.Text, d)
		}
		ids := blobs(e)
		sf.wantBlob(t, ids[0], pic)
		sf.wantBlob(t, ids[1], wavBytes)

		sf.commit(t, turn, "a red dot, and a silence")
		if r := answer(t, reply); r.status != http.StatusOK || !strings.Contains(string(r.body), "a red dot") {
			t.Fatalf("completion: %d %s", r.status, r.body)
		}
		for _, id := range ids {
			sf.wantNoBlob(t, id)
		}

		// The same request again is answered from the timeline, and the
		// files it put again are forgotten: their turn has committed.
		again := answer(t, sf.complete(t, content, "Idempotency-Key", "inline-1", "X-Herald-Conversation", "pics"))
		if again.status != http.StatusOK || !strings.Contains(string(again.body), "a red dot") {
			t.Fatalf("retried completion: %d %s", again.status, again.body)
		}
		if n, err := sf.db.Sessions().QueueDepth(sf.ctx, 10); err != nil || n != 0 {
			t.Errorf("QueueDepth after the retry = %d (%v), want 0", n, err)
		}
		if puts := sf.files.Puts(); !slices.Equal(puts, append(slices.Clone(ids), ids...)) {
			t.Errorf("files put %q, want %q twice", puts, ids)
		}
		for _, id := range ids {
			sf.wantNoBlob(t, id)
		}
	})
}

// imageServer serves the images a completion names by URL, and records
// the headers of the requests it got.
type imageServer struct {
	*httptest.Server
	arrived chan string // the path of each request to /slow, as it arrives
	mu      sync.Mutex
	headers []http.Header
}

func newImageServer(t *testing.T, pic []byte) *imageServer {
	t.Helper()
	s := &imageServer{arrived: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/pics/cat.png", func(w http.ResponseWriter, r *http.Request) {
		// Labelled badly: the bytes tell it is a PNG.
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(pic)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/pics/cat.png", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(make([]byte, testFileLimit+1))
	})
	mux.HandleFunc("/streamed.png", func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: the limit is found while reading.
		w.Header().Set("Content-Type", "image/png")
		for range 3 {
			w.Write(make([]byte, testFileLimit/2))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><body>not a picture</body></html>")
	})
	mux.HandleFunc("/slow.png", func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- r.URL.Path
		<-r.Context().Done()
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *imageServer) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.headers)
}

func TestCompletionFetchesAnImageByURL(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		pic := pngImage(t)
		images := newImageServer(t, pic)
		reply := sf.complete(t, []any{textPart("and this?"), imagePart(images.URL + "/moved")}, "Cookie", "session=secret")
		turn := sf.claim(t, "w1")
		want := []sessions.Attachment{{Name: "cat.png", MIME: "image/png", Size: int64(len(pic)), Kind: sessions.AttachImage}}
		if d := cmp.Diff(want, turn.Entry.Attachments, attOpts); d != "" {
			t.Fatalf("attachments (-want +got):\n%s", d)
		}
		sf.wantBlob(t, turn.Entry.Attachments[0].Blob, pic)
		sf.commit(t, turn, "a cat")
		if r := answer(t, reply); r.status != http.StatusOK {
			t.Fatalf("completion: %d %s", r.status, r.body)
		}
		// herald's own request carries none of the client's credentials.
		hs := images.Headers()
		if len(hs) != 2 {
			t.Fatalf("the image server got %d requests, want the redirect and the image", len(hs))
		}
		for _, h := range hs {
			if h.Get("Authorization") != "" || h.Get("Cookie") != "" || h.Get("User-Agent") != "herald" {
				t.Errorf("a download's headers: %v", h)
			}
		}
	})
}

func TestCompletionRefusesAnImageItCannotFetch(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		images := newImageServer(t, pngImage(t))
		withCreds := strings.Replace(images.URL, "http://", "http://user:pw@", 1) + "/pics/cat.png"
		cases := []struct {
			desc   string
			url    string
			status int
			says   []string
		}{
			{"not found", images.URL + "/nothing.png", http.StatusBadRequest, []string{"404 Not Found"}},
			{"over the limit", images.URL + "/big.png", http.StatusRequestEntityTooLarge, []string{"65536 bytes", "attachments.max_bytes"}},
			{"over the limit, no length told", images.URL + "/streamed.png", http.StatusRequestEntityTooLarge, []string{"attachments.max_bytes"}},
			{"not an image", images.URL + "/page.html", http.StatusBadRequest, []string{"text/html", "not an image"}},
			{"redirected without end", images.URL + "/loop", http.StatusBadRequest, []string{"redirects"}},
			{"with credentials in the url", withCreds, http.StatusBadRequest, []string{"no credentials"}},
			{"not http", "ftp://example.com/cat.png", http.StatusBadRequest, []string{`scheme "ftp"`}},
		}
		for _, tc := range cases {
			t.Run(tc.desc, func(t *testing.T) {
				r := answer(t, sf.complete(t, []any{textPart("look"), imagePart(tc.url)}))
				wantRefused(t, r.status, r.body, tc.status, append([]string{"messages[0].content[1] (image_url)"}, tc.says...)...)
			})
		}

		// A server that does not answer is given up on after 20 s of the
		// server's clock.
		reply := sf.complete(t, []any{imagePart(images.URL + "/slow.png")})
		select {
		case <-images.arrived:
		case <-time.After(20 * time.Second):
			t.Fatal("the download of /slow.png did not start")
		}
		sf.clk.Advance(api.DefaultFetchTimeout)
		r := answer(t, reply)
		wantRefused(t, r.status, r.body, http.StatusBadRequest, "messages[0].content[0] (image_url)", "took over 20s")

		sf.wantNothingTaken(t)
	})
}

func TestCompletionRefusesBadParts(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		pic := dataURL("image/png", pngImage(t))
		tooMany := []any{textPart("many")}
		for range 11 {
			tooMany = append(tooMany, imagePart(pic))
		}
		cases := []struct {
			desc    string
			content any
			status  int
			says    []string
		}{
			{"bad base64 in a data URL", []any{imagePart(pic), imagePart("data:image/png;base64,@@@@")}, http.StatusBadRequest,
				[]string{"messages[0].content[1] (image_url)", "not base64"}},
			{"a part type herald does not take", []any{textPart("x"), map[string]any{"type": "file", "file": map[string]any{"file_data": "aGk="}}}, http.StatusBadRequest,
				[]string{"messages[0].content[1]", `part type "file"`}},
			{"a data URL that is not an image", []any{imagePart("data:text/plain;base64,aGk=")}, http.StatusBadRequest,
				[]string{"messages[0].content[0] (image_url)", "text/plain, not an image"}},
			{"an image_url without a url", []any{map[string]any{"type": "image_url"}}, http.StatusBadRequest,
				[]string{"messages[0].content[0] (image_url) has no url"}},
			{"an image over the limit", []any{imagePart(dataURL("image/png", make([]byte, testFileLimit+1)))}, http.StatusRequestEntityTooLarge,
				[]string{"messages[0].content[0] (image_url)", "attachments.max_bytes"}},
			{"audio in a format herald does not take", []any{audioPart("aGk=", "aiff")}, http.StatusBadRequest,
				[]string{"messages[0].content[0] (input_audio)", `format "aiff"`, "wav"}},
			{"audio that is not base64", []any{audioPart("not base64!", "mp3")}, http.StatusBadRequest,
				[]string{"messages[0].content[0] (input_audio)", "not base64"}},
			{"more files than a message carries", tooMany, http.StatusBadRequest, []string{"11 files", "limit of 10"}},
			{"no text and no files", []any{textPart(" ")}, http.StatusBadRequest, []string{"no text and no files"}},
		}
		for _, tc := range cases {
			t.Run(tc.desc, func(t *testing.T) {
				r := answer(t, sf.complete(t, tc.content))
				wantRefused(t, r.status, r.body, tc.status, tc.says...)
			})
		}
		sf.wantNothingTaken(t)
	})
}

// formFile is one file part of a form.
type formFile struct {
	name, mime string
	data       []byte
}

// form encodes a multipart form of the fields (name, value pairs) and
// the files, each a part named "file".
func form(t *testing.T, fields []string, files ...formFile) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := w.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, f.name))
		if f.mime != "" {
			h.Set("Content-Type", f.mime)
		}
		p, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		p.Write(f.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), b.Bytes()
}

const messagesPath = "/api/v1/conversations/c1/messages"

func TestPostMessageTakesFiles(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		pic := pngImage(t)
		notes := []byte("line one\nline two\n")
		ctype, body := form(t, []string{"text", "two files"},
			formFile{"a.png", "image/png", pic},
			formFile{"notes.txt", "", notes}) // typed by its name
		status, b := sf.request(t, messagesPath, ctype, body)
		if status != http.StatusAccepted {
			t.Fatalf("post: %d %s", status, b)
		}
		turn := sf.claim(t, "w1")
		want := []sessions.Attachment{
			{Name: "a.png", MIME: "image/png", Size: int64(len(pic)), Kind: sessions.AttachImage},
			{Name: "notes.txt", MIME: "text/plain", Size: int64(len(notes)), Kind: sessions.AttachDocument},
		}
		if d := cmp.Diff(want, turn.Entry.Attachments, attOpts); turn.Entry.Text != "two files" || d != "" {
			t.Fatalf("entry %q, attachments (-want +got):\n%s", turn.Entry.Text, d)
		}
		sf.wantBlob(t, turn.Entry.Attachments[0].Blob, pic)
		sf.wantBlob(t, turn.Entry.Attachments[1].Blob, notes)
		sf.commit(t, turn, "got them")

		// A file alone is a message too; the JSON body works as before.
		ctype, body = form(t, nil, formFile{"voice.ogg", "audio/ogg", []byte("OggS")})
		if status, b := sf.request(t, messagesPath, ctype, body); status != http.StatusAccepted {
			t.Fatalf("post of a file alone: %d %s", status, b)
		}
		turn = sf.claim(t, "w1")
		if as := turn.Entry.Attachments; turn.Entry.Text != "" || len(as) != 1 || as[0].Kind != sessions.AttachAudio {
			t.Errorf("a file alone: %q %+v", turn.Entry.Text, as)
		}
		sf.commit(t, turn, "heard it")
		if status, b := sf.request(t, messagesPath, "application/json", []byte(`{"text":"plain"}`)); status != http.StatusAccepted {
			t.Fatalf("JSON post: %d %s", status, b)
		}
		turn = sf.claim(t, "w1")
		if turn.Entry.Text != "plain" || turn.Entry.Attachments != nil {
			t.Errorf("JSON post: %q %+v", turn.Entry.Text, turn.Entry.Attachments)
		}
		sf.commit(t, turn, "ok")

		// A message the queue refuses (its text is over the entry's
		// limit) leaves no file behind.
		ctype, body = form(t, []string{"text", strings.Repeat("x", sessions.DefaultMaxEntryBytes)}, formFile{"c.txt", "text/plain", []byte("c")})
		status, b = sf.request(t, messagesPath, ctype, body)
		wantRefused(t, status, b, http.StatusRequestEntityTooLarge)
		puts := sf.files.Puts()
		sf.wantNoBlob(t, puts[len(puts)-1])
	})
}

func TestPostMessageRefusesBadForms(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		small := formFile{"ok.txt", "text/plain", []byte("fine")}
		big := formFile{"big.bin", "application/octet-stream", make([]byte, testFileLimit+1)}
		var eleven []formFile
		for i := range 11 {
			eleven = append(eleven, formFile{fmt.Sprintf("f%d.txt", i), "text/plain", []byte("x")})
		}
		cases := []struct {
			desc   string
			fields []string
			files  []formFile
			status int
			says   []string
		}{
			{"a file over the limit", []string{"text", "hi"}, []formFile{small, big}, http.StatusRequestEntityTooLarge,
				[]string{`file "big.bin"`, "65536 bytes", "attachments.max_bytes"}},
			{"a field the route does not take", []string{"text", "hi", "model", "x"}, nil, http.StatusBadRequest,
				[]string{`field "model"`}},
			{"text twice", []string{"text", "a", "text", "b"}, nil, http.StatusBadRequest, []string{"text twice"}},
			{"text that is not UTF-8", []string{"text", "\xff\xfe"}, nil, http.StatusBadRequest, []string{"not UTF-8"}},
			{"more files than a message carries", nil, eleven, http.StatusBadRequest, []string{"limit of 10"}},
			{"no text and no file", []string{"text", " "}, nil, http.StatusBadRequest, []string{"text is missing"}},
		}
		for _, tc := range cases {
			t.Run(tc.desc, func(t *testing.T) {
				ctype, body := form(t, tc.fields, tc.files...)
				status, b := sf.request(t, messagesPath, ctype, body)
				wantRefused(t, status, b, tc.status, tc.says...)
			})
		}
		sf.wantNothingTaken(t)
	})
}

// A retried upload (the same Idempotency-Key) is kept once and queued
// once; its files live until the commit of the turn that read them, not
// a commit fenced off, and a retry after that commit leaves none behind.
func TestRetriedUploadIsKeptOnceAndReleasedWithItsTurn(t *testing.T) {
	eachStore(t, func(t *testing.T, sf *storeFixture) {
		ctype, body := form(t, []string{"text", "two files"},
			formFile{"a.txt", "text/plain", []byte("first")},
			formFile{"b.txt", "text/plain", []byte("second")})
		var ids []string
		for range 2 {
			status, b := sf.request(t, messagesPath, ctype, body, "Idempotency-Key", "up-1")
			if status != http.StatusAccepted || !strings.Contains(string(b), `"message_id":"up-1"`) {
				t.Fatalf("post: %d %s", status, b)
			}
		}
		if n, err := sf.db.Sessions().QueueDepth(sf.ctx, 10); err != nil || n != 1 {
			t.Fatalf("QueueDepth after a retry = %d (%v), want 1", n, err)
		}
		puts := sf.files.Puts()
		if len(puts) != 4 || !slices.Equal(puts[:2], puts[2:]) || puts[0] == puts[1] {
			t.Fatalf("files put %q, want the same two ids twice", puts)
		}

		stale := sf.claim(t, "w1")
		ids = blobs(stale.Entry)
		if !slices.Equal(ids, puts[:2]) {
			t.Fatalf("the entry's blobs %q, want %q", ids, puts[:2])
		}
		// w1 stalls past its lease; w2 runs the message again.
		sf.clk.Advance(sessions.DefaultLeaseTTL + time.Second)
		rival := sf.claim(t, "w2")
		err := sf.db.Sessions().Finish(sf.ctx, stale.Lease, sessions.Finish{
			EntryID: stale.Entry.ID,
			Writes:  []sessions.Write{media.ReleaseFiles{IDs: ids}},
			Release: true,
		})
		if !errs.Is(err, errs.LeaseLost) {
			t.Fatalf("the stale commit: %v, want LeaseLost", err)
		}
		sf.wantBlob(t, ids[0], []byte("first"))
		sf.wantBlob(t, ids[1], []byte("second"))

		sf.commit(t, rival, "read both")
		for _, id := range ids {
			sf.wantNoBlob(t, id)
		}

		// Once more, after the turn answered: nothing queued, nothing
		// kept.
		if status, b := sf.request(t, messagesPath, ctype, body, "Idempotency-Key", "up-1"); status != http.StatusAccepted {
			t.Fatalf("post after the answer: %d %s", status, b)
		}
		if n, err := sf.db.Sessions().QueueDepth(sf.ctx, 10); err != nil || n != 0 {
			t.Errorf("QueueDepth after a late retry = %d (%v), want 0", n, err)
		}
		for _, id := range ids {
			sf.wantNoBlob(t, id)
		}
	})
}
