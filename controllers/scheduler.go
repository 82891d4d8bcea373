package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for SchedulerOptions.
const (
	DefaultClaimTTL = 30 * time.Second
	DefaultPoll     = time.Second
	DefaultRefire   = 10 * time.Minute
	dueBatch        = 256
	// deferPoll is how often a loop a running goal defers looks again.
	deferPoll  = 30 * time.Second
	storeRetry = 2 * time.Second
)

// Inbox takes a controller's entry into its conversation's queue, as the
// router does (sessions.Router.Deliver): deduplicated by its message id.
type Inbox interface {
	Deliver(ctx context.Context, in sessions.Inbound) error
}

// SchedulerOptions configure NewScheduler.
type SchedulerOptions struct {
	Store  Store           // required
	Once   lease.OnceStore // required: each fire is claimed once among all instances
	Inbox  Inbox           // required: where the entries go
	Outbox outbox.Store    // required: what a fire tells the chat
	// Busy reports whether a turn of conv runs now (a heartbeat fires
	// only on an idle conversation); nil: never.
	Busy func(ctx context.Context, conv string) bool
	// Ended reports whether what a goal waits on has ended; nil: it has.
	Ended    func(ctx context.Context, conv string, w Wait) bool
	Name     string        // this instance, the owner of its claims; required
	ClaimTTL time.Duration // 0: DefaultClaimTTL
	Poll     time.Duration // how often the store is read for changes made elsewhere; 0: DefaultPoll
	// Refire is how long a fire's entry may wait for its turn before
	// it is queued again (see fire); 0: DefaultRefire.
	Refire time.Duration
	// Fired, when set, is told of each fire this instance ran: its
	// controller's kind and what it did (FireQueued, FireRequeued,
	// FireMoved). It must return quickly.
	Fired  func(kind Kind, outcome string)
	Clock  clock.Clock
	Logger *slog.Logger
}

// What a fire did, as SchedulerOptions.Fired is told.
const (
	FireQueued   = "queued"   // queued the controller's entry
	FireRequeued = "requeued" // queued its entry again (Refire)
	FireMoved    = "moved"    // wrote its state (a wait's end, a deferred or busy tick)
)

// Scheduler fires the controllers that are due: a goal's owed
// continuation or the end of its wait, a loop's or a heartbeat's tick.
// A fire is claimed once among every instance sharing the store
// (lease.OnceStore) and either queues the controller's entry, keyed by
// the fire (so a fire run again after its claimer died queues nothing
// twice), or writes its state over the version it read (see fire). It
// sleeps until the next due time, Poll at most. It is a component:
// Start, Shutdown.
type Scheduler struct {
	opts SchedulerOptions
	log  *slog.Logger
	wake chan struct{}

	mu sync.Mutex
	// quiet are fires not to look at again before a time: one another
	// instance holds, until its claim runs out; one done, whose entry
	// waits for its turn, until it is due to be queued again.
	quiet     map[string]time.Time
	lingering int // due states the last read found quiet
	loop      bgloop.Loop
}

// NewScheduler returns a scheduler. Errors: Invalid (a required option
// missing).
func NewScheduler(opts SchedulerOptions) (*Scheduler, error) {
	if opts.Store == nil || opts.Once == nil || opts.Inbox == nil || opts.Outbox == nil || opts.Name == "" {
		return nil, errs.E("controllers.NewScheduler", errs.Invalid, "the controllers' scheduler needs the store, the once-only claims, the inbox, the outbox and its instance's name")
	}
	if opts.ClaimTTL <= 0 {
		opts.ClaimTTL = DefaultClaimTTL
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Refire <= 0 {
		opts.Refire = DefaultRefire
	}
	if opts.Ended == nil {
		opts.Ended = endedAlways
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Scheduler{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), quiet: map[string]time.Time{}}, nil
}

// Wake makes the scheduler read the store now: a controller changed in
// this process.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the loop under ctx.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.loop.Start(ctx, "controllers.Scheduler.Start", s.run)
}

// Shutdown stops the loop and waits for it, until ctx ends. A fire cut
// short is claimed again, after its claim runs out, by any instance.
func (s *Scheduler) Shutdown(ctx context.Context) error { return s.loop.Stop(ctx) }

// run fires what is due, then sleeps until the next due time, Poll at
// most, or a Wake.
func (s *Scheduler) run(ctx context.Context) {
	for ctx.Err() == nil {
		wait := s.Tick(ctx)
		t := s.opts.Clock.NewTimer(wait)
		select {
		case <-t.C():
		case <-s.wake:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// Tick fires what is due now and returns how long to wait for the next.
func (s *Scheduler) Tick(ctx context.Context) time.Duration {
	now, err := s.opts.Store.Now(ctx)
	if err != nil {
		return storeRetry
	}
	s.mu.Lock()
	limit := dueBatch + s.lingering
	s.mu.Unlock()
	// A Poll ahead: what falls due before the next read sets the wait.
	states, err := s.opts.Store.DueControllers(ctx, now.Add(s.opts.Poll), limit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the due controllers failed; retrying", "err", err)
		}
		return storeRetry
	}
	next := now.Add(s.opts.Poll)
	quiet, ran := 0, 0
	for _, st := range states {
		if ctx.Err() != nil {
			return 0
		}
		if st.DueAt.After(now) {
			next = minTime(next, st.DueAt)
			continue
		}
		if until, fired := s.fire(ctx, st, now); fired {
			ran++
		} else {
			quiet++
			next = minTime(next, until)
		}
	}
	s.mu.Lock()
	s.lingering = quiet
	for id, until := range s.quiet {
		if !now.Before(until) {
			delete(s.quiet, id)
		}
	}
	s.mu.Unlock()
	if len(states) == limit && ran > 0 {
		// More may be due than were read.
		return 0
	}
	return max(next.Sub(now), minWait)
}

// minWait is the least the loop sleeps between reads.
const minWait = 50 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fireID names the fire of st at its version and due time: the
// once-only claim's name and the message id of the entry it queues.
func fireID(st State) string {
	sum := sha256.Sum256([]byte(st.Conv))
	return "ctl:" + hex.EncodeToString(sum[:8]) + ":" + entryName(st.Key()) + ":" +
		strconv.FormatInt(st.Version, 10) + ":" + strconv.FormatInt(st.DueAt.UnixMilli(), 10)
}

// fire runs st's fire unless another instance holds or has run it;
// fired false says it did nothing, and not to look again before until.
//
// A fire either queues the controller's entry or writes its state,
// never both: the entry's turn moves the state on, committed with the
// turn, so nothing else writes a state whose tick may be queued or
// running. Until then the state stays due at the time it fired, and the
// fire, done, is not run again; but while the state is still there
// Refire and more after its due time (the entry was lost, or waits
// behind a long queue), the entry is queued again once in each Refire
// that passes, under a claim of its own. A second entry of one tick is
// harmless: an entry runs only on the version it fired from
// (MetaVersion), so once one has run, or anything changed the state,
// the others are dropped unrun as stale.
func (s *Scheduler) fire(ctx context.Context, st State, now time.Time) (until time.Time, fired bool) {
	base := fireID(st)
	s.mu.Lock()
	until, quiet := s.quiet[base]
	s.mu.Unlock()
	if quiet && now.Before(until) {
		return until, false
	}
	c, state, err := s.opts.Once.ClaimOnce(ctx, base, s.opts.Name, s.opts.ClaimTTL)
	switch {
	case err != nil:
		s.log.Warn("claiming a controller's fire failed", "fire", base, "err", err)
		return now.Add(storeRetry), false
	case state == lease.OnceHeld:
		return s.hush(base, c.Expires), false
	case state == lease.OnceClaimed:
		s.runFire(ctx, st, c, base, now, false)
		return time.Time{}, true
	}
	// Done, and still due: its entry has not had its turn yet.
	n := int64(now.Sub(st.DueAt) / s.opts.Refire)
	again := st.DueAt.Add(time.Duration(n+1) * s.opts.Refire)
	if n == 0 {
		return s.hush(base, again), false
	}
	id := base + ":r" + strconv.FormatInt(n, 10)
	c, state, err = s.opts.Once.ClaimOnce(ctx, id, s.opts.Name, s.opts.ClaimTTL)
	switch {
	case err != nil:
		s.log.Warn("claiming a controller's fire failed", "fire", id, "err", err)
		return now.Add(storeRetry), false
	case state == lease.OnceHeld:
		return s.hush(base, c.Expires), false
	case state == lease.OnceDone:
		return s.hush(base, again), false
	}
	s.runFire(ctx, st, c, id, now, true)
	s.hush(base, again)
	return time.Time{}, true
}

// hush notes not to look at fire id again before until, and returns it.
func (s *Scheduler) hush(id string, until time.Time) time.Time {
	s.mu.Lock()
	s.quiet[id] = until
	s.mu.Unlock()
	return until
}

// runFire runs a claimed fire id of st: it queues the controller's entry or
// writes its state (again: it only queues one), tells what it has to
// tell, and marks the fire done. A fire that fails is left to its claim
// running out, and is run again.
func (s *Scheduler) runFire(ctx context.Context, st State, c lease.Claim, id string, now time.Time, again bool) {
	f, err := s.decide(ctx, st, now)
	if err != nil {
		s.log.Warn("a controller's state is not readable; it does not fire", "conv", st.Conv, "controller", st.Key().Name(), "err", err)
		return
	}
	switch {
	case f.entry != nil:
		f.entry.MessageID = id
		if err := s.opts.Inbox.Deliver(ctx, *f.entry); err != nil {
			s.log.Warn("queueing a controller's entry failed; it is fired again", "fire", id, "err", err)
			return
		}
	case again:
		// Run again, a fire only queues its entry again: the tick may
		// be running, and its turn writes the state.
		f.tell = ""
	default:
		if _, err := s.opts.Store.PutController(ctx, f.next); err != nil && !errs.Is(err, errs.Conflict) {
			s.log.Warn("moving a controller on failed; it is fired again", "fire", id, "err", err)
			return
		}
		// On a Conflict another writer was first (a /goal pause): its
		// change stands.
	}
	if f.tell != "" {
		m := outbox.Message{Target: f.to, Conv: st.Conv, Text: f.tell, Kind: KindNotice, IdempotencyKey: id}
		if _, _, err := s.opts.Outbox.Enqueue(ctx, m); err != nil {
			s.log.Warn("telling a controller's news failed", "fire", id, "err", err)
		}
	}
	if err := s.opts.Once.DoneOnce(ctx, c); err != nil && !errs.Is(err, errs.LeaseLost) {
		s.log.Warn("marking a controller's fire done failed", "fire", id, "err", err)
	}
	if s.opts.Fired != nil {
		switch {
		case f.entry != nil && again:
			s.opts.Fired(st.Kind, FireRequeued)
		case f.entry != nil:
			s.opts.Fired(st.Kind, FireQueued)
		case !again:
			s.opts.Fired(st.Kind, FireMoved)
		}
	}
}

// fired is what a fire does: queue entry, or (entry nil) write next;
// and tell the chat at to, when tell is set.
type fired struct {
	entry *sessions.Inbound
	next  State
	tell  string
	to    outbox.Target
}

// decide is the fire of st at now.
func (s *Scheduler) decide(ctx context.Context, st State, now time.Time) (fired, error) {
	switch st.Kind {
	case KindGoal:
		return s.goalFire(ctx, st, now)
	case KindLoop:
		return s.loopFire(ctx, st, now)
	case KindHeartbeat:
		return s.heartbeatFire(ctx, st, now)
	}
	return write(st, st.Data, time.Time{})
}

// entry is a controller's entry for tick n of st, with text, for user.
func entry(st State, n int, text, user string, to outbox.Target) *sessions.Inbound {
	return &sessions.Inbound{
		Conv: st.Conv, Kind: sessions.KindSynthetic, Text: text, User: user,
		Meta: map[string]string{
			sessions.MetaTarget: to.String(),
			MetaController:      entryName(st.Key()),
			MetaTick:            strconv.Itoa(n),
			MetaVersion:         strconv.FormatInt(st.Version, 10),
		},
	}
}

// with is st holding v as its data, due at due.
func with(st State, v any, due time.Time) (State, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return State{}, err
	}
	st.Data, st.DueAt = data, due
	return st, nil
}

// write is the fire that writes v as st's data, due at due.
func write(st State, v any, due time.Time) (fired, error) {
	n, err := with(st, v, due)
	return fired{next: n}, err
}

// goalFire queues a goal's owed continuation, or ends its wait.
func (s *Scheduler) goalFire(ctx context.Context, st State, now time.Time) (fired, error) {
	var g Goal
	if err := json.Unmarshal(st.Data, &g); err != nil {
		return fired{}, err
	}
	switch {
	case g.Status != GoalActive:
		return write(st, g, time.Time{})
	case g.Wait != nil:
		if w := *g.Wait; w.Thing() != "" && !s.opts.Ended(ctx, st.Conv, w) {
			return write(st, g, g.due(now))
		}
		// The wait is over: a continuation is owed, if the budget has
		// one, and fires next.
		g.Wait = nil
		next, ok := g.continued()
		if !ok {
			f, err := write(st, next, time.Time{})
			f.tell, f.to = next.Reason, next.Origin
			return f, err
		}
		next.Owed = true
		return write(st, next, now)
	case g.Owed:
		return fired{entry: entry(st, g.Turns, Continuation(g), g.CreatedBy, g.Origin)}, nil
	}
	return write(st, g, time.Time{})
}

// goalOwns reports whether conv's goal is running (active, a
// continuation owed): it owns the conversation, and loops wait. One that
// waits, or whose continuation was cut short (/stop), does not.
func (s *Scheduler) goalOwns(ctx context.Context, conv string) bool {
	st, err := s.opts.Store.Controller(ctx, Key{Conv: conv, Kind: KindGoal})
	if err != nil {
		return false
	}
	var g Goal
	return json.Unmarshal(st.Data, &g) == nil && g.Status == GoalActive && g.Wait == nil && g.Owed
}

// loopFire queues a loop's tick, unless a running goal defers it.
func (s *Scheduler) loopFire(ctx context.Context, st State, now time.Time) (fired, error) {
	var l Loop
	if err := json.Unmarshal(st.Data, &l); err != nil {
		return fired{}, err
	}
	switch {
	case l.Status != LoopActive:
		return write(st, l, time.Time{})
	case s.goalOwns(ctx, st.Conv):
		return write(st, l, now.Add(min(l.Interval, deferPoll)))
	}
	return fired{entry: entry(st, l.Ticks+1, l.Prompt, l.CreatedBy, l.Origin)}, nil
}

// heartbeatFire queues a heartbeat's tick when its conversation is idle;
// ticks missed while it was busy, or while no instance ran, are one.
func (s *Scheduler) heartbeatFire(ctx context.Context, st State, now time.Time) (fired, error) {
	var h Heartbeat
	if err := json.Unmarshal(st.Data, &h); err != nil {
		return fired{}, err
	}
	switch {
	case h.Off:
		return write(st, h, time.Time{})
	case s.opts.Busy != nil && s.opts.Busy(ctx, st.Conv):
		return write(st, h, h.Due(now))
	}
	return fired{entry: entry(st, h.Ticks+1, h.Prompt, h.CreatedBy, h.Origin)}, nil
}
