package media_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// backend is one opened store serving what the media runner uses: the
// files, and the queue and outbox a spoken command goes through.
type backend interface {
	Sessions() sessions.Store
	Outbox() outbox.Store
	Files() media.Store
	Close() error
}

// eachStore runs f on each backend.
func eachStore(t *testing.T, f func(t *testing.T, db backend)) {
	t.Run("sqlite", func(t *testing.T) {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clock.Real{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		f(t, db)
	})
	t.Run("redis", func(t *testing.T) {
		srv := testkit.StartRedis(t)
		db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		f(t, db)
	})
}

// fetcher is a platform adapter's download, as a function; it counts
// its calls.
type fetcher struct {
	fetch func(att sessions.Attachment, max int64) ([]byte, error)

	mu    sync.Mutex
	calls int
}

var _ adapters.Fetcher = (*fetcher)(nil)

func (f *fetcher) Fetch(_ context.Context, att sessions.Attachment, max int64) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return f.fetch(att, max)
}

func (f *fetcher) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// serves is a fetcher that gives data for any attachment.
func serves(data []byte) *fetcher {
	return &fetcher{fetch: func(sessions.Attachment, int64) ([]byte, error) { return data, nil }}
}

// inner is the runner the media runner decorates: it records what it
// was given and replies.
type inner struct {
	mu   sync.Mutex
	seen []sessions.TurnInput
}

func (r *inner) Run(_ context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	r.mu.Lock()
	r.seen = append(r.seen, *in)
	r.mu.Unlock()
	return &sessions.TurnOutput{
		History: []chat.Message{{Role: "user", Content: in.Entry.Text}, {Role: "assistant", Content: "ok"}},
		Outbox:  []outbox.Message{{Target: in.Origin, Text: "ok", ReplyTo: in.Entry.MessageID, Kind: "reply"}},
		End:     sessions.TurnDone,
	}, nil
}

func (r *inner) runs() []sessions.TurnInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sessions.TurnInput(nil), r.seen...)
}

// harness makes media runners over one home and one inner runner.
type harness struct {
	t     *testing.T
	home  string
	inner *inner
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, home: t.TempDir(), inner: &inner{}}
}

// runner is a media runner on the harness's home with opts; a fetcher,
// when given, serves the telegram platform.
func (h *harness) runner(opts media.Options, f *fetcher) *media.Runner {
	opts.Home = h.home
	if f != nil {
		opts.Fetcher = func(platform string) adapters.Fetcher {
			if platform == "telegram" {
				return f
			}
			return nil
		}
	}
	return media.NewRunner(h.inner, opts)
}

const (
	conv  = "telegram:42"
	msgID = "17"
)

// entry is a person's message in conv with text and atts.
func entry(text string, atts ...sessions.Attachment) sessions.TurnInput {
	return sessions.TurnInput{
		Conv:   conv,
		Origin: outbox.Target{Platform: "telegram", Chat: "42"},
		Entry: sessions.Entry{ID: "e1", Inbound: sessions.Inbound{
			Conv: conv, Sender: "42", MessageID: msgID, Text: text, Attachments: atts, Kind: sessions.KindUser,
		}},
	}
}

// run runs r on in and returns the output and what the inner runner was
// given, failing when it was not called.
func (h *harness) run(r *media.Runner, in sessions.TurnInput) (sessions.TurnInput, sessions.TurnOutput) {
	h.t.Helper()
	before := len(h.inner.runs())
	out, err := r.Run(context.Background(), &in)
	if err != nil {
		h.t.Fatal(err)
	}
	runs := h.inner.runs()
	if len(runs) != before+1 {
		h.t.Fatalf("the turn's own run ran %d times, want once", len(runs)-before)
	}
	return runs[len(runs)-1], *out
}

// kept is where the harness's runners keep a file of msgID named name.
func (h *harness) kept(name string) string { return media.FilePath(h.home, conv, msgID, name) }

// notices are the notices of out.
func notices(out sessions.TurnOutput) []outbox.Message {
	var n []outbox.Message
	for _, m := range out.Outbox {
		if m.Kind == sessions.KindNotice {
			n = append(n, m)
		}
	}
	return n
}

// oneNoticeSaying checks that out has one notice and that it says each
// of wants, and returns the notices.
func oneNoticeSaying(t *testing.T, out sessions.TurnOutput, wants ...string) []outbox.Message {
	t.Helper()
	n := notices(out)
	if len(n) != 1 {
		t.Fatalf("notices = %v, want one", n)
	}
	for _, want := range wants {
		if !strings.Contains(n[0].Text, want) {
			t.Errorf("the notice %q does not say %s", n[0].Text, want)
		}
	}
	return n
}

// sttRequest is one request the fake speech-to-text server took.
type sttRequest struct {
	Path, Auth, Model, Filename, FileType string
	File                                  []byte
}

// sttServer is a fake OpenAI-compatible /audio/transcriptions endpoint
// that answers each request with the text of reply, or fails with
// status when it is set.
type sttServer struct {
	srv    *httptest.Server
	reply  string
	status int

	mu   sync.Mutex
	reqs []sttRequest
}

func newSTTServer(t *testing.T, reply string) *sttServer {
	s := &sttServer{reply: reply}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := sttRequest{Path: r.URL.Path, Auth: r.Header.Get("Authorization")}
		if err := r.ParseMultipartForm(32 << 20); err == nil {
			req.Model = r.FormValue("model")
			if f, hdr, err := r.FormFile("file"); err == nil {
				req.Filename, req.FileType = hdr.Filename, hdr.Header.Get("Content-Type")
				req.File, _ = io.ReadAll(f)
				f.Close()
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		status := s.status
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
			w.Write([]byte(`{"error":{"message":"the server is sad","type":"server_error"}}`))
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"text": s.reply})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sttServer) requests() []sttRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sttRequest(nil), s.reqs...)
}

func (s *sttServer) fail(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

// transcriber is a Transcriber of s, with key and no retries.
func (s *sttServer) transcriber(t *testing.T, key string) *media.Transcriber {
	tr, err := media.NewTranscriber(media.TranscriberOptions{BaseURL: s.srv.URL + "/v1", Model: "whisper-test", APIKey: key, MaxRetries: -1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
