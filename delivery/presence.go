package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for PresenceOptions.
const (
	// DefaultTypingEvery is how often the typing indicator is sent again:
	// platforms let it lapse after about five seconds.
	DefaultTypingEvery = 4 * time.Second
	// DefaultStatusEvery is the least time between two edits of a status
	// line; platforms rate-limit edits, and a chat that flickers reads
	// worse than one a step behind.
	DefaultStatusEvery = 2 * time.Second
	// DefaultPresenceTimeout bounds each platform call.
	DefaultPresenceTimeout = 5 * time.Second
)

// PresenceOptions configure NewPresence.
type PresenceOptions struct {
	// Adapters are searched for those implementing adapters.Presence; a
	// turn whose origin is another platform shows nothing.
	Adapters []adapters.Adapter
	// TypingEvery, StatusEvery and Timeout: 0 means the defaults.
	TypingEvery time.Duration
	StatusEvery time.Duration
	Timeout     time.Duration
	Clock       clock.Clock  // nil: the wall clock
	Logger      *slog.Logger // nil: slog.Default()
}

// Presence shows this process's running turns in their chats: the typing
// indicator at the start and every TypingEvery, and, once the turn runs a
// tool, one status line naming the latest step, edited at most every
// StatusEvery and removed when the turn ends (the answer comes through the
// outbox). Each watched turn has one goroutine making the platform calls,
// so Progress and End return at once; a failed call is logged and never
// touches the turn.
type Presence struct {
	by          map[string]adapters.Presence // by platform
	typingEvery time.Duration
	statusEvery time.Duration
	timeout     time.Duration
	clock       clock.Clock
	log         *slog.Logger
	turnFollower
}

// NewPresence returns a driver; Start runs it.
func NewPresence(opts PresenceOptions) *Presence {
	p := &Presence{
		by:           map[string]adapters.Presence{},
		typingEvery:  opts.TypingEvery,
		statusEvery:  opts.StatusEvery,
		timeout:      opts.Timeout,
		clock:        opts.Clock,
		log:          opts.Logger,
		turnFollower: turnFollower{op: "delivery.Presence"},
	}
	for _, a := range opts.Adapters {
		if pr, ok := a.(adapters.Presence); ok {
			p.by[a.Platform()] = pr
		}
	}
	if p.typingEvery <= 0 {
		p.typingEvery = DefaultTypingEvery
	}
	if p.statusEvery <= 0 {
		p.statusEvery = DefaultStatusEvery
	}
	if p.timeout <= 0 {
		p.timeout = DefaultPresenceTimeout
	}
	if p.clock == nil {
		p.clock = clock.Real{}
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	return p
}

// Drives reports whether any adapter shows presence: without one the turn
// worker need not call Watch at all.
func (p *Presence) Drives() bool { return len(p.by) > 0 }

// Watch follows one turn (sessions.TurnWorkerOptions.Watch). It returns at
// once; a turn on a platform without presence, or one starting while the
// driver is not running, is not shown.
func (p *Presence) Watch(_ context.Context, conv string, origin outbox.Target) sessions.TurnWatch {
	pr, ok := p.by[origin.Platform]
	if !ok {
		return noWatch{}
	}
	w := &turnPresence{
		p:      p,
		pr:     pr,
		target: origin,
		log:    p.log.With("conv", conv),
		kick:   make(chan struct{}, 1),
		end:    make(chan struct{}),
	}
	if !p.follow(w.run) {
		return noWatch{}
	}
	return w
}

// noWatch follows nothing.
type noWatch struct{}

func (noWatch) Progress(sessions.Progress) {}
func (noWatch) End()                       {}

// turnPresence shows one turn. Progress and End only note what happened
// and wake run, which makes every platform call in order.
type turnPresence struct {
	p      *Presence
	pr     adapters.Presence
	target outbox.Target
	log    *slog.Logger

	mu    sync.Mutex
	step  string // the latest step
	fresh bool   // step is not on the status line yet
	kick  chan struct{}

	endOnce sync.Once
	end     chan struct{}
}

func (w *turnPresence) Progress(pr sessions.Progress) {
	w.mu.Lock()
	w.step, w.fresh = pr.Tool, true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *turnPresence) End() { w.endOnce.Do(func() { close(w.end) }) }

// latest returns the latest step and whether it still waits to be shown.
func (w *turnPresence) latest() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.step, w.fresh
}

// shown notes that step is on the status line, unless a newer one came.
func (w *turnPresence) shown(step string) {
	w.mu.Lock()
	if w.step == step {
		w.fresh = false
	}
	w.mu.Unlock()
}

// statusText is the status line for a step.
func statusText(tool string) string {
	if tool == "" {
		return "Working…"
	}
	return fmt.Sprintf("Working… (tool: %s)", tool)
}

// run makes the platform calls for one turn until it ends. Times are the
// driver's clock's, read after a call returned, so that two edits are
// StatusEvery apart however long the platform took; steps that come
// faster are coalesced, the latest shown.
func (w *turnPresence) run() {
	p := w.p
	ctx := p.ctx
	select {
	case <-w.end:
		return // over before it could be shown
	default:
	}
	w.typing(ctx)
	lastTyping := p.clock.Now()
	var (
		id         string    // the status line's, once posted
		lastStatus time.Time // the last post or edit; zero before the first
		onLine     string    // the step the status line shows
	)
	timer := time.NewTimer(p.typingEvery)
	defer timer.Stop()
	for {
		select {
		case <-w.end:
			w.clear(ctx, id)
			return
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}

		step, fresh := w.latest()
		if fresh && id != "" && step == onLine {
			w.shown(step) // the same tool again: the line already says it
			fresh = false
		}
		if fresh && (lastStatus.IsZero() || !p.clock.Now().Before(lastStatus.Add(p.statusEvery))) {
			cctx, cancel := context.WithTimeout(ctx, p.timeout)
			newID, err := w.pr.Status(cctx, w.target, id, statusText(step))
			cancel()
			lastStatus = p.clock.Now()
			switch {
			case err != nil:
				// The step stays fresh: the next try is StatusEvery away.
				w.log.Warn("showing the turn's step failed", "err", err, "edit", id != "")
			default:
				w.shown(step)
				onLine = step
				if newID != "" {
					id = newID
				}
			}
		}
		if !p.clock.Now().Before(lastTyping.Add(p.typingEvery)) {
			w.typing(ctx)
			lastTyping = p.clock.Now()
		}

		// Sleep until the typing indicator lapses or, with a step to
		// show, until the status line may change.
		now := p.clock.Now()
		wait := lastTyping.Add(p.typingEvery).Sub(now)
		if _, fresh := w.latest(); fresh {
			wait = min(wait, lastStatus.Add(p.statusEvery).Sub(now))
		}
		timer.Reset(max(wait, 0))
	}
}

func (w *turnPresence) typing(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.p.timeout)
	defer cancel()
	if err := w.pr.Typing(ctx, w.target); err != nil {
		w.log.Debug("the typing indicator failed", "err", err)
	}
}

// clear removes the status line id, if one was posted.
func (w *turnPresence) clear(ctx context.Context, id string) {
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.p.timeout)
	defer cancel()
	if err := w.pr.ClearStatus(ctx, w.target, id); err != nil {
		w.log.Warn("removing the status line failed", "err", err)
	}
}
