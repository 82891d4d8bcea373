package kanban

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/signals"
)

// Defaults for DispatcherOptions.
const (
	DefaultDispatchInterval = 60 * time.Second
	DefaultClaimTTL         = 900 * time.Second
	DefaultMaxSpawn         = 8
	// stopShutdown is why a worker the gateway's shutdown stopped was.
	stopShutdown = "the gateway stopped"
	// DefaultRateLimitWait is how long a rate-limited card (and its
	// lane) waits before its next run when its worker did not say how
	// long (kanban.rate_limit_wait_seconds).
	DefaultRateLimitWait = 300 * time.Second
	// breakerFailures in a row pause a lane for breakerPause.
	breakerFailures = 3
	breakerPause    = 30 * time.Minute
)

// LaneConfig is one lane a dispatcher runs.
type LaneConfig struct {
	Lane          Lane
	MaxConcurrent int // workers of the lane at once on this instance; 0: no cap beyond MaxSpawn
	// ExitZeroCompletes makes a silent exit 0 (no complete or block
	// call) complete the card with the worker's last output.
	ExitZeroCompletes bool
}

// DispatcherOptions configure NewDispatcher.
type DispatcherOptions struct {
	Service *Service // required
	Lanes   map[string]LaneConfig
	Name    string // this instance, the owner of its claims; required
	Host    string // this machine, for the PIDs its workers have
	// PID and ProcStart name the process the dispatcher runs in, which
	// renews its claims and runs its in-process workers; 0: this one.
	PID       int
	ProcStart string
	// Interval is how often it looks at every board
	// (kanban.dispatch_interval_seconds); Wake looks at once.
	Interval time.Duration
	ClaimTTL time.Duration // kanban.claim_ttl_seconds
	MaxSpawn int           // workers at once on this instance (kanban.max_spawn)
	// DefaultAssignee is the lane of a card with none
	// (kanban.default_assignee); "" leaves such cards waiting, said once.
	DefaultAssignee string
	// ReviewDispatch hands cards in review to ReviewLane (or, with
	// none, to their own lane); off, people review them.
	ReviewDispatch bool
	ReviewLane     string
	// RateLimitWait holds a rate-limited card and its lane back when
	// its worker did not say how long (kanban.rate_limit_wait_seconds);
	// 0: DefaultRateLimitWait.
	RateLimitWait time.Duration
	// Env returns what a worker is given beside HERALD_KANBAN_*: the API
	// address and a token good for its card's claim only.
	Env func(k Card, token int64) []string
	// Signals, when set, carries Wake to every instance's dispatcher
	// (SignalReady), which hears it through its process's signal tailer
	// (HandleSignal).
	Signals signals.Store
	// Ended, when set, is told of each worker's end once it is recorded.
	Ended  func(card string, e Exit)
	Clock  clock.Clock
	Logger *slog.Logger
}

// Dispatcher hands ready cards to lanes' workers and looks after the
// workers it started: it renews their claims while they live, maps how
// they exit, stops those past their card's max runtime, and releases
// the claims of workers that died, here or on an instance that did. Any
// number run at once, on one store: each step is one compare-and-set.
// It is a component: Start, Shutdown.
type Dispatcher struct {
	opts DispatcherOptions
	svc  *Service
	clk  clock.Clock
	log  *slog.Logger
	wake chan struct{}
	// announce is set by Wake until the loop has told the other
	// instances.
	announce atomic.Bool
	loop     bgloop.Loop

	mu      sync.Mutex
	running map[string]*running // card id → its worker here
	workers sync.WaitGroup
	renewer *lease.Renewer // the claims of the workers running here
}

// running is a worker this instance started.
type running struct {
	card    string
	board   string
	lane    string
	token   int64
	started time.Time
	max     time.Duration
	review  bool
	worker  Worker
	ws      workspaceRun
	span    trace.Span // its herald.kanban.run, ended with it

	mu      sync.Mutex
	stopped string       // why it was stopped here, when it was
	asked   *StopRequest // the request it was stopped for (RequestStop)
}

// stop notes why r is stopped, and reports whether it was not already.
func (r *running) stop(why string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != "" {
		return false
	}
	r.stopped = why
	return true
}

func (r *running) why() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// NewDispatcher returns a dispatcher. Errors: Invalid.
func NewDispatcher(opts DispatcherOptions) (*Dispatcher, error) {
	const op = "kanban.NewDispatcher"
	if opts.Service == nil || opts.Name == "" {
		return nil, errs.E(op, errs.Invalid, "the dispatcher needs the board service and its instance's name")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultDispatchInterval
	}
	if opts.ClaimTTL <= 0 {
		opts.ClaimTTL = DefaultClaimTTL
	}
	if opts.MaxSpawn <= 0 {
		opts.MaxSpawn = DefaultMaxSpawn
	}
	if opts.RateLimitWait <= 0 {
		opts.RateLimitWait = DefaultRateLimitWait
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	if opts.PID <= 0 {
		opts.PID = os.Getpid()
		opts.ProcStart = proc.StartTime(opts.PID)
	}
	d := &Dispatcher{
		opts: opts, svc: opts.Service, clk: opts.Clock, log: opts.Logger,
		wake:    make(chan struct{}, 1),
		running: map[string]*running{},
	}
	var err error
	// The loop renews (Heartbeat): the renewer's own loop is not started.
	d.renewer, err = lease.NewRenewer(lease.RenewerOptions{Renew: d.renewClaims, TTL: opts.ClaimTTL, Lost: d.lostClaim, Clock: opts.Clock, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Start starts the loop; it runs until Shutdown. Errors: Conflict
// (started before).
func (d *Dispatcher) Start(context.Context) error {
	return d.loop.Start(context.Background(), "kanban.Dispatcher.Start", d.dispatch)
}

// Shutdown stops dispatching and stops the workers this instance runs;
// their claims are released, so another instance (or this one, started
// again) runs their cards again.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	if !d.loop.Started() {
		return nil
	}
	// Once the loop returned it starts no worker: those stopped are all
	// there are.
	d.loop.Halt()
	d.mu.Lock()
	rs := make([]*running, 0, len(d.running))
	for _, r := range d.running {
		rs = append(rs, r)
	}
	d.mu.Unlock()
	var err error
	for _, r := range rs {
		r.stop(stopShutdown)
		err = errors.Join(err, r.worker.Stop(ctx))
	}
	d.workers.Wait()
	return err
}

// Wake says a card became ready (or went to review) in this process:
// the dispatcher looks at the boards now, and tells every other
// instance's dispatcher to (one signal for any number of wakes before
// its loop runs).
func (d *Dispatcher) Wake() {
	if d.opts.Signals != nil {
		d.announce.Store(true)
	}
	d.poke()
}

// poke makes the dispatcher look at the boards now.
func (d *Dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// SignalReady tells every instance's dispatcher that a card became
// ready elsewhere: its Text names the instance that says so.
const SignalReady signals.Kind = "kanban.ready"

// signalConv is the conversation key a board signal is filed under.
const signalConv = "kanban:boards"

// HandleSignal implements signals.Handler: another instance's
// SignalReady makes this one look at the boards now; a SignalStop stops
// the worker of the card it names, when it runs here and its claim asks
// so.
func (d *Dispatcher) HandleSignal(s signals.Signal) {
	switch {
	case s.Kind == SignalReady && s.Text != d.opts.Name:
		d.poke()
	case s.Kind == SignalStop:
		go d.stopSignalled(s.Target)
	}
}

// AnnounceReady tells every instance's dispatcher, from the instance
// named from, that a card became ready: the CLI, which runs none, says
// so after a create.
func AnnounceReady(ctx context.Context, log signals.Store, from string) error {
	return log.Signal(ctx, signals.Signal{Conv: signalConv, Kind: SignalReady, Text: from})
}

// tellOthers writes SignalReady when a Wake asked for it.
func (d *Dispatcher) tellOthers(ctx context.Context) {
	if !d.announce.Swap(false) {
		return
	}
	if err := AnnounceReady(ctx, d.opts.Signals, d.opts.Name); err != nil && ctx.Err() == nil {
		d.log.Warn("telling the other instances of a ready kanban card failed; they see it at their next dispatch", "err", err)
	}
}

// dispatch runs a Tick every Interval, or at once after a Wake, and a
// Heartbeat every third of the claim TTL.
func (d *Dispatcher) dispatch(ctx context.Context) {
	heartbeat := max(d.opts.ClaimTTL/3, time.Second)
	lastTick := time.Time{}
	for ctx.Err() == nil {
		d.tellOthers(ctx)
		now := d.clk.Now()
		if now.Sub(lastTick) >= d.opts.Interval || lastTick.IsZero() {
			lastTick = now
			if _, err := d.Tick(ctx, false); err != nil && ctx.Err() == nil {
				d.log.Warn("a kanban dispatch failed; it is tried again", "err", err)
			}
		}
		d.Heartbeat(ctx)
		t := d.clk.NewTimer(min(heartbeat, d.opts.Interval))
		select {
		case <-t.C():
		case <-d.wake:
			lastTick = time.Time{}
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// TickReport is what one dispatch did, or (dry run) would do.
type TickReport struct {
	Claimed   []string // cards claimed and started
	Released  []string // claims released: their worker died or never started
	Promoted  []string
	Skipped   map[string]string // card → why it waits
	Reclaimed []string
	// Paused are the lanes paused now, on every instance.
	Paused []LaneState
}

// Tick runs one dispatch over every board: release what died, promote,
// claim. A dry run claims and changes nothing and says what it would do.
func (d *Dispatcher) Tick(ctx context.Context, dry bool) (TickReport, error) {
	rep := TickReport{Skipped: map[string]string{}}
	boards, err := d.boards(ctx)
	if err != nil {
		return rep, err
	}
	for _, b := range boards {
		if err := d.tickBoard(ctx, b, dry, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// pausedLanes reads the lanes paused now into rep, and returns them by
// name.
func (d *Dispatcher) pausedLanes(ctx context.Context, rep *TickReport) (map[string]LaneState, error) {
	ls, err := d.svc.PausedLanes(ctx)
	if err != nil {
		return nil, err
	}
	rep.Paused = ls
	out := make(map[string]LaneState, len(ls))
	for _, l := range ls {
		out[l.Lane] = l
	}
	return out, nil
}

func (d *Dispatcher) boards(ctx context.Context) ([]string, error) {
	bs, err := d.svc.Store.Boards(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{DefaultBoard}
	for _, b := range bs {
		if b.Slug != DefaultBoard {
			out = append(out, b.Slug)
		}
	}
	return out, nil
}

func (d *Dispatcher) tickBoard(ctx context.Context, board string, dry bool, rep *TickReport) error {
	now, err := d.svc.Store.Now(ctx)
	if err != nil {
		return err
	}
	// 1–3: claims whose worker died or ran out, and max runtime.
	runningCards, err := d.svc.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusRunning}})
	if err != nil {
		return err
	}
	for _, k := range runningCards {
		if k.Claim == nil {
			continue
		}
		d.mu.Lock()
		r := d.running[k.ID]
		d.mu.Unlock()
		if r != nil && r.token == k.Claim.Token {
			continue // ours: heartbeat looks after it
		}
		if !dry {
			if released, err := d.reclaim(ctx, k, now); err != nil {
				d.log.Warn("reclaiming a kanban card failed", "card", k.ID, "err", err)
			} else if released {
				rep.Reclaimed = append(rep.Reclaimed, k.ID)
			}
		}
	}
	// 4: promote.
	if !dry {
		moved, err := d.svc.Promote(ctx, board)
		if err != nil {
			return err
		}
		for _, k := range moved {
			rep.Promoted = append(rep.Promoted, k.ID)
		}
	}
	// 5–6: claim ready cards, then those in review, but for the lanes
	// paused on any instance.
	paused, err := d.pausedLanes(ctx, rep)
	if err != nil {
		return err
	}
	ready, err := d.svc.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusReady}})
	if err != nil {
		return err
	}
	d.claimAll(ctx, ready, now, paused, false, dry, rep)
	if d.opts.ReviewDispatch {
		review, err := d.svc.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusReview}})
		if err != nil {
			return err
		}
		d.claimAll(ctx, review, now, paused, true, dry, rep)
	}
	return nil
}

// reclaim releases the claim of a card whose worker is not one of ours
// now, once it is known dead: its claim ran out, it is an earlier life
// of this instance's, or its owner's process on this host is gone
// (whatever the owner's name) and its worker with it. A worker on this
// host that is still alive (a process an earlier life of a gateway
// started) is stopped first and confirmed gone: never two workers on
// one card. A worker that outlived its owner is left to finish (its
// complete still counts) until its claim runs out.
func (d *Dispatcher) reclaim(ctx context.Context, k Card, now time.Time) (bool, error) {
	c := k.Claim
	local := c.Host == d.opts.Host && c.PID > 0
	expired := now.After(c.Expires)
	ours := c.Owner == d.opts.Name // an earlier life of this instance
	ownerGone, workerGone := ClaimGone(*c, d.opts.Host)
	dead := ownerGone && (workerGone || !c.Spawned)
	switch {
	case !expired && !ours && !dead:
		return false, nil // its owner renews it, or will lose it
	case local:
		if err := StopOrphan(ctx, c.PID, c.ProcStart, d.pollWait); err != nil {
			return false, err
		}
	case !expired:
		// Ours, with no process to look for: it died with us.
	}
	e := Ending{Outcome: OutcomeReclaimed, Reason: "its claim ran out: the worker's heartbeat was lost"}
	switch {
	case dead:
		e = Ending{Outcome: OutcomeCrashed, Reason: "its worker is gone: the process that ran it (" + c.Owner + ", pid " + strconv.Itoa(c.OwnerPID) + " on " + c.Host + ") stopped"}
	case !c.Spawned:
		e = Ending{Outcome: OutcomeCrashed, Reason: "its claim ran out before a worker started"}
	case local || ours:
		e = Ending{Outcome: OutcomeCrashed, Reason: "its worker is gone: the gateway that ran it stopped"}
	}
	_, err := d.svc.Release(ctx, k.ID, c.Token, e)
	if errs.Is(err, errs.LeaseLost) {
		return false, nil // renewed or released meanwhile
	}
	return err == nil, err
}

// pollWait waits a little on the clock, for a killed process to go.
func (d *Dispatcher) pollWait(ctx context.Context) error {
	return sleep(ctx, d.clk, 20*time.Millisecond)
}

// claimAll claims what of cards the capacity allows, in their order,
// but for those of the lanes paused.
func (d *Dispatcher) claimAll(ctx context.Context, cards []Card, now time.Time, paused map[string]LaneState, review, dry bool, rep *TickReport) {
	planned := map[string]int{} // a dry run's claims, by lane
	for _, k := range cards {
		d.mu.Lock()
		_, here := d.running[k.ID]
		d.mu.Unlock()
		if here {
			// Its last worker here has not exited yet: the next one
			// waits for it, so a card never has two.
			rep.Skipped[k.ID] = "its last worker is still exiting"
			continue
		}
		if now.Before(k.RetryAt) {
			rep.Skipped[k.ID] = "retry_wait"
			continue
		}
		lane := k.Assignee
		if review && d.opts.ReviewLane != "" {
			lane = d.opts.ReviewLane
		}
		if lane == "" {
			lane = LaneName(d.opts.DefaultAssignee)
		}
		if why := d.held(lane, paused, planned); why != "" {
			rep.Skipped[k.ID] = why
			if !dry {
				d.note(ctx, k, why, now)
			}
			continue
		}
		if dry {
			rep.Claimed = append(rep.Claimed, k.ID)
			planned[lane]++
			continue
		}
		claimed, err := d.svc.Claim(ctx, k.ID, ClaimSpec{Owner: d.opts.Name, Lane: lane, TTL: d.opts.ClaimTTL, Review: review,
			Host: d.opts.Host, PID: d.opts.PID, ProcStart: d.opts.ProcStart})
		if err != nil {
			if !errs.Is(err, errs.Conflict) && !errs.Is(err, errs.Invalid) {
				d.log.Warn("claiming a kanban card failed", "card", k.ID, "err", err)
			}
			continue
		}
		if d.spawn(ctx, claimed, lane, review) {
			rep.Claimed = append(rep.Claimed, k.ID)
		} else {
			rep.Released = append(rep.Released, k.ID)
		}
	}
}

// held says why a card of lane cannot be claimed here now, or "";
// paused are the lanes paused, planned the claims a dry run counts as
// made.
func (d *Dispatcher) held(lane string, paused map[string]LaneState, planned map[string]int) string {
	if lane == "" {
		return EventSkippedUnassigned
	}
	cfg, ok := d.opts.Lanes[lane]
	if !ok {
		return EventSkippedNonspawnable
	}
	total := 0
	for _, n := range planned {
		total += n
	}
	if _, ok := paused[lane]; ok {
		return "lane_paused"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.running)+total >= d.opts.MaxSpawn {
		return "capacity_full"
	}
	if cfg.MaxConcurrent > 0 {
		n := planned[lane]
		for _, r := range d.running {
			if r.lane == lane {
				n++
			}
		}
		if n >= cfg.MaxConcurrent {
			return "lane_cap"
		}
	}
	return ""
}

// note records, once per reason, why a ready card waits (an event the
// board shows), and raises stranded_in_ready when it has waited long.
func (d *Dispatcher) note(ctx context.Context, k Card, why string, now time.Time) {
	kind := ""
	switch why {
	case EventSkippedUnassigned, EventSkippedNonspawnable:
		kind = why
	}
	level := ""
	if waited := now.Sub(k.ReadyAt); !k.ReadyAt.IsZero() && waited >= StrandedAfter {
		level = "warning"
		switch {
		case waited >= 6*StrandedAfter:
			level = "critical"
		case waited >= 2*StrandedAfter:
			level = "error"
		}
	}
	mark := why + "/" + level
	if kind == "" && level == "" || k.Waiting == mark {
		return
	}
	_, err := d.svc.apply(ctx, "kanban.note", func(now time.Time) (change, error) {
		cur, err := d.svc.read(ctx, "kanban.note", k.ID)
		if err != nil {
			return change{}, err
		}
		if cur.Waiting == mark || (cur.Status != StatusReady && cur.Status != StatusReview) {
			return change{card: cur}, nil
		}
		from := cur.Version
		cur.Waiting = mark
		var evs []Event
		if kind != "" && (cur.Waiting == "" || !sameReason(k.Waiting, why)) {
			evs = append(evs, Event{Board: cur.Board, Card: cur.ID, Kind: kind, Text: cur.Assignee, At: now})
		}
		if level != "" {
			evs = append(evs, Event{Board: cur.Board, Card: cur.ID, Kind: EventStranded, Text: why, At: now,
				Data: map[string]any{"level": level, "waited_seconds": int(now.Sub(cur.ReadyAt).Seconds())}})
		}
		return change{card: cur, Change: Change{Cards: []CardWrite{{Card: cur, From: from}}, Events: evs}}, nil
	})
	if err != nil && ctx.Err() == nil {
		d.log.Warn("noting why a kanban card waits failed", "card", k.ID, "err", err)
	}
}

func sameReason(mark, why string) bool {
	return len(mark) >= len(why) && mark[:len(why)] == why
}

// spawn starts the worker of a claimed card and reports whether it
// runs; a worker that cannot start releases the claim, counted as a
// failure.
func (d *Dispatcher) spawn(ctx context.Context, k Card, lane string, review bool) bool {
	cfg := d.opts.Lanes[lane]
	ctx, span := tracing.Start(ctx, tracing.SpanKanbanRun, attribute.String("herald.kanban.board", k.Board),
		attribute.String("herald.kanban.card", k.ID), attribute.String("herald.kanban.lane", lane), attribute.Bool("herald.kanban.review", review))
	ws, err := d.svc.openWorkspace(ctx, k)
	// A workspace that cannot be had is the card's trouble, not its
	// lane's: it counts on the card only.
	laneAtFault := err == nil
	var w Worker
	if err == nil {
		spec := WorkerSpec{Card: k, Board: k.Board, Token: k.Claim.Token, Run: k.Claim.Run, Workspace: ws.dir, Review: review,
			Log: d.svc.LogPath(k.ID, k.Claim.Run)}
		if d.opts.Env != nil {
			spec.Env = d.opts.Env(k, k.Claim.Token)
		}
		if spec.Attachments, err = d.svc.attachmentPaths(ctx, k.ID); err == nil {
			w, err = cfg.Lane.Start(ctx, spec)
		}
	}
	if err != nil {
		if laneAtFault {
			d.failed(ctx, lane)
		}
		if _, rerr := d.svc.Release(ctx, k.ID, k.Claim.Token, Ending{Outcome: OutcomeCrashed, Reason: "the worker could not start: " + err.Error()}); rerr != nil {
			d.log.Warn("releasing a kanban card whose worker did not start failed", "card", k.ID, "err", rerr)
		}
		tracing.EndWith(span, true, "not_started")
		return false
	}
	r := &running{card: k.ID, board: k.Board, lane: lane, token: k.Claim.Token, started: d.clk.Now(), max: k.MaxRuntime.Duration(), review: review, worker: w, ws: ws, span: span}
	d.mu.Lock()
	d.running[k.ID] = r
	d.mu.Unlock()
	d.renewer.Hold(lease.Claim{Name: k.ID, Owner: d.opts.Name, Token: r.token, Expires: k.Claim.Expires})
	// A quick worker may have ended its run already (LeaseLost): then
	// there is no process to record.
	if _, err := d.svc.Spawned(ctx, k.ID, r.token, d.opts.Host, w.PID(), w.ProcStart()); err != nil && !errs.Is(err, errs.LeaseLost) {
		d.log.Warn("recording a kanban worker's process failed", "card", k.ID, "err", err)
	}
	d.workers.Add(1)
	go d.watch(r, cfg)
	return true
}

// watch waits for r's worker to end and records how, when the worker
// did not say itself (complete, block).
func (d *Dispatcher) watch(r *running, cfg LaneConfig) {
	defer d.workers.Done()
	<-r.worker.Done()
	e := r.worker.Exit()
	// final is the card as this worker's end left it, as read or
	// written below: a done card's workspace is settled.
	var final Card
	var end Ending
	defer func() {
		if end.Outcome != "" {
			r.span.SetAttributes(attribute.String("herald.kanban.outcome", string(end.Outcome)))
		}
		tracing.EndWith(r.span, end.Outcome == OutcomeCrashed || end.Outcome == OutcomeTimedOut, string(end.Outcome))
		if err := d.svc.settleWorkspace(context.Background(), final, r.ws); err != nil {
			d.log.Warn("settling a done kanban card's workspace failed; it is kept", "card", r.card, "dir", r.ws.dir, "err", err)
		}
		// The card may have a worker after this one here already (its
		// reviewer, claimed while this one was exiting): that one's
		// entry and claim stay.
		if c, ok := d.renewer.Current(r.card); ok && c.Token == r.token {
			d.renewer.Drop(r.card)
		}
		d.mu.Lock()
		if d.running[r.card] == r {
			delete(d.running, r.card)
		}
		d.mu.Unlock()
		if d.opts.Ended != nil {
			d.opts.Ended(r.card, e)
		}
		d.poke() // a place is free
	}()
	ctx := context.Background()
	k, err := d.svc.Store.Card(ctx, r.card)
	if err != nil || k.Claim == nil || k.Claim.Token != r.token {
		// It reported (complete, block), or its claim went elsewhere.
		final = k
		d.succeeded(ctx, r.lane)
		return
	}
	req := r.askedStop()
	if req == nil {
		// It ended by itself while a stop was asked.
		req = k.Claim.Stop
	}
	if req != nil {
		// A person's stop or reclaim: the lane is not blamed.
		if final, err = d.svc.endStopped(ctx, r.card, r.token, *req); err != nil && !errs.Is(err, errs.LeaseLost) {
			d.log.Warn("ending the claim of a kanban card whose worker was stopped on request failed", "card", r.card, "err", err)
		}
		return
	}
	switch stopped := r.why(); {
	case stopped == stopShutdown:
		end = Ending{Outcome: OutcomeReclaimed, Reason: stopped, Uncounted: true}
	case stopped != "":
		end = Ending{Outcome: OutcomeTimedOut, Reason: stopped}
	case e.Code == ExitRateLimited:
		delay, said := e.RetryAfter, "the worker exited 75: rate limited"
		if delay > 0 {
			said += ", until " + d.clk.Now().Add(delay).UTC().Format(time.RFC3339)
		} else {
			delay = d.opts.RateLimitWait
		}
		end = Ending{Outcome: OutcomeLimited, Reason: said, RetryAfter: delay}
		d.pause(ctx, r.lane, delay, said)
	case e.Code == 0 && cfg.ExitZeroCompletes:
		if final, err = d.svc.Complete(ctx, r.card, r.token, Result{Summary: cmp.Or(tail(e.Output, 4000), "exited 0")}, d.opts.Name); err != nil {
			d.log.Warn("completing a kanban card on its worker's exit 0 failed", "card", r.card, "err", err)
		}
		d.succeeded(ctx, r.lane)
		return
	case e.Code == 0:
		end = Ending{Outcome: OutcomeCrashed, Reason: cmp.Or(e.Violation, "protocol violation: the worker exited 0 without a complete or block call")}
		d.failed(ctx, r.lane)
	default:
		end = Ending{Outcome: OutcomeCrashed, Reason: exitReason(e)}
		d.failed(ctx, r.lane)
	}
	if _, err := d.svc.Release(ctx, r.card, r.token, end); err != nil && !errs.Is(err, errs.LeaseLost) {
		d.log.Warn("recording a kanban worker's end failed", "card", r.card, "err", err)
	}
}

// Heartbeat renews the claims of the workers running here (one
// lease.Renewer holds them all), and stops those past their card's max
// runtime or whose claim was lost. The loop calls it every third of the
// claim TTL.
func (d *Dispatcher) Heartbeat(ctx context.Context) {
	d.mu.Lock()
	rs := make([]*running, 0, len(d.running))
	for _, r := range d.running {
		rs = append(rs, r)
	}
	d.mu.Unlock()
	now := d.clk.Now()
	for _, r := range rs {
		// Its claim is still renewed until it is gone: never two workers.
		if r.max > 0 && now.Sub(r.started) >= r.max && r.stop("ran past its max runtime of "+r.max.String()) {
			go func() { _ = r.worker.Stop(context.WithoutCancel(ctx)) }()
		}
	}
	if err := d.renewer.RenewNow(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("renewing the kanban workers' claims failed", "err", err)
	}
}

// renewClaims is the renewer's RenewFunc: a heartbeat of each card. A
// card whose heartbeat fails other than by LeaseLost stays held: its
// claim may outlast the store's trouble.
func (d *Dispatcher) renewClaims(ctx context.Context, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	kept := make([]lease.Claim, 0, len(claims))
	for _, c := range claims {
		k, err := d.svc.Heartbeat(ctx, c.Name, c.Token, ttl, "")
		switch {
		case err == nil && k.Claim != nil:
			c.Expires = k.Claim.Expires
			if k.Claim.Stop != nil {
				// A person asked, and its signal did not come.
				d.stopAsked(c.Name, c.Token, *k.Claim.Stop)
			}
		case errs.Is(err, errs.LeaseLost):
			continue
		case err != nil && !errors.Is(err, context.Canceled):
			d.log.Warn("renewing a kanban worker's claim failed", "card", c.Name, "err", err)
		}
		kept = append(kept, c)
	}
	return kept, nil
}

// lostClaim stops the worker of a claim that was released or taken:
// the worker is not the card's any more.
func (d *Dispatcher) lostClaim(c lease.Claim) {
	d.mu.Lock()
	r := d.running[c.Name]
	d.mu.Unlock()
	if r != nil && r.token == c.Token && r.stop("its claim was released") {
		go func() { _ = r.worker.Stop(context.Background()) }()
	}
}

// failed counts a lane's failure, in the store: breakerFailures in a
// row, on any instances, pause it there.
func (d *Dispatcher) failed(ctx context.Context, lane string) {
	tripped, err := d.svc.laneFailed(ctx, lane)
	switch {
	case err != nil:
		d.log.Warn("counting a kanban lane's failure failed", "lane", lane, "err", err)
	case tripped:
		d.log.Warn("a kanban lane failed too often in a row; it is paused", "lane", lane, "failures", breakerFailures, "for", breakerPause.String())
	}
}

func (d *Dispatcher) succeeded(ctx context.Context, lane string) {
	if err := d.svc.laneSucceeded(ctx, lane); err != nil {
		d.log.Warn("starting a kanban lane's count of failures again failed", "lane", lane, "err", err)
	}
}

// pause holds lane back for dur on every instance, or longer when an
// earlier pause (a breaker's, a spent quota's) lasts longer.
func (d *Dispatcher) pause(ctx context.Context, lane string, dur time.Duration, reason string) {
	if err := d.svc.PauseLane(ctx, lane, dur, reason); err != nil {
		d.log.Warn("pausing a rate-limited kanban lane failed", "lane", lane, "err", err)
	}
}

// exitReason says how a worker that failed exited.
func exitReason(e Exit) string {
	why := "the worker was killed"
	if e.Code >= 0 {
		why = "the worker exited with code " + strconv.Itoa(e.Code)
	}
	if t := tail(e.Err, 800); t != "" {
		why += ": " + t
	}
	return why
}
