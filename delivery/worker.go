// Package delivery sends the outbox's messages through the adapters that
// serve their platforms, and shows on those platforms what a running turn
// does. The worker is made of one part per file: the claim loop
// (claim.go), the per-target lanes and their senders (lanes.go, send.go),
// the room it claims within (room.go), the hand-back order (order.go),
// the heartbeat (heartbeat.go), the acker (ack.go), and a turn's commit
// handing its messages straight to it (handoff.go). Routes says which
// adapter sends for which platform; Streaming and Presence drive what a
// chat shows while a turn runs.
package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/outbox"
)

// Defaults for Options.
const (
	DefaultSenders     = 8
	DefaultBatch       = 256
	DefaultClaimTTL    = time.Minute
	DefaultSendTimeout = 20 * time.Second
	DefaultMaxAttempts = 12
	DefaultBackoffMin  = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultRouteRetry  = 5 * time.Second
	DefaultPollMin     = 5 * time.Millisecond
	DefaultPollMax     = 250 * time.Millisecond
	DefaultAckLinger   = 2 * time.Millisecond
)

// storeTimeout bounds one outbox write made after a send. It runs on a
// context that shutdown does not cancel: a message the platform accepted
// must be acked even while the process stops.
const storeTimeout = 10 * time.Second

// claimMargin is the part of a claim kept free at its end (a fifth of a
// short claim): a send must return, and its ack reach the store, before
// the claim runs out and another worker may send the message again.
const claimMargin = 2 * time.Second

// Options configure New.
type Options struct {
	Outbox outbox.Store // required
	Routes *Routes      // the adapters that can send; required
	// Name identifies this process's claims; empty means host-pid-random.
	Name string
	// Senders is how many messages are sent at once (workers.deliveries);
	// 0 means DefaultSenders.
	Senders int
	// Batch bounds the messages one claim takes; 0 means DefaultBatch.
	// However large, the worker holds no more messages than its senders
	// send in a quarter of ClaimTTL, by how long sends have taken, and no
	// more than Senders until it has timed a send.
	Batch int
	// ClaimTTL is how long a claimed message is held before another
	// worker may send it; 0 means DefaultClaimTTL.
	ClaimTTL time.Duration
	// SendTimeout bounds one adapter Send (and is cut shorter when the
	// claim, or the heartbeat as last renewed, would run out first); 0
	// means DefaultSendTimeout.
	SendTimeout time.Duration
	// MaxAttempts is how many failed sends (transient or rate limited) a
	// message gets before it is dead-lettered; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait after a transient failure:
	// BackoffMin after the first, doubling with each attempt up to
	// BackoffMax. 0 means the defaults.
	BackoffMin, BackoffMax time.Duration
	// RouteRetry is how long a message whose route went away waits before
	// it is tried again; 0 means DefaultRouteRetry.
	RouteRetry time.Duration
	// PollMin and PollMax bound the wait between claims while nothing is
	// due: it starts at PollMin and doubles up to PollMax. Notify ends the
	// wait at once. 0 means the defaults.
	PollMin, PollMax time.Duration
	// AckLinger is how long the first ack of a batch waits for others to
	// join it (see ack.go); 0 means DefaultAckLinger.
	AckLinger time.Duration
	// Heartbeat, when positive, is how long the worker's heartbeat in the
	// store holds (outbox.Store.Beat), renewed every third of it: once it
	// runs out, as when the process dies, another worker's claim ends this
	// one's claims at once instead of when they run out. A claim that
	// takes messages renews it too. Past the last renewal's end (less a
	// margin) the worker sends nothing it holds, as another worker may
	// have taken it. 0 beats nothing.
	Heartbeat time.Duration
	// Redact masks herald's secrets in a message's text before it is sent
	// (a reply, a cron report, a kanban notification: whatever put it in
	// the outbox), and in a platform's failure reason before it is stored
	// or logged; nil keeps them as they are.
	Redact func(string) string
	// Settled is told, on a goroutine of its own, how the delivery of
	// each message with a Ref or with files ended: accepted by its
	// platform, or dead-lettered with reason. The domain that sent it
	// records it (a cron run), or forgets the files' bytes.
	Settled func(m outbox.Message, accepted bool, reason string)
	// Streamed, when set, is offered each message before the adapter's
	// Send: a turn's reply this process showed in progress is made the
	// reply in that message (Streaming.Send). It reports false when the
	// adapter's Send is to send the message.
	Streamed func(ctx context.Context, a adapters.Adapter, m outbox.Message) (adapters.SendResult, bool)
	// Files keeps the bytes of the messages' files (media.Store): each
	// is read into its File's Data before the adapter's Send. A file
	// whose bytes are gone dead-letters its message; one that cannot be
	// read now spends an attempt. Nil: a message with files is
	// dead-lettered.
	Files   Files
	Clock   clock.Clock  // nil means the wall clock
	Logger  *slog.Logger // nil means slog.Default()
	Metrics Metrics      // Attempt, Resent and Acked count; nil fields count nothing
}

// Worker drains the outbox through the adapters: one claim loop takes
// due messages for the platforms that have a route and hands them to up to
// Senders senders. Messages to one target are sent one after another, in
// the order claimed, so a conversation's replies arrive in order; when one
// has to wait (rate limit, backoff, no route), those behind it in this
// process wait with it.
type Worker struct {
	name     string
	log      *slog.Logger
	claimTTL time.Duration
	routes   *Routes
	clock    clock.Clock

	notices *notices
	doubt   *doubt
	room    *room
	order   *order
	lanes   *lanes
	sender  *sender
	beat    *heartbeat // nil without a heartbeat
	acks    *acker
	settled *settlements
	claims  *claimLoop
	// handoffs keeps the claim loop's claims and the commits handing
	// replies here apart: the store gives a claim the messages behind
	// those a commit handed here, and a commit the ones behind a claim's,
	// so each must be in the lanes before the other's store call begins.
	// A commit holds it shared from its offer until it returns (Handoff),
	// the loop alone from its claim until its messages are in the lanes.
	handoffs sync.RWMutex

	mu       sync.Mutex
	started  bool
	stopping bool
	stop     chan struct{}   // closed by Shutdown: claim no more
	base     context.Context // Start's context without its cancellation, for store writes
	// hardStop ends the sends in progress and the claim loop at once.
	hardStop context.CancelFunc
}

// New returns a delivery worker; Start runs it. Errors: Invalid (no
// outbox or routes).
func New(opts Options) (*Worker, error) {
	if opts.Outbox == nil || opts.Routes == nil {
		return nil, errs.E("delivery.New", errs.Invalid, "a delivery worker needs an outbox and routes")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	name := opts.Name
	if name == "" {
		name = proc.InstanceName()
	}
	log = log.With("worker", name)
	claimTTL := orDefault(opts.ClaimTTL, DefaultClaimTTL)
	senders := opts.Senders
	if senders <= 0 {
		senders = DefaultSenders
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	redact := opts.Redact
	if redact == nil {
		redact = func(s string) string { return s }
	}
	margin := min(claimMargin, claimTTL/5)
	pollMin := orDefault(opts.PollMin, DefaultPollMin)

	w := &Worker{
		name:     name,
		log:      log,
		claimTTL: claimTTL,
		routes:   opts.Routes,
		clock:    clk,
		notices:  &notices{wake: make(chan struct{}, 1)},
		doubt:    &doubt{claimTTL: claimTTL, clock: clk},
		room:     &room{senders: senders, claimTTL: claimTTL, free: make(chan struct{}, 1)},
		order:    &order{claimTTL: claimTTL, backs: map[string]backMark{}},
		settled:  &settlements{fn: opts.Settled},
		stop:     make(chan struct{}),
	}
	if opts.Heartbeat > 0 {
		var err error
		w.beat, err = newHeartbeat(opts.Outbox, name, opts.Heartbeat, min(margin, opts.Heartbeat/6), clk, log)
		if err != nil {
			return nil, err
		}
	}
	w.lanes = &lanes{
		room:  w.room,
		order: w.order,
		clock: clk,
		slots: make(chan struct{}, senders),
		done:  make(chan struct{}),
		by:    map[string]*lane{},
	}
	w.acks = &acker{
		outbox:  opts.Outbox,
		linger:  orDefault(opts.AckLinger, DefaultAckLinger),
		metrics: opts.Metrics,
		log:     log,
		settled: w.settled,
		senders: w.lanes.done,
		wake:    make(chan struct{}, 1),
	}
	w.sender = &sender{
		outbox:      opts.Outbox,
		routes:      opts.Routes,
		claimTTL:    claimTTL,
		margin:      margin,
		sendTimeout: orDefault(opts.SendTimeout, DefaultSendTimeout),
		maxAttempts: maxAttempts,
		retry:       adapters.Backoff{Min: orDefault(opts.BackoffMin, DefaultBackoffMin), Max: orDefault(opts.BackoffMax, DefaultBackoffMax)},
		routeRetry:  orDefault(opts.RouteRetry, DefaultRouteRetry),
		redact:      redact,
		streamed:    opts.Streamed,
		files:       opts.Files,
		clock:       clk,
		log:         log,
		metrics:     opts.Metrics,
		beat:        w.beat,
		room:        w.room,
		acks:        w.acks,
		settled:     w.settled,
	}
	w.lanes.sender = w.sender
	w.claims = &claimLoop{
		outbox:   opts.Outbox,
		routes:   opts.Routes,
		name:     name,
		batch:    batch,
		ttl:      claimTTL,
		pollMin:  pollMin,
		pollMax:  max(orDefault(opts.PollMax, DefaultPollMax), pollMin),
		clock:    clk,
		log:      log,
		notices:  w.notices,
		doubt:    w.doubt,
		room:     w.room,
		order:    w.order,
		lanes:    w.lanes,
		beat:     w.beat,
		stop:     w.stop,
		claiming: &w.handoffs,
	}
	return w, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Start starts the claim loop. Ending ctx stops the worker hard: sends in
// progress are cancelled and their messages handed back. Use Shutdown to
// stop gracefully. Errors: Conflict (started before).
func (w *Worker) Start(ctx context.Context) error {
	const op = "delivery.Worker.Start"
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errs.E(op, errs.Conflict, "the delivery worker was started before")
	}
	w.started = true
	w.base = context.WithoutCancel(ctx)
	hard, hardStop := context.WithCancel(ctx)
	w.hardStop = hardStop
	if w.beat != nil {
		if err := w.beat.start(ctx); err != nil {
			return err
		}
	}
	w.lanes.start(hard)
	if err := w.claims.start(hard, op); err != nil {
		return err
	}
	return w.acks.start(w.base, op)
}

// Shutdown drains: the worker goes on claiming while messages are due and
// stops at the first claim that finds none, and the senders finish what
// they hold. When ctx ends first, sends in progress are cancelled and
// every message still held is handed back, due at once, for another
// process. It returns when every sender has ended.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopping {
		w.stopping = true
		w.mu.Unlock()
		return nil
	}
	w.stopping = true
	close(w.stop)
	w.mu.Unlock()

	// The acker returns after the last sender, once it wrote their acks.
	defer w.settled.wait()
	defer w.leave()
	if w.acks.wait(ctx) == nil {
		w.hardStop()
		return nil
	}
	w.hardStop()
	// The senders now only write hand-backs, and the acker the acks
	// queued, each bounded by storeTimeout; an adapter that ignores its
	// context could hold one longer.
	stuck, cancel := context.WithTimeout(context.Background(), 2*storeTimeout+time.Second)
	defer cancel()
	if w.acks.wait(stuck) != nil {
		return errs.E("delivery.Worker.Shutdown", errs.Internal, "a sender did not end after its send was cancelled")
	}
	return nil
}

// leave stops the heartbeat once nothing is sent any more, and tells the
// store this worker is gone: what it still holds (a write that failed)
// runs out as any claim does.
func (w *Worker) leave() {
	if w.beat != nil {
		w.beat.end(w.base)
	}
}

// running reports whether the worker was started and is not stopping.
func (w *Worker) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started && !w.stopping
}
