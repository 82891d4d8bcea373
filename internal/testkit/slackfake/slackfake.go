// Package slackfake is a fake Slack for tests that drive the real Slack
// SDK: the Web API methods herald calls (auth.test, chat.postMessage,
// chat.update, chat.delete, apps.connections.open, and files upload v2:
// files.getUploadURLExternal, the upload URL, files.completeUploadExternal),
// the messages the bot posted as they stand (their blocks and buttons
// included, which a test presses: Press), the url_private of the files a test puts on it, served to the bot
// token only, and a Socket Mode websocket that says hello, sends the
// envelopes a test queues and records the acks. Every Web API call is recorded, and a test can script
// the next answers of a method: a rate limit with Retry-After, a 5xx, or
// one of Slack's error strings.
package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tokens and identities the fake answers with unless a test changes them
// before the first request.
const (
	BotToken  = "xoxb-herald-test"
	AppToken  = "xapp-herald-test"
	TeamID    = "T0HERALD"
	BotUserID = "U0HERALDBOT"
	BotID     = "B0HERALD"
)

// waitTimeout bounds every Wait, so a stuck adapter fails its test fast.
const waitTimeout = 10 * time.Second

// Call is one Web API request as the fake saw it.
type Call struct {
	Method string     // e.g. "chat.postMessage"
	Token  string     // from the form's token or the bearer header
	Params url.Values // the form fields (a JSON body's top-level fields)
	// TS is the ts the fake answered with (chat.postMessage, chat.update,
	// chat.delete); empty for a call that failed.
	TS string
}

// Failure is a scripted answer to one call of a method. The zero Failure
// lets its call through, so a script can fail the second call only.
type Failure struct {
	// Status is the HTTP status to answer with; zero answers 200 with
	// ok:false and Error.
	Status int
	// RetryAfter is sent as the Retry-After header in seconds, when above
	// zero (with Status 429 the SDK reads it as a rate limit).
	RetryAfter int
	// Error is Slack's error string, e.g. "channel_not_found".
	Error string
}

// Server is the fake. Its fields may be changed before the first request.
type Server struct {
	BotToken  string
	AppToken  string
	TeamID    string
	BotUserID string
	BotID     string
	// PingEvery is how often the socket pings the client, as Slack does;
	// the SDK reconnects when pings stop.
	PingEvery time.Duration

	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	calls    []Call
	failures map[string][]Failure
	seq      int           // the last ts (or file id) handed out
	changed  chan struct{} // closed and replaced whenever something is recorded
	socket   socketState
	files    map[string]File    // PutFile's, by id
	uploads  map[string]*upload // upload URLs handed out, by file id
	uploaded []Uploaded
	messages map[string]*Message // the bot's, by "<channel>/<ts>"
}

// New starts a fake Slack; it stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{
		BotToken:  BotToken,
		AppToken:  AppToken,
		TeamID:    TeamID,
		BotUserID: BotUserID,
		BotID:     BotID,
		PingEvery: time.Second,
		t:         t,
		failures:  map[string][]Failure{},
		changed:   make(chan struct{}),
		files:     map[string]File{},
		uploads:   map[string]*upload{},
		messages:  map[string]*Message{},
	}
	s.socket.init()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", s.serveAPI)
	mux.HandleFunc("/socket", s.serveSocket)
	mux.HandleFunc("GET /files-pri/{file}/{name}", s.serveFile)
	mux.HandleFunc("GET /signin", s.serveSignIn)
	mux.HandleFunc("POST /upload/v1/{id}", s.serveUpload)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.socket.close()
		s.srv.Close()
	})
	return s
}

// URL is the Web API base to configure (SLACK_API_URL); the SDK adds the
// method name after a slash.
func (s *Server) URL() string { return s.srv.URL + "/api" }

// Fail makes the next call of method answer f; several calls queue up
// and are used in order.
func (s *Server) Fail(method string, f ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], f...)
}

// Calls returns the recorded calls of method, or of every method when
// method is empty, in order.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until method has been called at least n times and
// returns its calls; the test fails after a timeout.
func (s *Server) WaitCalls(method string, n int) []Call {
	s.t.Helper()
	var calls []Call
	s.waitFor(fmt.Sprintf("%d calls of %s", n, method), func() bool {
		calls = s.Calls(method)
		return len(calls) >= n
	})
	return calls
}

// waitFor waits until cond holds, re-checking whenever the fake records
// something; it fails the test after waitTimeout.
func (s *Server) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			s.t.Fatalf("slackfake: timed out waiting for %s", what)
		}
	}
}

// notifyLocked wakes the waiters; s.mu is held.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	params, err := readParams(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	token := params.Get("token")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = b
	}
	call := Call{Method: method, Token: token, Params: params}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	if q := s.failures[method]; len(q) > 0 {
		s.failures[method] = q[1:]
		if q[0] != (Failure{}) {
			s.calls = append(s.calls, call)
			writeFailure(w, q[0])
			return
		}
	}
	want := s.BotToken
	if method == "apps.connections.open" {
		want = s.AppToken
	}
	if token != want {
		s.calls = append(s.calls, call)
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	resp := s.answerLocked(method, &call)
	s.calls = append(s.calls, call)
	writeJSON(w, resp)
}

// answerLocked is the successful answer to call; it sets call.TS where
// the method makes or names a message.
func (s *Server) answerLocked(method string, call *Call) map[string]any {
	p := call.Params
	switch method {
	case "auth.test":
		return map[string]any{"ok": true, "url": "https://herald-test.slack.com/", "team": "herald-test",
			"user": "herald", "team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID}
	case "chat.postMessage":
		s.seq++
		ts := fmt.Sprintf("1700000000.%06d", s.seq)
		if why := s.postLocked(p, ts); why != "" {
			return map[string]any{"ok": false, "error": why}
		}
		call.TS = ts
		return map[string]any{"ok": true, "channel": p.Get("channel"), "ts": call.TS,
			"message": map[string]any{"text": p.Get("text"), "ts": call.TS, "thread_ts": p.Get("thread_ts"), "bot_id": s.BotID}}
	case "chat.update":
		if why := s.updateLocked(p); why != "" {
			return map[string]any{"ok": false, "error": why}
		}
		call.TS = p.Get("ts")
		return map[string]any{"ok": true, "channel": p.Get("channel"), "ts": call.TS, "text": p.Get("text")}
	case "chat.delete":
		if m, ok := s.messages[p.Get("channel")+"/"+p.Get("ts")]; ok {
			m.Deleted = true
		}
		call.TS = p.Get("ts")
		return map[string]any{"ok": true, "channel": p.Get("channel"), "ts": call.TS}
	case "files.getUploadURLExternal":
		return s.getUploadURLLocked(p)
	case "files.completeUploadExternal":
		return s.completeUploadLocked(p)
	case "apps.connections.open":
		return map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/socket"}
	}
	return map[string]any{"ok": false, "error": "unknown_method"}
}

// readParams reads a form body (most methods) or a JSON body (the SDK
// posts apps.connections.open as JSON) into url.Values.
func readParams(r *http.Request) (url.Values, error) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		return r.Form, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	v := url.Values{}
	if len(body) == 0 {
		return v, nil
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	for k, x := range fields {
		if str, ok := x.(string); ok {
			v.Set(k, str)
		} else {
			b, _ := json.Marshal(x)
			v.Set(k, string(b))
		}
	}
	return v, nil
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
	}
	if f.Status != 0 && f.Status != http.StatusOK {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, "<html>%d</html>", f.Status)
		return
	}
	writeJSON(w, map[string]any{"ok": false, "error": f.Error})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
