package delegation

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/signals"
)

// Defaults for RunnerOptions.
const (
	DefaultOwnerTTL       = 30 * time.Second
	DefaultProcessMax     = 64
	DefaultRunnerPoll     = time.Second
	endAttemptsPause      = 200 * time.Millisecond
	endAttemptsStopping   = 3
	maxEndPause           = 5 * time.Second
	reapBatch             = 100
	defaultShutdownReason = "the gateway stopped before the sub-agent finished"
)

// ProgressEvery is how often a runner renews its children's claims, and
// with them writes where each stands (Progress): the tool it runs, its
// calls and tokens, as every instance's dashboard shows them. One call
// of the store a second while children run here, for all of them.
const ProgressEvery = time.Second

// RunnerOptions configure NewRunner.
type RunnerOptions struct {
	Store   Store    // required
	Spawner *Spawner // required
	Name    string   // this instance, the owner of what it runs; required
	// OwnerTTL is how long a child's claim lasts without a renewal:
	// within it, a survivor or a restart notices a dead owner.
	OwnerTTL time.Duration
	// Max bounds the children this instance runs at once.
	Max int
	// Poll is how often it looks for pending children and reaps dead
	// owners' children without being woken.
	Poll time.Duration
	// Transcripts keeps the live transcripts of the children run here;
	// nil keeps none.
	Transcripts *Transcripts
	// Ended is told of each completion an end made (its own or a
	// reaped child's), so the deliverer takes it at once.
	Ended func()
	// Progress, when set, is told of a delegation after one of its
	// children ended here, as the store has it then (the chat's status
	// line: "2 of 3 sub-agents done"). Called on the child's goroutine.
	Progress func(ctx context.Context, d Delegation)
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Runner runs, on this instance, the children it claims: pending
// children of any conversation, up to Max at once, each under a fenced
// claim that a lease.Renewer keeps alive. It also reaps: a child whose
// owner stopped renewing (by the store's clock) ends unknown, by
// whichever instance notices first. It takes the signals that stop or
// steer its children (signals.Handler). It is a component: Start,
// Shutdown.
type Runner struct {
	opts    RunnerOptions
	renewer *lease.Renewer
	log     *slog.Logger
	wake    chan struct{}
	loop    bgloop.Loop

	mu       sync.Mutex
	running  map[string]*running // by child id
	stopping bool
	// claiming counts claims whose children are not registered yet;
	// early keeps the signals that came meanwhile.
	claiming int
	early    []signals.Signal
	// lingering counts children whose end is recorded but whose agent
	// loop the stall monitor left running: each keeps its place under
	// Max until the loop returns.
	lingering int
	// workers counts the places the workers of orchestrators running
	// here hold: they run inside their orchestrator's run, and count
	// under Max as any child does.
	workers int
	// passes counts the claim loop's passes, for tests to tell that
	// one ran after what they did.
	passes   int
	children sync.WaitGroup
	// transcribing counts the dispatches whose transcripts are being made.
	transcribing sync.WaitGroup
}

// running is one child this instance runs.
type running struct {
	live   *Live
	claim  Claim
	cancel context.CancelCauseFunc
	// worker is set for an orchestrator's worker (startWorkers): it
	// runs on its orchestrator's goroutines, inside its run.
	worker bool
}

// NewRunner returns a runner. Errors: Invalid (no store, spawner or name).
func NewRunner(opts RunnerOptions) (*Runner, error) {
	const op = "delegation.NewRunner"
	if opts.Store == nil || opts.Spawner == nil || opts.Name == "" {
		return nil, errs.E(op, errs.Invalid, "a runner needs a store, a spawner and a name")
	}
	if opts.OwnerTTL <= 0 {
		opts.OwnerTTL = DefaultOwnerTTL
	}
	if opts.Max <= 0 {
		opts.Max = DefaultProcessMax
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultRunnerPoll
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	r := &Runner{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), running: map[string]*running{}}
	if r.log == nil {
		r.log = slog.Default()
	}
	var err error
	r.renewer, err = lease.NewRenewer(lease.RenewerOptions{
		Renew: r.renew,
		TTL:   opts.OwnerTTL,
		// The renewals carry the children's progress (the tool each
		// runs, its tokens), which the dashboard shows live.
		Every:  ProgressEvery,
		Lost:   r.lost,
		Clock:  opts.Clock,
		Logger: r.log,
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Dispatched makes the live transcripts of d's children, which this
// instance dispatched, at once (Transcripts.Dispatched): they exist
// from dispatch, whichever instance runs the children.
func (r *Runner) Dispatched(d Delegation) {
	r.opts.Transcripts.Dispatched(d, r.opts.Clock.Now())
}

// Committed is Dispatched for a dispatch a turn's commit carried: the
// transcripts are made on a goroutine of their own rather than on the
// committing turn's, whose reply the commit already handed to delivery.
// A dispatch of ten tasks is a dozen file creations, milliseconds on a
// slow disk, that the turn's worker would otherwise wait for before its
// next turn; a child whose run began first keeps the file its run made.
// Shutdown waits for them.
func (r *Runner) Committed(d Delegation) {
	now := r.opts.Clock.Now()
	r.transcribing.Add(1)
	go func() {
		defer r.transcribing.Done()
		r.opts.Transcripts.Dispatched(d, now)
	}()
}

// Wake makes the runner look for pending children now: a turn that
// dispatched has committed.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs the claim loop and the renewer until Shutdown.
// Errors: Conflict (started before).
func (r *Runner) Start(ctx context.Context) error {
	const op = "delegation.Runner.Start"
	if r.loop.Started() {
		return errs.E(op, errs.Conflict, "started before")
	}
	if err := r.renewer.Start(ctx); err != nil {
		return err
	}
	return r.loop.Start(ctx, op, r.claimLoop)
}

// Shutdown stops claiming, stops the children it runs (each ends
// interrupted, its partial result delivered as usual) and waits for
// their ends to be recorded, within ctx; a child whose end could not be
// recorded is reaped as unknown later.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if !r.loop.Started() || r.stopping {
		r.mu.Unlock()
		return nil
	}
	r.stopping = true
	for _, c := range r.running {
		c.cancel(errShutdown)
	}
	r.mu.Unlock()
	// Once the loop returned it claims no child: those waited for are
	// all there are.
	r.loop.Halt()
	err := bgloop.Wait(ctx, &r.children)
	if terr := bgloop.Wait(ctx, &r.transcribing); err == nil {
		err = terr
	}
	if serr := r.renewer.Shutdown(ctx); err == nil {
		err = serr
	}
	return err
}

var errShutdown = errors.New(defaultShutdownReason)

// claimLoop reaps and claims, then waits for a Wake, Poll at most.
func (r *Runner) claimLoop(ctx context.Context) {
	lastPrune := time.Time{}
	for {
		if now := r.opts.Clock.Now(); now.Sub(lastPrune) > time.Hour {
			r.opts.Transcripts.Prune(now)
			lastPrune = now
		}
		r.reap(ctx)
		r.claim(ctx)
		r.mu.Lock()
		r.passes++
		r.mu.Unlock()
		t := r.opts.Clock.NewTimer(r.opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// claim takes as many pending children as there are free places, and
// starts each.
func (r *Runner) claim(ctx context.Context) {
	for {
		r.mu.Lock()
		free := r.opts.Max - len(r.running) - r.lingering - r.workers
		stopping := r.stopping
		r.mu.Unlock()
		if free <= 0 || stopping || ctx.Err() != nil {
			return
		}
		// Signals that come while children are claimed but not yet
		// registered are kept, and applied once they are.
		r.mu.Lock()
		r.claiming++
		r.mu.Unlock()
		children, claims, err := r.opts.Store.Claim(ctx, r.opts.Name, free, r.opts.OwnerTTL)
		if err != nil {
			r.endClaiming(nil)
			if ctx.Err() == nil {
				r.log.Warn("claiming pending sub-agents failed", "err", err)
			}
			return
		}
		// A dispatch's children are claimed together: each delegation is
		// read once a batch, not once a child.
		read := map[string]delegationRead{}
		for _, c := range children {
			if _, ok := read[c.Delegation]; !ok {
				read[c.Delegation] = r.readDelegation(c.Delegation)
			}
		}
		fresh := make(map[string]bool, len(children))
		for i, c := range children {
			r.start(read[c.Delegation], c, claims[i])
			fresh[c.ID] = true
		}
		r.endClaiming(fresh)
		if len(children) < free {
			return
		}
	}
}

// reap ends the children of dead owners as unknown.
func (r *Runner) reap(ctx context.Context) {
	ended, err := r.opts.Store.Reap(ctx, reapBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reaping the sub-agents of stopped instances failed", "err", err)
		}
		return
	}
	seen := map[string]bool{}
	for _, c := range ended {
		r.log.Warn("a sub-agent's owner stopped renewing; it ends unknown", "subagent", c.ID, "delegation", c.Delegation, "owner", c.Owner)
		if !seen[c.Delegation] {
			seen[c.Delegation] = true
			r.progress(c.Delegation)
		}
	}
	if len(ended) > 0 && r.opts.Ended != nil {
		r.opts.Ended()
	}
}

// delegationRead is a delegation as read for its claimed children.
type delegationRead struct {
	d   Delegation
	err error
}

// readDelegation reads a claimed child's delegation (its conversation
// scopes the child's signals), trying a few times: a child whose
// conversation is unknown cannot be stopped by it.
func (r *Runner) readDelegation(id string) delegationRead {
	var got delegationRead
	pause := endAttemptsPause
	for attempt := 1; attempt <= 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.OwnerTTL/3)
		got.d, got.err = r.opts.Store.Delegation(ctx, id)
		cancel()
		if got.err == nil || errs.Is(got.err, errs.NotFound) {
			return got
		}
		clock.SleepOn(context.Background(), r.opts.Clock, pause)
		pause *= 2
	}
	return got
}

// endClaiming ends a claim's window: the signals kept during it are
// applied to the children it registered, fresh (the others had them).
func (r *Runner) endClaiming(fresh map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.claiming--
	early := r.early
	if r.claiming == 0 {
		r.early = nil
	}
	for _, s := range early {
		r.applyLocked(s, fresh)
	}
}

// start runs child on a goroutine of its own under claim.
func (r *Runner) start(read delegationRead, child Child, claim Claim) {
	d, err := read.d, read.err
	conv := d.Conv
	if err != nil {
		r.log.Warn("reading a sub-agent's delegation failed; it runs all the same", "subagent", child.ID, "err", err)
	}
	// The child continues the trace of the turn that dispatched it.
	ctx, span := tracing.Start(tracing.Extract(context.Background(), d.Trace), tracing.SpanDelegationChild,
		attribute.String("herald.delegation", child.Delegation), attribute.String("herald.subagent", child.ID),
		attribute.String("herald.conversation", conv))
	ctx, cancel := context.WithCancelCause(ctx)
	if err == nil {
		ctx = WithParent(ctx, Parent{Conv: d.Conv, User: d.User, Origin: d.Origin})
	}
	rc := &running{live: newLive(child, conv, r.opts.Clock.Now()), claim: claim, cancel: cancel}
	r.mu.Lock()
	r.running[child.ID] = rc
	r.children.Add(1)
	if r.stopping {
		// Claimed as Shutdown began: it ends at once, interrupted.
		cancel(errShutdown)
	}
	r.mu.Unlock()
	r.renewer.Hold(claim)
	r.log.Info("sub-agent started", "subagent", child.ID, "delegation", child.Delegation, "conv", conv, "index", child.Index)
	go func() {
		defer r.children.Done()
		// Only the child's goroutine writes its transcript: its files
		// are made here, off the claim loop.
		if err == nil {
			rc.live.transcript = r.opts.Transcripts.Open(d, child, r.opts.Clock.Now())
		}
		res := r.run(ctx, child, rc)
		span.SetAttributes(attribute.String("herald.delegation.status", string(res.Status)))
		tracing.EndWith(span, res.Status != StatusCompleted, string(res.Status))
		cancel(nil)
		rc.live.transcript.End(r.opts.Clock.Now(), res)
		if rc.live.leftBehind() {
			// Counted before end gives up the child's place, so the
			// place is never free while the loop still runs.
			r.mu.Lock()
			r.lingering++
			r.mu.Unlock()
			go r.linger(rc)
		}
		r.end(rc, res)
	}()
}

// linger waits for the agent loop the stall monitor left behind to
// return, then frees its place. Shutdown does not wait for it: its
// context is cancelled, and what it does now is not recorded.
func (r *Runner) linger(rc *running) {
	rc.live.loops.Wait()
	r.mu.Lock()
	r.lingering--
	r.mu.Unlock()
	r.log.Info("a stalled sub-agent's model call returned; its place is free", "subagent", rc.live.Child.ID)
	r.Wake()
}

// run runs the child, turning a panic into a failed result.
func (r *Runner) run(ctx context.Context, child Child, rc *running) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("a sub-agent panicked", "subagent", child.ID, "panic", p, "stack", string(debug.Stack()))
			res = Result{TaskIndex: child.Index, ChildID: child.ID, Goal: child.Goal, Status: StatusFailed,
				ExitReason: "panic", Error: "the sub-agent failed unexpectedly; this is a fault in herald"}
			// Its steers count as given, so the store's record of them
			// matches; those it had not taken did not land.
			left, given := rc.live.endSteers()
			res = notLanded(res, left)
			res.Steers = given
		}
	}()
	return r.opts.Spawner.Run(ctx, child, 1, rc.live)
}

// end records the child's result under its claim, retrying while the
// store does not answer and the claim may still be current; a lost claim
// means the child was declared unknown, and its result is dropped with a
// log line, as the completion was already made without it.
func (r *Runner) end(rc *running, res Result) {
	id := rc.live.Child.ID
	defer func() {
		r.renewer.Drop(id)
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
		r.Wake()
	}()
	pause := endAttemptsPause
	for attempt := 1; ; attempt++ {
		claim := rc.claim
		if cur, ok := r.renewer.Current(id); ok {
			claim = cur
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.OwnerTTL/3)
		comp, err := r.opts.Store.End(ctx, claim, res)
		cancel()
		switch {
		case err == nil:
			r.log.Info("sub-agent ended", "subagent", id, "status", string(res.Status), "api_calls", res.APICalls,
				"took_ms", int64(res.DurationSeconds*1000), "completion", comp != nil)
			if comp != nil && r.opts.Ended != nil {
				r.opts.Ended()
			}
			if !rc.worker {
				r.progress(rc.live.Child.Delegation)
			}
			return
		case errs.Is(err, errs.LeaseLost):
			r.log.Warn("a sub-agent's claim was lost before its end was recorded; its result is dropped", "subagent", id, "status", string(res.Status))
			return
		case errs.Is(err, errs.Conflict):
			// A steer was recorded as the child finished, after its
			// last tool result: its result says it did not land.
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.OwnerTTL/3)
			c, rerr := r.opts.Store.Child(ctx, id)
			cancel()
			if rerr == nil {
				res = Unlanded(c, res)
				continue
			}
			err = rerr
		case (errs.Is(err, errs.Invalid) || errs.Is(err, errs.TooLarge)) && res.ExitReason == "refused":
			r.log.Error("the store refused a sub-agent's failure too; it will end unknown", "subagent", id, "err", err)
			return
		case errs.Is(err, errs.Invalid), errs.Is(err, errs.TooLarge):
			r.log.Error("the store refused a sub-agent's result; recording a failure instead", "subagent", id, "err", err)
			// What the store must match (its steers) and what the parent
			// is owed (its tokens, on its model) are kept.
			res = Result{TaskIndex: res.TaskIndex, ChildID: id, Goal: res.Goal, Status: StatusFailed, ExitReason: "refused",
				APICalls: res.APICalls, Model: res.Model, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens,
				Steers: res.Steers, PendingSteer: res.PendingSteer, Error: "its result could not be saved: " + err.Error()}
			continue
		}
		if _, held := r.renewer.Current(id); !held && !r.renewerStopping() {
			r.log.Warn("recording a sub-agent's end failed and its claim is gone", "subagent", id, "err", err)
			return
		}
		if r.renewerStopping() && attempt >= endAttemptsStopping {
			// The instance is going away: the claim runs out, and the
			// child is reaped unknown by whichever instance comes next.
			r.log.Warn("recording a sub-agent's end failed while stopping; it will end unknown", "subagent", id, "err", err)
			return
		}
		r.log.Warn("recording a sub-agent's end failed; retrying", "subagent", id, "err", err, "in", pause)
		clock.SleepOn(context.Background(), r.opts.Clock, pause)
		pause = min(2*pause, maxEndPause)
	}
}

func (r *Runner) renewerStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// renew renews the claims, with each child's progress.
func (r *Runner) renew(ctx context.Context, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	progress := make(map[string]Progress, len(claims))
	r.mu.Lock()
	for _, c := range claims {
		if rc, ok := r.running[c.Name]; ok {
			progress[c.Name] = rc.live.Progress()
		}
	}
	r.mu.Unlock()
	return r.opts.Store.Renew(ctx, claims, ttl, progress)
}

// lost stops a child whose claim the store no longer gives this
// instance: it was declared unknown, and whatever it does now is not
// recorded.
func (r *Runner) lost(c lease.Claim) {
	r.mu.Lock()
	rc, ok := r.running[c.Name]
	r.mu.Unlock()
	if ok {
		rc.cancel(errors.New("this instance lost the sub-agent's claim"))
	}
}

// HandleSignal takes the signals that reach this instance: a
// conversation's stop (/stop, /new) interrupts every child of it that
// runs here; delegation.stop, delegation.cancel and delegation.steer
// reach one child, only within the conversation the signal names.
func (r *Runner) HandleSignal(s signals.Signal) {
	r.apply(s)
	if s.Kind == signals.Stop {
		// Children no instance has started yet are stopped in the
		// store; every instance tries, and each child ends once.
		go r.stopPending(s)
	}
}

// stopPending ends, as interrupted, the children of s's conversation
// that no instance has claimed and that were dispatched before s.
func (r *Runner) stopPending(s signals.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.OwnerTTL/3)
	defer cancel()
	ds, err := r.opts.Store.List(ctx, Query{Conv: s.Conv, Active: true})
	if err != nil {
		r.log.Warn("finding a stopped conversation's pending sub-agents failed", "conv", s.Conv, "err", err)
		return
	}
	ended := false
	for _, d := range ds {
		if !s.At.IsZero() && !d.CreatedAt.Before(s.At) {
			continue
		}
		for _, c := range d.Children {
			if c.Status != StatusPending {
				continue
			}
			_, comp, err := r.opts.Store.StopPending(ctx, c.ID, Result{Status: StatusInterrupted, ExitReason: "interrupted",
				Error: "interrupted before it started: stopped with the conversation (/stop or /new)"})
			if err != nil {
				r.log.Warn("stopping a pending sub-agent failed", "subagent", c.ID, "err", err)
			}
			ended = ended || comp != nil
		}
	}
	if ended && r.opts.Ended != nil {
		r.opts.Ended()
	}
}

// apply applies s to the children running here and reports whether one
// of them took it.
func (r *Runner) apply(s signals.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claiming > 0 {
		r.early = append(r.early, s)
	}
	return r.applyLocked(s, nil)
}

// applyRegistered applies s to the children registered here only,
// keeping nothing for those being claimed: for a signal that also goes
// through the signals log when no child here takes it, which the log
// brings to a child claimed meanwhile once, not twice.
func (r *Runner) applyRegistered(s signals.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applyLocked(s, nil)
}

// applyLocked applies s to the children running here (only those in
// only, when it is not nil). Called with r.mu held.
func (r *Runner) applyLocked(s signals.Signal, only map[string]bool) bool {
	took := false
	for id, rc := range r.running {
		if only != nil && !only[id] {
			continue
		}
		// A signal sent before the child started was for something else.
		if rc.live.Conv != s.Conv || (!s.At.IsZero() && s.At.Before(rc.live.Child.StartedAt)) {
			continue
		}
		switch {
		case s.Kind == signals.Stop:
			cause := byConversation
			rc.cancel(&cause)
			took = true
		case (s.Kind == SignalStop || s.Kind == SignalCancel) && s.Target == id:
			rc.cancel(causeOf(s))
			took = true
		case s.Kind == SignalSteer && s.Target == id:
			took = rc.live.Steer(s.Text)
		}
	}
	return took
}

// Busy is how many of the runner's Max places are taken: its running
// children, the workers its orchestrators run, and the children whose
// end is recorded but whose agent loop the stall monitor left running.
func (r *Runner) Busy() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running) + r.lingering + r.workers
}

// holdWorkers takes n of the runner's places for an orchestrator's
// workers: all n, or none when fewer are free, and then it reports how
// many are. Give them back with releaseWorkers.
func (r *Runner) holdWorkers(n int) (free int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	free = max(r.opts.Max-len(r.running)-r.lingering-r.workers, 0)
	if n > free {
		return free, false
	}
	r.workers += n
	return free, true
}

// releaseWorkers gives back the places of n workers that ended.
func (r *Runner) releaseWorkers(n int) {
	r.mu.Lock()
	r.workers -= n
	r.mu.Unlock()
	r.Wake()
}

// startWorkers writes the workers an orchestrator's call in ctx starts
// (Store.Start, under limit, the conversation's
// delegation.max_concurrent_children), claimed by this instance, and
// registers them as children it runs, in the n places holdWorkers took
// for them: a stop, a steer and the claims' renewal reach them as any
// child's do. It returns each worker's registration and the context it
// runs in, in children's order; none, and no error, when the
// orchestrator is not a child this instance runs (its workers then run
// unrecorded, in the places held). The places stay held when it fails.
func (r *Runner) startWorkers(ctx context.Context, children []Child, limit int) ([]*running, []context.Context, error) {
	parent, _ := ctx.Value(liveKey{}).(*Live)
	if parent == nil || !r.runs(parent.Child.ID) {
		return nil, nil, nil
	}
	now := r.opts.Clock.Now()
	d := Delegation{ID: children[0].Delegation, Conv: parent.Conv, Source: "orchestrator",
		Orchestrator: parent.Child.ID, CreatedAt: now, Children: children}
	claims, err := r.opts.Store.Start(ctx, Dispatch{Delegation: d, Limit: limit}, r.opts.Name, r.opts.OwnerTTL)
	if err != nil {
		return nil, nil, err
	}
	runs := make([]*running, len(children))
	ctxs := make([]context.Context, len(children))
	r.mu.Lock()
	for i, c := range children {
		c.Status, c.StartedAt = StatusRunning, now
		l := worker(ctx, c, now)
		l.Conv = parent.Conv
		wctx, cancel := context.WithCancelCause(ctx)
		runs[i], ctxs[i] = &running{live: l, claim: claims[i], cancel: cancel, worker: true}, wctx
		r.running[c.ID] = runs[i]
		if r.stopping {
			cancel(errShutdown)
		}
	}
	r.workers -= len(children)
	r.mu.Unlock()
	for _, rc := range runs {
		r.renewer.Hold(rc.claim)
	}
	return runs, ctxs, nil
}

// runs reports whether this instance runs child id.
func (r *Runner) runs(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[id]
	return ok
}

// progress tells Progress how the child's delegation stands now.
func (r *Runner) progress(id string) {
	if r.opts.Progress == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.OwnerTTL/3)
	defer cancel()
	d, err := r.opts.Store.Delegation(ctx, id)
	if err != nil {
		return
	}
	r.opts.Progress(ctx, d)
}
