// Package api is herald's local HTTP adapter: an OpenAI-compatible
// /v1/chat/completions endpoint, plus herald's own endpoints to post a
// message to a conversation and to read or follow what herald sent it.
//
// Conversations of this adapter are keyed "api:<id>" and replies go to the
// outbox target "api:<id>". Sending a message through the adapter appends it
// to the conversation's timeline in the store; an HTTP request waiting for a
// reply reads it from there. Because the timeline is shared, a reply that
// another gateway process delivered is found too (by polling), so a client
// may talk to any process of the cluster.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Platform is this adapter's name in conversation keys and outbox targets.
const Platform = "api"

// Defaults for Options.
const (
	DefaultMaxBodyBytes = 4 << 20
	DefaultPoll         = 100 * time.Millisecond
	DefaultMaxWait      = 10 * time.Minute
	DefaultKeepAlive    = 15 * time.Second
	// DefaultKanbanClaimTTL is kanban.claim_ttl_seconds' default.
	DefaultKanbanClaimTTL = 15 * time.Minute
)

// Options configure a Server.
type Options struct {
	// Inbox takes the messages the API receives (the router). When nil,
	// the inbox passed to Run is used; until then requests get 503.
	Inbox adapters.Inbox
	// Timeline keeps what was sent to API conversations. Required.
	Timeline sessions.Timeline
	// APIKey, when set, is required as "Authorization: Bearer <key>" on
	// every route.
	APIKey string
	// Deltas, when set, streams a completion's reply as the model writes
	// it, when its turn runs in this process (the turn worker's
	// TurnWorkerOptions.Deltas); otherwise, or without it, a streamed
	// completion gets the reply whole when its turn ends.
	Deltas *sessions.Deltas
	// Models are the model names GET /v1/models lists: the model the
	// gateway's turns run on (a request's "model" is only echoed).
	Models []string
	// MaxBodyBytes bounds a request body; default 4 MiB.
	MaxBodyBytes int64
	// Clock stamps the completions' created time; default the wall clock.
	Clock clock.Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Poll is how often a waiting request reads the timeline, so that a
	// reply delivered by another gateway process is seen; default 100 ms.
	Poll time.Duration
	// MaxWait bounds how long a completion request waits for its reply
	// before it answers 504; default 10 minutes.
	MaxWait time.Duration
	// KeepAlive is the interval of SSE comments that keep idle streams
	// open through proxies; default 15 s.
	KeepAlive time.Duration
	// Files keeps the bytes of the files a message carries (a
	// completion's image and audio parts, a form's file parts) until its
	// turn has committed (media.ReleaseFiles), and those of the files
	// sent to API conversations, served at their timeline items' urls.
	// Without it, a request with files is refused and none is served.
	Files media.Store
	// MaxFileBytes bounds one file a message carries
	// (attachments.max_bytes); default config.DefaultAttachmentMaxBytes,
	// at most media.MaxFileBytes.
	MaxFileBytes int64
	// FetchTimeout bounds the download of an image a completion names by
	// an http(s) URL, on Clock; default 20 s.
	FetchTimeout time.Duration
	// Routes are the domains' routes the API serves beside its own,
	// under its key: DelegationRoutes, CronRoutes, KanbanRoutes,
	// ApprovalRoutes, OutboxRoutes, ModelKeyRoutes, ConversationRoutes. A domain's paths not mounted answer
	// 404 like any unknown route.
	Routes []Routes
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = config.DefaultAttachmentMaxBytes
	}
	o.MaxFileBytes = min(o.MaxFileBytes, media.MaxFileBytes)
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	return o
}

// Server is the API adapter and its HTTP handler.
type Server struct {
	opts  Options
	log   *slog.Logger
	inbox atomic.Pointer[adapters.Inbox]
	mux   *http.ServeMux
	fetch *http.Client // downloads the images completions name by URL

	// The domains' services whose routes are mounted (Options.Routes);
	// nil when not.
	delegations Delegations
	cron        Cron
	kanban      *kanbanRoutes
	approvals   Approvals

	wake  wakeups // local sends wake the requests waiting on their conversation
	close sync.Once
	done  chan struct{} // closed when Run returns: streams end so the HTTP server can shut down
}

var (
	_ adapters.Adapter = (*Server)(nil)
	_ http.Handler     = (*Server)(nil)
)

// New returns a Server. It panics without a Timeline, a wiring mistake.
func New(opts Options) *Server {
	if opts.Timeline == nil {
		panic("api.New: Options.Timeline is required")
	}
	opts = opts.withDefaults()
	s := &Server{
		opts:  opts,
		log:   opts.Logger.With("platform", Platform),
		fetch: newFetchClient(),
		done:  make(chan struct{}),
	}
	if opts.Inbox != nil {
		s.inbox.Store(&opts.Inbox)
	}
	s.routes()
	for _, r := range opts.Routes {
		r.mount(s)
	}
	return s
}

// Routes are a domain's routes of the API. Its handlers answer as the
// API's own do, so only this package makes them.
type Routes interface {
	mount(s *Server)
}

// Platform returns "api".
func (s *Server) Platform() string { return Platform }

// Run serves until ctx ends. Requests arrive over HTTP, not through Run;
// inbox is used when Options.Inbox was not set. When Run returns, open
// event streams and waiting requests end.
func (s *Server) Run(ctx context.Context, inbox adapters.Inbox) error {
	if inbox != nil && s.inbox.Load() == nil {
		s.inbox.Store(&inbox)
	}
	<-ctx.Done()
	s.close.Do(func() { close(s.done) })
	return nil
}

// Send appends m to its conversation's timeline and wakes the requests
// waiting on it. A store that cannot be reached makes the send Transient;
// a message the store refuses as it is (no id, too large) is Permanent.
// m's files are listed in the item with the path each is served at: their
// bytes stay in the store (Options.Files) once m was accepted.
func (s *Server) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	conv, ok := targetConv(m)
	if !ok {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "target " + m.Target.String() + " is not an api conversation"}
	}
	item := sessions.TimelineItem{ID: m.ID, Conv: conv, Kind: m.Kind, Text: m.Text, ReplyTo: m.ReplyTo, Meta: m.Meta, Files: timelineFiles(conv, m.Files)}
	_, err := s.opts.Timeline.AppendTimeline(ctx, item)
	if err != nil {
		s.log.Warn("timeline append failed", "conv", conv, "outbox_id", m.ID, "err", err)
		switch errs.CodeOf(err) {
		case errs.Invalid, errs.TooLarge:
			return adapters.SendResult{Outcome: adapters.Permanent, Reason: err.Error()}
		}
		return adapters.SendResult{Outcome: adapters.Transient, Reason: err.Error()}
	}
	s.wake.wake(conv)
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.ID}
}

// targetConv returns the conversation whose timeline m belongs to. The
// target decides: a message another conversation sent here (send_message
// from a chat on another platform) carries that conversation in Conv, but
// is shown to "api:<chat>".
func targetConv(m outbox.Message) (string, bool) {
	switch {
	case m.Target.Platform == Platform && m.Target.Chat != "":
		return Platform + ":" + m.Target.Chat, true
	case m.Target.Platform == "" && strings.HasPrefix(m.Conv, Platform+":"):
		return m.Conv, true
	}
	return "", false
}

// ServeHTTP serves the API's routes. Anything else is a JSON 404, so a
// gateway that adds its own routes (health, metrics) registers them on its
// own mux and hands the rest here; see Mount.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.refused(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Guard puts h behind the API key, as the API's own routes are. With no
// key configured, h is served as it is.
func (s *Server) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.refused(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// refused answers 401 to a request without the API key, and reports
// whether it did. A card's worker calls its card's worker routes with
// its worker token instead (kanbanWorker).
func (s *Server) refused(w http.ResponseWriter, r *http.Request) bool {
	if s.authorized(r) || s.kanbanWorker(r) {
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
	writeError(w, http.StatusUnauthorized, typeAuth, "a valid API key is required: Authorization: Bearer <key>")
	return true
}

// Mount registers the API on mux as its catch-all "/". Routes that mux
// has or gets for more specific patterns ("/healthz", "/metrics") stay
// its own, behind the API key only when Guard puts them there.
func (s *Server) Mount(mux *http.ServeMux) { mux.Handle("/", s) }

// RequireKey refuses an API without a key on an address that is not
// loopback: anyone who can reach it could talk to the agent.
func RequireKey(addr, key string) error {
	if key != "" || (config.Config{HTTP: config.HTTP{Addr: addr}}).IsLoopback() {
		return nil
	}
	return errs.E("api.RequireKey", errs.Invalid, "http.addr %s is not loopback: set http.api_key (HERALD_API_KEY) to serve the API there", addr)
}

// inboxOrNil returns the inbox messages go to, or nil before there is one.
func (s *Server) inboxOrNil() adapters.Inbox {
	if p := s.inbox.Load(); p != nil {
		return *p
	}
	return nil
}
