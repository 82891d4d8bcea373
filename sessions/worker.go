package sessions

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
)

// Defaults for TurnWorkerOptions.
const (
	DefaultTurns         = 64
	DefaultGrace         = 20 * time.Second
	DefaultMaxDeliveries = 5
	DefaultRetryDelay    = time.Second
	DefaultPollMin       = 5 * time.Millisecond
	DefaultPollMax       = 250 * time.Millisecond
)

// TurnMetrics are hooks the gateway hangs its counters on; nil fields are
// skipped. They are called from many goroutines at once.
type TurnMetrics struct {
	// Started: an agent turn began.
	Started func()
	// Finished: a turn committed, with how it ended and how long it ran.
	Finished func(end TurnEnd, took time.Duration)
	// Failed: a turn could not run or commit and its entry is left for a
	// retry, or was dropped after too many. reason is "history",
	// "runner", "commit", "control" or "dropped".
	Failed func(reason string)
	// Takeover: a claimed entry had been handed to a lease holder before
	// (Deliveries > 1): a worker died or gave it back mid-turn.
	Takeover func()
	// LeaseLost: a turn lost its lease and committed nothing.
	LeaseLost func()
}

// TurnWorkerOptions configure NewTurnWorker.
type TurnWorkerOptions struct {
	Store  Store      // required
	Runner TurnRunner // runs agent turns; required
	// Commands run the control entries the router queues; nil means
	// DefaultCommands(). Share one registry with the router.
	Commands *Commands
	// Name identifies this process as lease holder; empty means
	// host-pid-random.
	Name string
	// Turns is how many turns run at once (workers.turns); 0 means
	// DefaultTurns.
	Turns int
	// LeaseTTL is the lease of a running turn, renewed every third of it
	// (store.lease_ttl); 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Grace is how long Shutdown lets running turns finish before it
	// cancels them and hands their entries back; 0 means DefaultGrace.
	Grace time.Duration
	// HistoryMax bounds the stored history of a conversation, in messages
	// (store.history_max_messages): a turn's commit drops the oldest ones
	// beyond it, an assistant message that called tools together with
	// their results, so the history never starts with a tool result. 0
	// keeps everything.
	HistoryMax int
	// MaxDeliveries drops an entry, with a notice to its conversation,
	// when it has been handed out this many times without an ack (it
	// crashed its workers or never commits); 0 means
	// DefaultMaxDeliveries, negative never drops.
	MaxDeliveries int
	// RetryDelay is how long a turn that failed (the history could not be
	// read, the runner broke, the commit failed) keeps its lease before
	// handing its entry back, times the entry's deliveries so far, up to
	// half the lease: a failing store is not hammered, and an entry is
	// not dropped for MaxDeliveries failures within a blink. 0 means
	// DefaultRetryDelay.
	RetryDelay time.Duration
	// PollMin and PollMax bound the wait between claims while nothing
	// is ready: it starts at PollMin and doubles up to PollMax. A Wake
	// ends the wait at once. 0 means the defaults.
	PollMin, PollMax time.Duration
	// Watch, when set, is called as each agent turn starts, with the
	// conversation and where its replies go; the turn reports its steps
	// to the TurnWatch it returns and ends it when it ends, committed or
	// not. The gateway uses it to show a running turn in the chat (typing,
	// a status line). It must return quickly.
	Watch func(ctx context.Context, conv string, origin outbox.Target) TurnWatch
	// AnswerEach reports whether the clients of origin wait for an answer
	// to each message they send, as the local API's completions do. A
	// message from such an origin whose turn ends without a reply of its
	// own, because a newer message interrupted it or /new stopped it,
	// then gets a notice naming it, so the wait ends at once. nil means
	// no origin does: in a chat, the reply to the newer message is answer
	// enough.
	AnswerEach func(origin outbox.Target) bool
	// Committed, when set, is told of each agent turn that committed
	// other domains' writes (Finish.Writes), once it has: the part that
	// acts on them (the runner of a dispatch) starts at once, and stops
	// what a turn ended by /stop or /new started. It is called on the
	// turn's goroutine and must return quickly.
	Committed func(Committed)
	// Deltas, when set, gets the text a turn's model streams, for the
	// waiters in this process on that turn's reply (Deltas.Subscribe); a
	// turn streams only when one waits.
	Deltas *Deltas
	// Stream, when set, is called as each agent turn starts, with the
	// entry it answers and where its replies go; the text the turn's
	// model streams goes to the TurnStream it returns (nil: none), which
	// is ended when the turn ends, committed or not, before its commit.
	// The gateway uses it to show a reply in the chat as it is written.
	// It must return quickly.
	Stream  func(ctx context.Context, conv string, e Entry, origin outbox.Target) TurnStream
	Clock   clock.Clock  // nil means the wall clock
	Logger  *slog.Logger // nil means slog.Default()
	Metrics TurnMetrics
}

// TurnWatch follows one running turn (see TurnWorkerOptions.Watch).
type TurnWatch interface {
	Progress(Progress) // a step of the turn; called on the turn's goroutine
	End()              // the turn ended; called once
}

// TurnStream takes the text of one running turn as its model streams it
// (see TurnWorkerOptions.Stream).
type TurnStream interface {
	// Delta is a piece of text (TurnInput.Delta); called on the turn's
	// goroutine, it must return quickly.
	Delta(text string)
	// End says the turn ended; called before its commit. replied is
	// false for a turn that a stop or a newer message ended: it commits
	// no reply, and what streamed is not in its history; and for one
	// whose lease was lost, or that the worker handed back as it stopped:
	// it runs again elsewhere, which shows its own reply. A turn that
	// failed and runs again here ends with replied true: its reply may
	// still come. End returns facts for the Meta of the turn's messages
	// to its origin in answer to its entry (ReplyMetaStreamed), or nil.
	// A commit that finds the lease lost calls End(false) once more:
	// the reply said to come will not, from here.
	End(replied bool) map[string]string
}

// TurnWorker runs conversations' turns: one claim loop leases ready
// conversations and runs up to Turns of them at once, each in its own
// goroutine for as long as it runs (one that ran turns before, see
// runners.go). Nothing polls per turn: leases are
// renewed on timers, and signals reach turns through HandleSignal.
type TurnWorker struct {
	store         Store
	runner        TurnRunner
	watch         func(ctx context.Context, conv string, origin outbox.Target) TurnWatch
	answerEach    func(origin outbox.Target) bool
	committed     func(Committed)
	deltas        *Deltas
	stream        func(ctx context.Context, conv string, e Entry, origin outbox.Target) TurnStream
	commands      *Commands
	name          string
	ttl           time.Duration
	grace         time.Duration
	historyMax    int // stored history messages kept; 0: all
	maxDeliveries int
	retryDelay    time.Duration
	pollMin       time.Duration
	pollMax       time.Duration
	clock         clock.Clock
	log           *slog.Logger
	metrics       TurnMetrics

	wake  chan struct{} // a token asks the claim loop to claim now
	slots chan struct{} // one token per running turn
	// mayWait is set while other conversations may be ready: after a
	// Wake, and after a claim that got all it asked for. While it is
	// clear, a commit claims only when its own conversation has entries
	// left (Finish.ClaimIfLeft), sparing the store a search that would
	// find nothing; what other processes queue is found by the claim
	// loop's poll.
	mayWait atomic.Bool

	claims bgloop.Loop // the claim loop; stopped by Shutdown: claim no more
	timers turnTimers  // the running turns' lease renewals

	mu       sync.Mutex
	running  map[string]*activeTurn // by conversation
	started  bool
	stopping bool

	// base is Start's context without its cancellation, for the store
	// writes that must happen even while stopping (commits, releases).
	base context.Context
	// hard is cancelled when running turns must end now: past the grace
	// period, or when Start's context ends.
	hard       context.Context
	hardCancel context.CancelCauseFunc
	turns      sync.WaitGroup
	runners    *runners // the goroutines turns run on
}

// NewTurnWorker returns a worker; Start runs it. Errors: Invalid (no
// store or runner).
func NewTurnWorker(opts TurnWorkerOptions) (*TurnWorker, error) {
	const op = "sessions.NewTurnWorker"
	if opts.Store == nil || opts.Runner == nil {
		return nil, errs.E(op, errs.Invalid, "a turn worker needs a store and a runner")
	}
	w := &TurnWorker{
		store:         opts.Store,
		runner:        opts.Runner,
		watch:         opts.Watch,
		answerEach:    opts.AnswerEach,
		committed:     opts.Committed,
		deltas:        opts.Deltas,
		stream:        opts.Stream,
		commands:      opts.Commands,
		name:          opts.Name,
		ttl:           opts.LeaseTTL,
		grace:         opts.Grace,
		historyMax:    opts.HistoryMax,
		maxDeliveries: opts.MaxDeliveries,
		retryDelay:    opts.RetryDelay,
		pollMin:       opts.PollMin,
		pollMax:       opts.PollMax,
		clock:         opts.Clock,
		log:           opts.Logger,
		metrics:       opts.Metrics,
		wake:          make(chan struct{}, 1),
		running:       map[string]*activeTurn{},
	}
	turns := opts.Turns
	if turns <= 0 {
		turns = DefaultTurns
	}
	w.slots = make(chan struct{}, turns)
	if w.commands == nil {
		w.commands = DefaultCommands()
	}
	if w.name == "" {
		w.name = proc.InstanceName()
	}
	if w.ttl <= 0 {
		w.ttl = DefaultLeaseTTL
	}
	if w.grace <= 0 {
		w.grace = DefaultGrace
	}
	if w.maxDeliveries == 0 {
		w.maxDeliveries = DefaultMaxDeliveries
	}
	if w.retryDelay <= 0 {
		w.retryDelay = DefaultRetryDelay
	}
	if w.pollMin <= 0 {
		w.pollMin = DefaultPollMin
	}
	if w.pollMax < w.pollMin {
		w.pollMax = max(DefaultPollMax, w.pollMin)
	}
	if w.clock == nil {
		w.clock = clock.Real{}
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.log = w.log.With("worker", w.name)
	w.mayWait.Store(true) // nothing is known yet
	return w, nil
}

// Name is the lease holder name the worker claims with.
func (w *TurnWorker) Name() string { return w.name }

// Start starts the claim loop. Ending ctx stops the worker hard: running
// turns are cancelled and their entries handed back uncommitted; use
// Shutdown to stop gracefully. Errors: Conflict (started before), Closed
// (shut down before).
func (w *TurnWorker) Start(ctx context.Context) error {
	const op = "sessions.TurnWorker.Start"
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return errs.E(op, errs.Closed, "the turn worker was shut down")
	}
	if w.started {
		return errs.E(op, errs.Conflict, "the turn worker was started before")
	}
	w.started = true
	w.base = context.WithoutCancel(ctx)
	w.hard, w.hardCancel = context.WithCancelCause(ctx)
	w.runners = newRunners(w.hard, min(cap(w.slots), maxParkedRunners), w.runTurn)
	return w.claims.Start(w.hard, op, w.claimLoop)
}

// errShutdown is the cause of a turn cancelled because its process stops.
var errShutdown = errs.E("sessions.TurnWorker", errs.Closed, "the turn worker is shutting down")

// Shutdown stops claiming and waits for the running turns to commit, up
// to the grace period or until ctx ends, whichever is first. Turns still
// running then are cancelled without committing and their leases
// released, so another worker runs their entries again. It returns when
// every turn goroutine has ended.
func (w *TurnWorker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if !w.started || w.stopping {
		w.stopping = true
		w.mu.Unlock()
		return nil
	}
	w.stopping = true
	w.mu.Unlock()

	// The claim loop ends at once: a claim under way is made with the
	// worker's hard context, and what it leases runs or is handed back.
	_ = w.claims.Stop(context.Background())
	done := make(chan struct{})
	go func() {
		w.turns.Wait()
		close(done)
	}()
	grace := time.NewTimer(w.grace)
	defer grace.Stop()
	select {
	case <-done:
		w.hardCancel(errShutdown)
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	if n := w.Running(); n > 0 {
		w.log.Warn("grace period over; handing running turns back", "turns", n)
	}
	w.hardCancel(errShutdown)
	// A runner honours its context; the wait after the cancel only covers
	// the releases, so it is bounded for a runner that does not.
	stuck := time.NewTimer(releaseTimeout + time.Second)
	defer stuck.Stop()
	select {
	case <-done:
		return nil
	case <-stuck.C:
		return errs.E("sessions.TurnWorker.Shutdown", errs.Internal, "%d turns did not end after being cancelled", w.Running())
	}
}

// Wake makes the claim loop claim now instead of at its next poll. The
// router calls it after queuing a message.
func (w *TurnWorker) Wake() {
	w.mayWait.Store(true)
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Running is the number of turns running in this process.
func (w *TurnWorker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.running)
}

// RunningTurn tells whether this process runs an agent turn of conv.
func (w *TurnWorker) RunningTurn(conv string) (RunningTurn, bool) {
	w.mu.Lock()
	at := w.running[conv]
	w.mu.Unlock()
	if at == nil || at.control || at.settled.Load() {
		return RunningTurn{}, false
	}
	return at.info(), true
}

// HandleSignal passes s to the turn of s.Conv this process runs, if any.
// A signal sent before that turn started was meant for an earlier one
// and is ignored, as is a signal about the entry the turn itself runs.
// A domain's kind (delegation.stop) is ignored too: the tailer hands it
// to that domain's handler as well, and it names something inside the
// conversation, not its turn, so it must not stop the turn.
func (w *TurnWorker) HandleSignal(s signals.Signal) {
	switch s.Kind {
	case signals.Stop, signals.Interrupt, signals.Steer:
	default:
		return
	}
	w.mu.Lock()
	at := w.running[s.Conv]
	w.mu.Unlock()
	if at != nil {
		at.signal(s)
	}
}

// maxClaimBurst bounds the turns one claim of the loop takes
// (ClaimMany). While claims keep finding work the loop asks for more at
// a time, so a backlog of thousands of ready conversations is leased in
// a few dozen store calls instead of one after another; an idle store
// sees one claim per poll.
const maxClaimBurst = 64

// claimLoop is the one loop that claims conversations, until stop ends
// (Shutdown, or the worker's hard stop). It takes a slot before each
// claim, so it never holds more leases than it can run.
func (w *TurnWorker) claimLoop(stop context.Context) {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.Duration(0)
	burst := 1
	for {
		select {
		case w.slots <- struct{}{}:
		case <-stop.Done():
			return
		}
		n := 1
		for n < burst && w.trySlot() {
			n++
		}
		found, err := w.claimSome(n)
		if found > 0 {
			wait = 0
			if found == n {
				burst = min(burst*2, maxClaimBurst)
			} else {
				burst = found
			}
			continue
		}
		burst = 1
		if err != nil && w.hard.Err() == nil {
			w.log.Warn("claiming a turn failed", "err", err)
		}
		wait = min(max(wait*2, w.pollMin), w.pollMax)
		idle.Reset(wait)
		select {
		case <-w.wake:
			wait = 0
		case <-idle.C:
		case <-stop.Done():
			idle.Stop()
			return
		}
		idle.Stop()
	}
}

// TakeNow appends in through q and, when this worker has a turn free,
// lets the store start in's turn in the same call (Store.AppendClaim):
// the turn then runs here at once, on that free turn, without a claim
// of its own, and started says so. With every turn taken, or the worker
// not running, it appends as q.Append does and the entry waits for a
// claim. The router queues each message this way.
func (w *TurnWorker) TakeNow(ctx context.Context, q Store, in Inbound) (res AppendResult, started bool, err error) {
	if !w.reserve() {
		res, err = q.Append(ctx, in)
		return res, false, err
	}
	res, turn, err := q.AppendClaim(ctx, in, w.name, w.ttl)
	if turn == nil {
		<-w.slots // no turn started: the reserved slot is free again
		return res, false, err
	}
	if !w.start(turn, "the worker stopped while the message was queued") {
		<-w.slots
	}
	return res, err == nil, err
}

// reserve takes a slot for a turn TakeNow may start. It fails when
// every slot is taken or the worker is not running.
func (w *TurnWorker) reserve() bool {
	w.mu.Lock()
	running := w.started && !w.stopping
	w.mu.Unlock()
	return running && w.hard.Err() == nil && w.trySlot()
}

// start runs turn on a slot already taken, unless the worker began
// stopping: then it hands the turn back, for why, and reports false. The
// turn is counted under the lock Shutdown sets stopping under, so
// Shutdown's wait for the turns sees it.
func (w *TurnWorker) start(turn *Turn, why string) bool {
	w.mu.Lock()
	stopping := w.stopping || w.hard.Err() != nil
	if !stopping {
		w.turns.Add(1)
	}
	w.mu.Unlock()
	if stopping {
		w.handBack(turn.Lease, why)
		return false
	}
	w.runners.run(turn)
	return true
}

// trySlot takes a slot if one is free.
func (w *TurnWorker) trySlot() bool {
	select {
	case w.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// claimSome claims up to n turns in one call, holding n slots, and
// starts a turn for each it got; the other slots are given back. It
// returns how many turns started and the claim's error.
func (w *TurnWorker) claimSome(n int) (int, error) {
	// Cleared before the claim, so that a Wake during it stands.
	w.mayWait.Store(false)
	turns, err := w.store.ClaimMany(w.hard, w.name, n, w.ttl)
	if err != nil || len(turns) >= n {
		w.mayWait.Store(true)
	}
	found := 0
	for _, turn := range turns {
		switch {
		case turn == nil:
		case found == n:
			w.handBack(turn.Lease, "the store returned more turns than asked for")
		case w.start(turn, "the worker stopped while claiming"):
			found++
		}
	}
	for range n - found {
		<-w.slots
	}
	return found, err
}

// stoppingNow reports whether the worker claims no more: Shutdown began,
// or it must stop now.
func (w *TurnWorker) stoppingNow() bool {
	w.mu.Lock()
	stopping := w.stopping
	w.mu.Unlock()
	return stopping || w.hard.Err() != nil
}

// releaseTimeout bounds a store write made after a turn ended: a commit,
// a release.
const releaseTimeout = 10 * time.Second

// storeCtx is the context of a store write that must happen even while
// the worker stops.
func (w *TurnWorker) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.base, releaseTimeout)
}

// retryLater hands a failed turn's entry back after a pause that grows
// with its deliveries. The lease is still renewed meanwhile; stopping
// the worker cuts the pause short.
func (w *TurnWorker) retryLater(at *activeTurn, why string) {
	w.pause(min(w.retryDelay*time.Duration(max(at.t.Entry.Deliveries, 1)), w.ttl/2))
	w.handBack(at.t.Lease, why)
}

// pause waits d, or less when the worker must stop now: a failed turn
// or commit waiting to try again does not hold up a hard stop.
func (w *TurnWorker) pause(d time.Duration) { clock.Sleep(w.hard, d) }

// handBack releases a lease without committing, so the entry runs again.
func (w *TurnWorker) handBack(l Lease, why string) {
	ctx, cancel := w.storeCtx()
	defer cancel()
	if err := w.store.Release(ctx, l); err != nil && !errs.Is(err, errs.LeaseLost) {
		w.log.Warn("releasing a lease failed; it expires by itself", "conv", l.Conv, "token", l.Token, "why", why, "err", err)
	}
}

// countFailed and its kin call the metrics hooks that are set.
func (w *TurnWorker) countFailed(reason string) {
	if f := w.metrics.Failed; f != nil {
		f(reason)
	}
}

func (w *TurnWorker) countLeaseLost() {
	if f := w.metrics.LeaseLost; f != nil {
		f()
	}
}
