// Package telegramfake is a fake Telegram Bot API server for tests. It
// answers POST /bot<token>/<method> as the Bot API does (multipart, JSON
// or urlencoded parameters; {"ok":…,"result":…} answers with error_code,
// description and parameters.retry_after), keeps the updates a test
// queues until a getUpdates offset confirms them, remembers the messages
// the bot sent, edited and deleted (photos and documents with their
// bytes), serves the files a test puts on it (getFile and
// /file/bot<token>/<file_path>), and records every call.
//
// A test presses a button of a message the bot sent (Press), which
// queues a callback_query update; answerCallbackQuery is recorded as
// any call is.
//
// A test scripts failures per method (Fail), holds a method's calls
// unanswered (Hold), rejects formatted text (RejectFormatted), and reads
// what happened through Calls, Sent and the poll counters. The server is
// shared safely by several adapters, in this process or in others
// pointed at URL: like Telegram, a getUpdates that arrives while another
// is waiting ends the waiting one with 409.
package telegramfake

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultToken is the token New uses when given none.
const DefaultToken = "123456789:TEST-token_for-herald"

// DefaultBotName is the bot's username, as getMe reports it.
const DefaultBotName = "herald_test_bot"

// DefaultMaxPoll caps how long getUpdates waits for an update, whatever
// timeout the client asks for, so tests stay fast.
const DefaultMaxPoll = 500 * time.Millisecond

// waitTimeout bounds how long the Wait helpers wait before failing the test.
const waitTimeout = 10 * time.Second

// Server is a fake Bot API. Its methods are safe for concurrent use.
type Server struct {
	t     testing.TB
	srv   *httptest.Server
	token string
	botID int64
	done  chan struct{} // closed when the test ends

	mu        sync.Mutex
	botName   string
	maxPoll   time.Duration
	changed   chan struct{} // closed and replaced on every call and queued update
	calls     []Call
	failures  map[string][]Failure
	held      map[string]bool // methods whose calls wait unanswered (Hold)
	holdAfter map[string]int  // calls of a method to let through before it is held (HoldAfter)
	holdNext  map[string]int  // calls of a method still to hold on their own (HoldNext)
	releases  map[string]int  // Release calls by method, which end a HoldNext
	holding   map[string]int  // calls waiting in a Hold now, by method
	rejectFmt int
	queue     []queued // updates not yet confirmed, in update_id order
	nextUpd   int64
	confirmed int64 // the highest offset a getUpdates asked for
	served    map[int64]int
	nextMsg   map[int64]int
	messages  map[int64]map[int]*Sent // chat → message id → a message the bot sent
	files     map[string]File         // by file_id (PutFile)
	nextFile  int
	commands  []Command
	webhook   Webhook
	poll      *poll // the getUpdates waiting now, if any
	polls     pollStats
}

// Call is one request as the server saw it.
type Call struct {
	Seq        int               // 1-based order of arrival
	Method     string            // as in the URL path
	Params     map[string]string // parameters; JSON values other than strings as JSON text
	RemoteAddr string            // the caller's address, to tell pollers apart
	Status     int               // the HTTP status answered
	At         time.Time
}

// Int reads the integer parameter name, or 0.
func (c Call) Int(name string) int64 {
	n, _ := strconv.ParseInt(c.Params[name], 10, 64)
	return n
}

// Failure is a scripted error answer.
type Failure struct {
	Status      int    // the HTTP status and error_code
	Description string // Telegram's description; default the status text
	RetryAfter  int    // parameters.retry_after, in seconds
	Raw         string // when set, the body as is (not JSON), as a proxy's error page
}

// Common failures, worded as Telegram words them.
var (
	// Pass is no failure: the call is answered as usual.
	Pass = Failure{}

	Blocked      = Failure{Status: http.StatusForbidden, Description: "Forbidden: bot was blocked by the user"}
	Kicked       = Failure{Status: http.StatusForbidden, Description: "Forbidden: bot was kicked from the group chat"}
	ChatNotFound = Failure{Status: http.StatusBadRequest, Description: "Bad Request: chat not found"}
	ServerError  = Failure{Status: http.StatusInternalServerError, Description: "Internal Server Error"}
	BadGateway   = Failure{Status: http.StatusBadGateway, Raw: "<html><body><h1>502 Bad Gateway</h1></body></html>"}
)

// TooManyRequests is Telegram's flood-control answer.
func TooManyRequests(retryAfter int) Failure {
	return Failure{Status: http.StatusTooManyRequests, Description: "Too Many Requests: retry after " + strconv.Itoa(retryAfter), RetryAfter: retryAfter}
}

// ParseError is Telegram's answer to formatted text it cannot parse.
const ParseError = "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 12"

// Sent is a message the bot sent, as it stands now.
type Sent struct {
	Chat      int64
	ID        int
	Thread    int    // message_thread_id, or 0
	ReplyTo   int    // reply_parameters.message_id, or 0
	Text      string // as sent (the markup included); a file's caption
	ParseMode string // "", "HTML", "MarkdownV2", …
	// Media is "photo" or "document" for a file the bot sent (sendPhoto,
	// sendDocument), "" for text; FileName and Data are the upload's.
	Media    string
	FileName string
	Data     []byte
	Edits    int
	Deleted  bool
	// Buttons are the message's inline keyboard, row by row, as it
	// stands: an edit without a reply_markup removes it, as on Telegram.
	Buttons [][]Button
}

// Button is one button of an inline keyboard.
type Button struct {
	Text string `json:"text"`
	Data string `json:"callback_data"`
}

// Command is one entry of the bot's command menu.
type Command struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// Webhook is what setWebhook registered.
type Webhook struct {
	URL    string
	Secret string
}

// New starts a fake Bot API for token (DefaultToken when empty) that
// stops when t ends.
func New(t testing.TB, token string) *Server {
	t.Helper()
	if token == "" {
		token = DefaultToken
	}
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	s := &Server{
		t:         t,
		token:     token,
		botID:     id,
		done:      make(chan struct{}),
		botName:   DefaultBotName,
		maxPoll:   DefaultMaxPoll,
		changed:   make(chan struct{}),
		failures:  map[string][]Failure{},
		held:      map[string]bool{},
		holdAfter: map[string]int{},
		holdNext:  map[string]int{},
		releases:  map[string]int{},
		holding:   map[string]int{},
		nextUpd:   1000,
		served:    map[int64]int{},
		nextMsg:   map[int64]int{},
		messages:  map[int64]map[int]*Sent{},
		files:     map[string]File{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// URL is the Bot API base URL (requests go to URL/bot<token>/<method>).
func (s *Server) URL() string { return s.srv.URL }

// Token is the bot token the server accepts.
func (s *Server) Token() string { return s.token }

// BotID is the bot's user id (the token's first part).
func (s *Server) BotID() int64 { return s.botID }

// BotName is the bot's username, without the @.
func (s *Server) BotName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.botName
}

// SetMaxPoll changes how long getUpdates waits at most.
func (s *Server) SetMaxPoll(d time.Duration) {
	s.mu.Lock()
	s.maxPoll = d
	s.mu.Unlock()
}

// Fail makes the next n calls of method answer f, after any failures
// scripted before for it. With f Pass the calls are answered as usual,
// which places a failure after them.
func (s *Server) Fail(method string, n int, f Failure) {
	s.mu.Lock()
	for range n {
		s.failures[method] = append(s.failures[method], f)
	}
	s.mu.Unlock()
}

// Hold makes every later call of method (any but getUpdates) wait,
// unanswered and not yet done, until Release: a platform that has the
// request but has not acted on it. A call whose caller gives up first
// (it timed out, its process died) is dropped: it does nothing and is
// not recorded.
func (s *Server) Hold(method string) {
	s.mu.Lock()
	s.held[method] = true
	s.mu.Unlock()
}

// HoldAfter lets the next n calls of method be answered and holds every
// later one, as Hold does: a send in parts cut after its first n parts.
func (s *Server) HoldAfter(method string, n int) {
	s.mu.Lock()
	if n <= 0 {
		s.held[method] = true
	} else {
		s.holdAfter[method] = n
	}
	s.mu.Unlock()
}

// HoldNext holds the next n calls of method, as Hold does, and lets the
// later ones be answered: the sends of one process held while another's
// go through.
func (s *Server) HoldNext(method string, n int) {
	s.mu.Lock()
	s.holdNext[method] += n
	s.mu.Unlock()
}

// Release lets the held calls of method, and later ones, be answered.
func (s *Server) Release(method string) {
	s.mu.Lock()
	delete(s.held, method)
	delete(s.holdAfter, method)
	delete(s.holdNext, method)
	s.releases[method]++
	s.changedLocked()
	s.mu.Unlock()
}

// Holding reports how many calls of method wait in a Hold now.
func (s *Server) Holding(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding[method]
}

// WaitHolding waits until exactly n calls of method wait in a Hold. Call
// it from the test's goroutine.
func (s *Server) WaitHolding(method string, n int) {
	s.t.Helper()
	if !s.waitFor(func() bool { return s.holding[method] == n }) {
		s.t.Fatalf("telegramfake: %d %s calls held, want %d within %s", s.Holding(method), method, n, waitTimeout)
	}
}

// RejectFormatted makes the next n sendMessage or editMessageText calls
// that carry a parse_mode answer 400 ParseError; plain text still goes.
func (s *Server) RejectFormatted(n int) {
	s.mu.Lock()
	s.rejectFmt += n
	s.mu.Unlock()
}

// Calls returns the calls of the methods named (every call when none is),
// in order of arrival.
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callsLocked(methods)
}

func (s *Server) callsLocked(methods []string) []Call {
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || slices.Contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until at least n calls of method were answered and
// returns them; after a while it fails the test. Call it from the test's
// goroutine.
func (s *Server) WaitCalls(method string, n int) []Call {
	s.t.Helper()
	var got []Call
	if !s.waitFor(func() bool {
		got = s.callsLocked([]string{method})
		return len(got) >= n
	}) {
		s.t.Fatalf("telegramfake: %d %s calls, want %d within %s", len(got), method, n, waitTimeout)
	}
	return got
}

// Sent returns the messages the bot sent to chat that stand now (not
// deleted), in order.
func (s *Server) Sent(chat int64) []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sent
	for _, m := range s.messages[chat] {
		if !m.Deleted {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b Sent) int { return a.ID - b.ID })
	return out
}

// WaitSent waits until at least n messages stand in chat and returns them.
func (s *Server) WaitSent(chat int64, n int) []Sent {
	s.t.Helper()
	if !s.waitFor(func() bool { return s.countSentLocked(chat) >= n }) {
		s.t.Fatalf("telegramfake: %d messages in chat %d, want %d within %s", s.countSentLocked(chat), chat, n, waitTimeout)
	}
	return s.Sent(chat)
}

func (s *Server) countSentLocked(chat int64) int {
	n := 0
	for _, m := range s.messages[chat] {
		if !m.Deleted {
			n++
		}
	}
	return n
}

// Commands returns the command menu last set with setMyCommands.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.commands)
}

// Webhook returns the webhook registered now (zero when none).
func (s *Server) Webhook() Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// waitFor waits until cond, called with s.mu held, holds. It reports
// false after waitTimeout or when the test ended.
func (s *Server) waitFor(cond func() bool) bool {
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		case <-s.done:
			return false
		}
	}
}

// changedLocked wakes everything waiting on the server's state.
func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
