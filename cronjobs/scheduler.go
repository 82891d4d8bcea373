package cronjobs

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
)

// Defaults for SchedulerOptions.
const (
	DefaultClaimTTL = 30 * time.Second
	DefaultPoll     = time.Second
	DefaultMaxFires = 64
	dueBatch        = 256
	// busyWait is how soon the scheduler looks again when every due job
	// it read is being fired already (here or by another instance).
	busyWait   = 50 * time.Millisecond
	storeRetry = 2 * time.Second
)

// AgentFunc runs a job's prompt in a fresh session of its own (none of
// the origin conversation's history) and returns the agent's final
// reply. An error is the run's failure, in words for the job's owner.
type AgentFunc func(ctx context.Context, j Job, r Run, prompt string) (string, error)

// SchedulerOptions configure NewScheduler.
type SchedulerOptions struct {
	Store   Store           // required
	Once    lease.OnceStore // required: the fires' once-only claims
	Outbox  outbox.Store    // required: where reports are queued
	Agent   AgentFunc       // nil: agent jobs fail saying no model is configured
	Targets Targets
	Outputs Outputs
	Name    string // this instance, the owner of its claims; required
	// ScriptTimeout bounds one run of a job's script (cron.script_timeout).
	ScriptTimeout time.Duration
	// ScriptsDir is cron.scripts_dir, where the script of a job made in
	// a conversation must still lie, its symlinks followed, when it
	// fires; empty runs no such script.
	ScriptsDir string
	// Env builds a script's environment (config.Config.SubprocessEnv); nil
	// gives the base set alone.
	Env *proc.Env
	// Redact masks herald's secrets in what a run leaves: its saved
	// output, its error, its report, and a script's output before the
	// agent reads it; nil keeps them as they are.
	Redact   func(string) string
	ClaimTTL time.Duration // how long a fire's claim holds between renewals; 0: DefaultClaimTTL
	// Poll is how often the store is read for a change another process
	// made (the CLI, another instance); 0: DefaultPoll.
	Poll     time.Duration
	MaxFires int // fires run at once by this instance; 0: DefaultMaxFires
	// Ran, when set, is told of each fire this instance recorded, once
	// its job was updated and the fire marked done; it must return
	// quickly.
	Ran    func(Run)
	Clock  clock.Clock
	Logger *slog.Logger
}

// Scheduler fires due jobs. It sleeps until the next job is due by the
// store (a timer on its clock), and reads the store again at least every
// Poll, so a change made anywhere is seen within it. Each fire is claimed
// once among every instance (lease.OnceStore) before it runs; a fire
// whose claimer died is found by its run-out claim and finished here. It
// is a component: Start, Shutdown.
type Scheduler struct {
	opts    SchedulerOptions
	store   Store
	clock   clock.Clock
	log     *slog.Logger
	renewer *lease.Renewer

	wake  chan struct{}
	slots chan struct{}

	loop  bgloop.Loop
	fires sync.WaitGroup

	mu sync.Mutex
	// firesCtx is the fires' context, not the loop's: a Shutdown stops
	// the loop at once and gives the fires until its deadline.
	firesCtx    context.Context
	cancelFires context.CancelFunc
	inflight    map[string]context.CancelFunc // fire id → its cancel, while it runs here
	held        map[string]time.Time          // fire id → when another's claim on it runs out
	delivery    sync.Mutex                    // serialises this instance's writes of delivery outcomes
}

// NewScheduler returns a scheduler. Errors: Invalid (a required option
// missing).
func NewScheduler(opts SchedulerOptions) (*Scheduler, error) {
	const op = "cronjobs.NewScheduler"
	switch {
	case opts.Store == nil || opts.Once == nil || opts.Outbox == nil:
		return nil, errs.E(op, errs.Invalid, "the scheduler needs the cron store, the once-only claims and the outbox")
	case opts.Name == "":
		return nil, errs.E(op, errs.Invalid, "the scheduler needs its instance's name")
	}
	if opts.ClaimTTL <= 0 {
		opts.ClaimTTL = DefaultClaimTTL
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.MaxFires <= 0 {
		opts.MaxFires = DefaultMaxFires
	}
	if opts.ScriptTimeout <= 0 {
		opts.ScriptTimeout = time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Scheduler{
		opts:     opts,
		store:    opts.Store,
		clock:    opts.Clock,
		log:      opts.Logger,
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, opts.MaxFires),
		inflight: map[string]context.CancelFunc{},
		held:     map[string]time.Time{},
	}
	r, err := lease.NewRenewer(lease.RenewerOptions{
		Renew:  opts.Once.RenewOnce,
		TTL:    opts.ClaimTTL,
		Lost:   s.lost,
		Clock:  opts.Clock,
		Logger: opts.Logger,
	})
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	s.renewer = r
	return s, nil
}

// Wake makes the scheduler read the store now: a job was made or changed
// in this process.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start starts the loop under ctx. Errors: Conflict (started before).
func (s *Scheduler) Start(ctx context.Context) error {
	const op = "cronjobs.Scheduler.Start"
	if s.loop.Started() {
		return errs.E(op, errs.Conflict, "the scheduler is started already")
	}
	if err := s.renewer.Start(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.firesCtx, s.cancelFires = context.WithCancel(ctx)
	s.mu.Unlock()
	return s.loop.Start(ctx, op, s.schedule)
}

// Shutdown stops firing and waits for the fires running here, until ctx
// ends; those still running then are stopped, and their claims run out
// so that another instance (or this one, restarted) runs them again.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	if !s.loop.Started() {
		return nil
	}
	// The loop stops at once; the fires are given until ctx ends.
	s.loop.Halt()
	s.mu.Lock()
	cancelFires := s.cancelFires
	s.mu.Unlock()
	err := bgloop.Wait(ctx, &s.fires)
	cancelFires()
	s.fires.Wait()
	return errors.Join(err, s.renewer.Shutdown(ctx))
}

// schedule fires what is due and sleeps until the next due time, Poll
// at most; every half claim TTL it looks for fires whose claimer died.
func (s *Scheduler) schedule(ctx context.Context) {
	var swept time.Time
	for ctx.Err() == nil {
		if now := s.clock.Now(); now.Sub(swept) >= s.opts.ClaimTTL/2 {
			swept = now
			s.sweep(ctx)
		}
		s.sleep(ctx, s.tick(ctx))
	}
}

// sleep waits until the clock reaches until, a wake, or ctx's end. The
// wait runs to a time the tick set from its read of the store, not for
// a span from now: when the clock passed it while the store was read (a
// slow read, a test's clock moved on), what fell due meanwhile is read
// at once rather than a whole wait later.
func (s *Scheduler) sleep(ctx context.Context, until time.Time) {
	wait := until.Sub(s.clock.Now())
	if wait <= 0 {
		return
	}
	t := s.clock.NewTimer(wait)
	defer t.Stop()
	if !s.clock.Now().Before(until) {
		// Passed between the span's reckoning and the timer's arming.
		return
	}
	select {
	case <-t.C():
	case <-s.wake:
	case <-ctx.Done():
	}
}

// tick starts the fires that are due and returns when to read the store
// again. A next due time is kept as it is, counted from the read; a pause
// (the store failing, every due job being fired, nothing due) is counted
// from the tick's end, so that a slow read is never followed by another
// at once.
func (s *Scheduler) tick(ctx context.Context) time.Time {
	now := s.clock.Now()
	pause := func(d time.Duration) time.Time { return s.clock.Now().Add(d) }
	jobs, err := s.store.DueJobs(ctx, now, dueBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the due cron jobs failed; retrying", "err", err)
		}
		return pause(storeRetry)
	}
	s.forgetHeld(now)
	started, busy := 0, 0
	var stale clock.Timer
	defer func() {
		if stale != nil {
			stale.Stop()
		}
	}()
	for _, j := range jobs {
		f := fireOf(j)
		if !s.take(f, now) {
			busy++
			continue
		}
		if !s.slot(ctx, now, &stale) {
			// Read again, or stopping.
			s.untake(f)
			return now
		}
		started++
		s.start(func(ctx context.Context) { s.fire(ctx, j, f) }, f)
	}
	if len(jobs) == dueBatch {
		if started > 0 {
			return now
		}
		return pause(busyWait)
	}
	next, ok, err := s.store.NextDue(ctx)
	switch {
	case err != nil:
		return pause(storeRetry)
	case !ok:
		return pause(s.opts.Poll)
	case next.After(now):
		// Due after the read: read again then (at once if the clock
		// passed it meanwhile), a Poll from now at the latest.
		if poll := pause(s.opts.Poll); poll.Before(next) {
			return poll
		}
		return next
	}
	// What was due by the read is being fired already; a fire's end
	// wakes the loop.
	wait := busyWait
	if busy == len(jobs) {
		wait = min(s.opts.Poll, 250*time.Millisecond)
	}
	return pause(wait)
}

// slot takes a slot for a fire of the jobs read at read. With every
// slot taken it waits for one to free, rather than reading the due jobs
// again for each (a read of a whole batch to start one fire, when many
// are due at once), but not past Poll after the read: a job read longer
// ago may have been paused, changed or removed since, so it is read
// again, as the loop would. It returns false when the jobs are to be
// read again or the loop is stopping; stale is the wait's timer, made
// at the first wait and stopped by the caller.
func (s *Scheduler) slot(ctx context.Context, read time.Time, stale *clock.Timer) bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	if *stale == nil {
		left := s.opts.Poll - s.clock.Now().Sub(read)
		if left <= 0 {
			return false
		}
		*stale = s.clock.NewTimer(left)
	}
	for {
		select {
		case s.slots <- struct{}{}:
			return true
		case <-s.wake:
			// A fire ended (its slot is free now), or a job changed here
			// (the next read sees it).
		case <-(*stale).C():
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// take marks f as firing here, unless it is already or another
// instance's live claim holds it.
func (s *Scheduler) take(f fire, now time.Time) bool {
	id := f.id()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.inflight[id]; ok {
		return false
	}
	if until, ok := s.held[id]; ok && now.Before(until) {
		return false
	}
	s.inflight[id] = nil
	return true
}

func (s *Scheduler) untake(f fire) {
	s.mu.Lock()
	delete(s.inflight, f.id())
	s.mu.Unlock()
}

// forgetHeld drops the notes of others' claims that have run out.
func (s *Scheduler) forgetHeld(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, until := range s.held {
		if !now.Before(until) {
			delete(s.held, id)
		}
	}
}

// start runs fn for f on its own goroutine, in a slot already taken,
// under the fires' context.
func (s *Scheduler) start(fn func(context.Context), f fire) {
	s.mu.Lock()
	fctx, cancel := context.WithCancel(context.WithoutCancel(s.firesCtx))
	stop := context.AfterFunc(s.firesCtx, cancel)
	s.inflight[f.id()] = cancel
	s.mu.Unlock()
	s.fires.Add(1)
	go func() {
		defer s.fires.Done()
		defer func() {
			stop()
			cancel()
			s.untake(f)
			<-s.slots
			s.Wake()
		}()
		fn(fctx)
	}()
}

// lost stops a fire whose claim another instance took over: it is
// theirs to finish now.
func (s *Scheduler) lost(c lease.Claim) {
	s.mu.Lock()
	cancel := s.inflight[c.Name]
	s.mu.Unlock()
	if cancel != nil {
		s.log.Warn("a cron fire's claim ran out and another instance took it; stopping it here", "fire", c.Name)
		cancel()
	}
}

// sweep finds fires whose claimer died mid-fire and runs them again.
func (s *Scheduler) sweep(ctx context.Context) {
	ids, err := s.opts.Once.StaleOnce(ctx, firePrefix, dueBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("looking for cron fires whose instance died failed", "err", err)
		}
		return
	}
	now := s.clock.Now()
	for _, id := range ids {
		f, err := parseFire(id)
		if err != nil || !s.take(f, now) {
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.untake(f)
			return
		}
		s.start(func(ctx context.Context) { s.refire(ctx, f) }, f)
	}
}

// refire runs again a fire whose claimer died, from its job as stored.
func (s *Scheduler) refire(ctx context.Context, f fire) {
	j, err := s.store.Job(ctx, f.job)
	if errs.Is(err, errs.NotFound) {
		// The job was removed: there is nothing to run; the claim is
		// finished so it is not found again.
		if c, state, err := s.opts.Once.ClaimOnce(ctx, f.id(), s.opts.Name, s.opts.ClaimTTL); err == nil && state == lease.OnceClaimed {
			_ = s.opts.Once.DoneOnce(ctx, c)
		}
		return
	}
	if err != nil {
		s.log.Warn("reading a cron job to finish its fire failed; retrying later", "job", f.job, "err", err)
		return
	}
	s.log.Info("finishing a cron fire whose instance died", "job", f.job, "fire", f.id())
	s.fire(ctx, j, f)
}

// fire claims f and, when this instance got it, runs it. The claim, the
// job moved past f and the run's start are one store call
// (Store.StartFire); the run's end, the job's last run and the claim
// marked done another (Store.EndFire). When the job changed since it was
// read, or the end does not fit the one call, the fire goes the longer
// way, one store call a step.
func (s *Scheduler) fire(ctx context.Context, j Job, f fire) {
	now := s.clock.Now()
	st, changed := s.decide(j, f, now)
	r := Run{
		ID: f.runID(), Job: j.ID, Fire: f.id(), ScheduledAt: f.at, Manual: f.manual,
		Owner: s.opts.Name, StartedAt: now, Status: StatusRunning,
	}
	in := FireStart{Fire: f.id(), Owner: s.opts.Name, TTL: s.opts.ClaimTTL, Run: r,
		Start: st.broken == "" && !st.missed}
	if changed {
		next := st.job
		next.UpdatedAt = now
		in.Job = &next
	}
	res, err := s.store.StartFire(ctx, in)
	if err != nil {
		if ctx.Err() == nil {
			s.warnFire(f, "claiming a cron fire failed; it is tried again", err)
		}
		s.hold(f, s.clock.Now().Add(storeRetry))
		return
	}
	c := res.Claim
	moved := in.Job == nil || res.Moved
	switch res.State {
	case lease.OnceHeld:
		s.hold(f, c.Expires)
		return
	case lease.OnceDone:
		// It ran; only moving its job on may be left undone.
		if !moved {
			if _, err := s.advance(ctx, j, f); err != nil && ctx.Err() == nil {
				s.warnFire(f, "moving a cron job past a done fire failed", err)
			}
		}
		return
	}
	s.renewer.Hold(c)
	defer s.renewer.Drop(c.Name)
	begun := runStart{known: moved, prior: res.Prior, hasPrior: res.HasPrior, started: res.Started, run: r}
	if moved {
		if res.Moved {
			st.job = res.Job
		}
	} else {
		// The job changed since it was read: decided again from it as it
		// stands, and nothing of the run written yet.
		if st, err = s.advance(ctx, j, f); err != nil {
			// The claim runs out and the fire is run again.
			if ctx.Err() == nil {
				s.warnFire(f, "moving a cron job to its next run failed; the fire is tried again", err)
			}
			return
		}
	}
	ran, marked, err := s.run(ctx, st, f, c, begun)
	if err != nil {
		if ctx.Err() == nil {
			s.warnFire(f, "recording a cron fire failed; it is run again when its claim runs out", err)
		}
		return
	}
	if !marked {
		s.done(ctx, f, c)
	}
	if ran != nil && s.opts.Ran != nil {
		s.opts.Ran(*ran)
	}
}

// done marks c's fire done.
func (s *Scheduler) done(ctx context.Context, f fire, c lease.Claim) {
	if cur, ok := s.renewer.Current(c.Name); ok {
		c = cur
	}
	// Dropped before it is marked done: a renewal running meanwhile
	// would find the claim done and, were it still held, take it for
	// lost.
	s.renewer.Drop(c.Name)
	if err := s.opts.Once.DoneOnce(context.WithoutCancel(ctx), c); err != nil {
		s.warnFire(f, "marking a cron fire done failed; it may be looked at again, and its run record keeps it from running twice", err)
	}
}

// warnFire logs a warning about fire f. The fire's attributes are given
// here rather than bound to a logger made for each fire (slog's With),
// which would format them at every fire for warnings few fires log.
func (s *Scheduler) warnFire(f fire, msg string, err error) {
	s.log.Warn(msg, "job", f.job, "fire", f.id(), "err", err)
}

// hold notes that f is another's (or could not be claimed) until then.
func (s *Scheduler) hold(f fire, until time.Time) {
	s.mu.Lock()
	s.held[f.id()] = until
	s.mu.Unlock()
}

// runStart is what a fire's start call found of its run: when known, the
// record an earlier attempt left (prior, when hasPrior) and whether run,
// the run as it starts, was written (started).
type runStart struct {
	known, hasPrior, started bool
	prior, run               Run
}

// run runs the fire st decided on, under claim c, and records it: its
// run, its output, its reports queued, the job's last status. It returns
// the run recorded (nil for none) and whether it marked the claim done
// too. An error leaves the fire to be run again (its reports are keyed by
// the fire: none goes twice).
func (s *Scheduler) run(ctx context.Context, st step, f fire, c lease.Claim, begun runStart) (*Run, bool, error) {
	j := st.job
	if st.broken != "" {
		s.log.Warn("a cron job cannot be scheduled; it is kept with the error and not run", "job", j.ID, "err", st.broken)
		return nil, false, nil
	}
	prior, hasPrior := begun.prior, begun.hasPrior
	if !begun.known {
		var err error
		prior, err = s.store.Run(ctx, f.runID())
		switch {
		case err == nil:
			hasPrior = true
		case !errs.Is(err, errs.NotFound):
			return nil, false, err
		}
	}
	if hasPrior && prior.Ended() {
		// An earlier attempt at this fire ran it and recorded it.
		return nil, false, s.finish(ctx, st, prior)
	}
	r := begun.run
	if !begun.known || hasPrior {
		r.StartedAt = s.clock.Now()
	}
	// The fire's span holds its run and the queueing of its reports,
	// whose sends continue it.
	ctx, span := tracing.Start(ctx, tracing.SpanCronFire,
		attribute.String("herald.cron.job", j.ID), attribute.String("herald.cron.run", r.ID))
	defer func() {
		span.SetAttributes(attribute.String("herald.cron.status", string(r.Status)))
		tracing.EndWith(span, r.Status == StatusError, string(r.Status))
	}()
	var text, body string
	if st.missed {
		r.Status = StatusMissed
		text = missedNotice(j, f.at)
		body = text
	} else {
		if !begun.started {
			if err := s.store.PutRun(ctx, r); err != nil {
				return nil, false, err
			}
		}
		out := s.execute(ctx, j, r)
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		out.err, out.text, out.body = s.redact(out.err), s.redact(out.text), s.redact(out.body)
		r.Status, r.Error, body = out.status, out.err, out.body
		switch {
		case out.status == StatusError:
			text = failureNotice(j, out.err)
		case out.text != "":
			text = header(j) + out.text
		}
	}
	if path, err := s.opts.Outputs.Save(j, r, body); err != nil {
		s.log.Warn("saving a cron run's output failed", "job", j.ID, "err", err)
	} else {
		r.Output = path
	}
	// The reports and the end are written through a store that may be
	// away for a moment (a Redis failover): each is tried again, under the
	// fire's claim, until the store is back, rather than left to a claim
	// that runs out and a fire that runs again.
	if err := s.untilStoreBack(ctx, c, func() error { return s.queue(ctx, j, &r, text) }); err != nil {
		return nil, false, err
	}
	r.EndedAt = s.clock.Now()
	var marked bool
	err := s.untilStoreBack(ctx, c, func() (err error) {
		marked, err = s.end(ctx, st, r, c)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return &r, marked, nil
}

// storeBackTries bounds the tries of untilStoreBack: about half a minute
// of storeRetry pauses, past a Redis Cluster's failover.
const storeBackTries = 15

// untilStoreBack calls write, and again after storeRetry while it fails
// Unavailable (the store away for a moment), up to storeBackTries times
// or until ctx ends. Meanwhile c, the fire's claim, stays held and
// renewed, so no other instance takes the fire. write must be safe to
// repeat: the reports carry idempotency keys, the end checks the claim.
func (s *Scheduler) untilStoreBack(ctx context.Context, c lease.Claim, write func() error) error {
	err := write()
	for try := 1; try < storeBackTries && errs.Is(err, errs.Unavailable) && ctx.Err() == nil; try++ {
		if _, held := s.renewer.Current(c.Name); !held {
			s.renewer.Hold(c)
			defer s.renewer.Drop(c.Name)
		}
		s.log.Warn("the store is unavailable; writing a cron fire's end again shortly", "fire", c.Name, "err", err)
		t := s.clock.NewTimer(storeRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C():
		}
		err = write()
	}
	return err
}

// end records r, ended, on its job and marks c's fire done, in one store
// call (Store.EndFire) when it can: not for a job's last run, which
// removes the job before the fire is marked done, nor when the job
// changed or the claim moved on since the fire began, whose records are
// then written one by one as the longer way writes them. It reports
// whether it marked the fire done.
func (s *Scheduler) end(ctx context.Context, st step, r Run, c lease.Claim) (bool, error) {
	if !st.last {
		if cur, ok := s.renewer.Current(c.Name); ok {
			c = cur
		}
		in := FireEnd{Claim: c, Run: r}
		if next := st.job; s.record(&next, r) {
			next.UpdatedAt = s.clock.Now()
			in.Job = &next
		}
		// Dropped before it is marked done, as in done.
		s.renewer.Drop(c.Name)
		_, err := s.store.EndFire(ctx, in)
		if err == nil {
			return true, nil
		}
		if code := errs.CodeOf(err); ctx.Err() != nil || code != errs.Conflict && code != errs.NotFound && code != errs.LeaseLost {
			return false, err
		}
		// Held again for the longer way.
		s.renewer.Hold(c)
	}
	if err := s.store.PutRun(ctx, r); err != nil {
		return false, err
	}
	return false, s.finish(ctx, st, r)
}

// queue resolves j's targets and queues text to each; a target that
// cannot be resolved any more is recorded on the run at once.
func (s *Scheduler) queue(ctx context.Context, j Job, r *Run, text string) error {
	targets, err := s.opts.Targets.Resolve(j.Deliver, j.Origin)
	if err != nil {
		r.Delivery, r.DeliveryError = DeliveryFailed, errs.Reason(err)
		return nil
	}
	r.Targets = r.Targets[:0]
	for _, t := range targets {
		r.Targets = append(r.Targets, t.String())
	}
	switch {
	case text == "":
		r.Delivery = DeliveryNone
		return nil
	case len(targets) == 0:
		r.Delivery = DeliveryLocal
		return nil
	}
	for _, m := range reports(j, *r, targets, text) {
		m.Meta = tracing.Inject(ctx, m.Meta)
		if _, _, err := s.opts.Outbox.Enqueue(ctx, m); err != nil {
			return err
		}
	}
	r.Delivery = DeliveryPending
	return nil
}

// finish records r on its job (last run, status, errors) and removes a
// job whose last run this was.
func (s *Scheduler) finish(ctx context.Context, st step, r Run) error {
	j, err := s.modify(ctx, st.job, func(j *Job) bool { return s.record(j, r) })
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.last && !r.Manual && j.NextRunAt.IsZero() && j.RunRequestedAt.IsZero() {
		if err := s.store.RemoveJob(ctx, j.ID); err != nil && !errs.Is(err, errs.NotFound) {
			return err
		}
		s.log.Info("a cron job ran its last time and was removed", "job", j.ID)
	}
	return nil
}

// record sets r on j as its last run, and reports whether that changed
// j: a later run recorded already is kept.
func (s *Scheduler) record(j *Job, r Run) bool {
	if j.LastRunAt.After(r.StartedAt) {
		return false
	}
	j.LastRunAt, j.LastStatus, j.LastError = r.StartedAt, r.Status, r.Error
	if r.Delivery == DeliveryFailed {
		j.LastDeliveryError = r.DeliveryError
	}
	return true
}

// modify applies fn to j and writes it, reading it again when another
// writer changed it first. fn returns false when there is nothing to
// write.
func (s *Scheduler) modify(ctx context.Context, j Job, fn func(*Job) bool) (Job, error) {
	return Modify(ctx, s.store, s.clock, j, fn)
}

// Modify applies fn to j and writes it (Store.UpdateJob), reading the
// job again and reapplying fn when another writer changed it first. fn
// returns false when there is nothing to write; then the job is
// returned as it stands.
func Modify(ctx context.Context, store Store, c clock.Clock, j Job, fn func(*Job) bool) (Job, error) {
	for range 8 {
		next := j
		if !fn(&next) {
			return j, nil
		}
		next.UpdatedAt = c.Now()
		saved, err := store.UpdateJob(ctx, next)
		if !errs.Is(err, errs.Conflict) {
			return saved, err
		}
		if j, err = store.Job(ctx, j.ID); err != nil {
			return Job{}, err
		}
	}
	return Job{}, errs.E("cronjobs.Modify", errs.Conflict, "job %s kept changing while it was written; try again", j.ID)
}

// Delivered is told how a report's delivery went (by the gateway's
// delivery worker): accepted by its platform, or dead-lettered with
// reason. The run and its job record it; a good delivery clears the
// job's last delivery error.
func (s *Scheduler) Delivered(ctx context.Context, m outbox.Message, accepted bool, reason string) {
	if m.Kind != KindReport || m.Ref == "" {
		return
	}
	s.delivery.Lock()
	defer s.delivery.Unlock()
	r, err := s.store.Run(ctx, m.Ref)
	if err != nil {
		return
	}
	target := m.Target.String()
	if accepted {
		if !slices.Contains(r.Sent, target) {
			r.Sent = append(r.Sent, target)
		}
		if r.Delivery != DeliveryFailed && len(r.Sent) >= len(r.Targets) {
			r.Delivery = DeliveryDelivered
		}
	} else {
		r.Delivery = DeliveryFailed
		r.DeliveryError = joinErr(r.DeliveryError, target+": "+reason)
	}
	if err := s.store.PutRun(ctx, r); err != nil {
		s.log.Warn("recording a cron report's delivery failed", "run", r.ID, "err", err)
	}
	j, err := s.store.Job(ctx, r.Job)
	if err != nil {
		return
	}
	_, err = s.modify(ctx, j, func(j *Job) bool {
		if accepted {
			if j.LastDeliveryError == "" {
				return false
			}
			j.LastDeliveryError = ""
			return true
		}
		j.LastDeliveryError = target + ": " + reason
		return true
	})
	if err != nil && !errs.Is(err, errs.NotFound) {
		s.log.Warn("recording a cron report's delivery on its job failed", "job", r.Job, "err", err)
	}
}

// joinErr adds b to the errors a lists, once.
func joinErr(a, b string) string {
	if a == "" || strings.Contains(a, b) {
		return cmp.Or(a, b)
	}
	return a + "; " + b
}
