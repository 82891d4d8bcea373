package kanban_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/signals"
)

// scriptedLane starts in-process workers that do what their card's
// title says: "complete", "block", "exit N", "hang".
type scriptedLane struct {
	svc *kanban.Service

	mu      sync.Mutex
	started map[string]int // card → workers started
	live    map[string]int // card → workers running now
	overlap bool           // two workers ran one card at once
}

func newScriptedLane(svc *kanban.Service) *scriptedLane {
	return &scriptedLane{svc: svc, started: map[string]int{}, live: map[string]int{}}
}

func (l *scriptedLane) Start(_ context.Context, spec kanban.WorkerSpec) (kanban.Worker, error) {
	if strings.HasPrefix(spec.Card.Title, "unstartable") {
		return nil, fmt.Errorf("no such command")
	}
	l.mu.Lock()
	l.started[spec.Card.ID]++
	l.live[spec.Card.ID]++
	if l.live[spec.Card.ID] > 1 {
		l.overlap = true
	}
	l.mu.Unlock()
	w := &scriptedWorker{done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer func() {
			l.mu.Lock()
			l.live[spec.Card.ID]--
			l.mu.Unlock()
			close(w.done)
		}()
		ctx := context.Background()
		verb, arg, _ := strings.Cut(spec.Card.Title, " ")
		switch verb {
		case "complete":
			_, err := l.svc.Complete(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "did " + arg}, "worker")
			w.exit = kanban.Exit{Code: 0}
			if err != nil {
				w.exit = kanban.Exit{Code: 1, Err: err.Error()}
			}
		case "block":
			_, _ = l.svc.Block(ctx, spec.Card.ID, spec.Token, kanban.BlockNeedsInput, "needs "+arg, "worker")
		case "exit":
			// "exit N [DURATION]": the code, and how long a rate limit lasts.
			codeText, afterText, _ := strings.Cut(arg, " ")
			code, _ := strconv.Atoi(codeText)
			after, _ := time.ParseDuration(afterText)
			w.exit = kanban.Exit{Code: code, Err: "boom on stderr", Output: "last words", RetryAfter: after}
		case "hang":
			<-w.stop
			w.exit = kanban.Exit{Code: -1}
		}
	}()
	return w, nil
}

func (l *scriptedLane) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started[id]
}

type scriptedWorker struct {
	done, stop chan struct{}
	once       sync.Once
	exit       kanban.Exit
}

func (w *scriptedWorker) Done() <-chan struct{} { return w.done }
func (w *scriptedWorker) Exit() kanban.Exit     { return w.exit }
func (w *scriptedWorker) PID() int              { return 0 }
func (w *scriptedWorker) ProcStart() string     { return "" }
func (w *scriptedWorker) Stop(ctx context.Context) error {
	w.once.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatcher is a dispatcher of h's service named name, its ends told
// on ended.
func (h *harness) dispatcher(name string, svc *kanban.Service, lanes map[string]kanban.LaneConfig, edit func(*kanban.DispatcherOptions)) (*kanban.Dispatcher, chan string) {
	h.t.Helper()
	ended := make(chan string, 1000)
	opts := kanban.DispatcherOptions{
		Service: svc, Lanes: lanes, Name: name, Host: "test-host",
		ClaimTTL: time.Minute, MaxSpawn: 8,
		Ended: func(card string, _ kanban.Exit) { ended <- card },
		Clock: h.clk,
	}
	if edit != nil {
		edit(&opts)
	}
	d, err := kanban.NewDispatcher(opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	return d, ended
}

func (h *harness) tick(d *kanban.Dispatcher) kanban.TickReport {
	h.t.Helper()
	rep, err := d.Tick(h.ctx, false)
	if err != nil {
		h.t.Fatalf("Tick: %v", err)
	}
	return rep
}

// waitEnded waits until n workers' ends were recorded.
func waitEnded(t *testing.T, ended chan string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case id := <-ended:
			got = append(got, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d workers' ends were recorded", len(got), n)
		}
	}
	return got
}

func TestDispatcherMapsHowWorkersEnd(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		// A lane each, so that no lane's breaker or rate-limit pause
		// holds another's card.
		lanes := map[string]kanban.LaneConfig{"lenient": {Lane: lane, ExitZeroCompletes: true}}
		for _, name := range []string{"herald", "silent", "quota", "crashy", "broken"} {
			lanes[name] = kanban.LaneConfig{Lane: lane}
		}
		d, ended := h.dispatcher("gw-a", h.svc, lanes, nil)
		ok := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "herald"})
		blocked := h.create(kanban.CreateSpec{Title: "block a key", Assignee: "herald"})
		silent := h.create(kanban.CreateSpec{Title: "exit 0", Assignee: "silent"})
		lenient := h.create(kanban.CreateSpec{Title: "exit 0", Assignee: "lenient"})
		limited := h.create(kanban.CreateSpec{Title: "exit 75", Assignee: "quota"})
		crashed := h.create(kanban.CreateSpec{Title: "exit 2", Assignee: "crashy"})
		unstartable := h.create(kanban.CreateSpec{Title: "unstartable", Assignee: "broken"})
		rep := h.tick(d)
		if len(rep.Claimed) != 6 || len(rep.Released) != 1 {
			t.Fatalf("tick = %+v, want 6 started and the unstartable one released", rep)
		}
		waitEnded(t, ended, 6)
		h.wantStatus(ok.ID, kanban.StatusDone)
		h.wantStatus(blocked.ID, kanban.StatusBlocked)
		if k := h.wantStatus(silent.ID, kanban.StatusReady); k.Failures != 1 || !strings.Contains(k.LastError, "protocol violation") {
			t.Errorf("a silent exit 0 = %+v, want a failure named a protocol violation", k)
		}
		if k := h.wantStatus(lenient.ID, kanban.StatusDone); k.Result == nil || k.Result.Summary != "last words" {
			t.Errorf("exit_zero_completes: %+v, want done with the last output", k)
		}
		if k := h.wantStatus(limited.ID, kanban.StatusReady); k.Failures != 0 || !k.RetryAt.After(t0) {
			t.Errorf("exit 75 = %+v, want ready later with no failure", k)
		}
		if k := h.wantStatus(crashed.ID, kanban.StatusReady); k.Failures != 1 || !strings.Contains(k.LastError, "code 2: boom on stderr") {
			t.Errorf("exit 2 = %+v, want a failure with the stderr tail", k)
		}
		if k := h.wantStatus(unstartable.ID, kanban.StatusReady); k.Failures != 1 || !strings.Contains(k.LastError, "could not start") {
			t.Errorf("a worker that never started = %+v, want a failure counted", k)
		}
		for _, r := range mustRuns(t, h, crashed.ID) {
			if r.Outcome != kanban.OutcomeCrashed || r.Ended.IsZero() {
				t.Errorf("run of the crashed card = %+v", r)
			}
		}
	})
}

func mustRuns(t *testing.T, h *harness, id string) []kanban.Run {
	t.Helper()
	rs, err := h.svc.Store.Runs(h.ctx, id)
	if err != nil || len(rs) == 0 {
		t.Fatalf("Runs(%s) = %v, %v", id, rs, err)
	}
	return rs
}

func TestDispatcherCapsAndDryRun(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, _ := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{
			"herald": {Lane: lane}, "slow": {Lane: lane, MaxConcurrent: 1},
		}, func(o *kanban.DispatcherOptions) { o.MaxSpawn = 3 })
		var ids []string
		for i := range 3 {
			ids = append(ids, h.create(kanban.CreateSpec{Title: "hang", Assignee: "slow", Priority: 10 - i}).ID)
		}
		for range 3 {
			h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald"})
		}
		unassigned := h.create(kanban.CreateSpec{Title: "hang"})
		nowhere := h.create(kanban.CreateSpec{Title: "hang", Assignee: "gpu"})
		dry, err := d.Tick(h.ctx, true)
		if err != nil || len(dry.Claimed) != 3 {
			t.Fatalf("dry run = %+v, %v; want 3 it would claim", dry, err)
		}
		if n := len(mustCards(t, h, kanban.StatusRunning)); n != 0 {
			t.Fatalf("a dry run claimed %d cards", n)
		}
		rep := h.tick(d)
		if len(rep.Claimed) != 3 || rep.Claimed[0] != ids[0] {
			t.Fatalf("claimed %v, want the slow lane's first by priority, then two of herald's", rep.Claimed)
		}
		if rep.Skipped[ids[1]] != "lane_cap" || rep.Skipped[unassigned.ID] != kanban.EventSkippedUnassigned || rep.Skipped[nowhere.ID] != kanban.EventSkippedNonspawnable {
			t.Errorf("skipped = %v", rep.Skipped)
		}
		// Said once, not at every tick.
		h.tick(d)
		if kinds := h.kinds(unassigned.ID); strings.Count(strings.Join(kinds, " "), kanban.EventSkippedUnassigned) != 1 {
			t.Errorf("events of the unassigned card = %v, want skipped_unassigned once", kinds)
		}
		// Stranded after 30 minutes, with the reason.
		h.clk.Advance(31 * time.Minute)
		d.Heartbeat(h.ctx)
		h.tick(d)
		evs, _ := h.svc.Store.Events(h.ctx, kanban.EventQuery{Board: kanban.DefaultBoard, Card: nowhere.ID})
		if last := evs[len(evs)-1]; last.Kind != kanban.EventStranded || last.Text != kanban.EventSkippedNonspawnable || last.Data["level"] != "warning" {
			t.Errorf("last event of the card no lane runs = %+v, want stranded_in_ready naming why", last)
		}
	})
}

func mustCards(t *testing.T, h *harness, st kanban.Status) []kanban.Card {
	t.Helper()
	cs, err := h.svc.Store.Cards(h.ctx, kanban.Query{Board: kanban.DefaultBoard, Statuses: []kanban.Status{st}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestDispatcherRenewsLiveWorkersAndReclaimsDeadOnes(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		lanes := map[string]kanban.LaneConfig{"herald": {Lane: lane}}
		a, endedA := h.dispatcher("gw-a", h.svc, lanes, nil)
		live := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald"})
		h.tick(a)
		// The worker lives past the claim's TTL: a's heartbeats renew it,
		// and another dispatcher leaves it alone.
		other := &kanban.Service{Store: h.open(), Root: h.svc.Root}
		b, _ := h.dispatcher("gw-b", other, lanes, nil)
		for range 4 {
			h.clk.Advance(30 * time.Second)
			a.Heartbeat(h.ctx)
			h.tick(b)
		}
		if k := h.wantStatus(live.ID, kanban.StatusRunning); k.Claim.Owner != "gw-a" || lane.count(live.ID) != 1 {
			t.Fatalf("a live, renewed worker's card = %+v", k)
		}
		// a dies (its heartbeats stop); once the claim runs out b takes
		// the card back and runs it again: one failure counted.
		h.clk.Advance(61 * time.Second)
		rep := h.tick(b)
		if len(rep.Reclaimed) != 1 || len(rep.Claimed) != 1 {
			t.Fatalf("b's tick = %+v, want the card reclaimed and claimed again", rep)
		}
		k := h.wantStatus(live.ID, kanban.StatusRunning)
		if k.Claim.Owner != "gw-b" || k.Failures != 1 {
			t.Errorf("after the reclaim = %+v", k)
		}
		// a, back from its stall, learns its claim is gone and stops its
		// worker.
		a.Heartbeat(h.ctx)
		waitEnded(t, endedA, 1)
		if runs := mustRuns(t, h, live.ID); len(runs) != 2 || runs[0].Outcome != kanban.OutcomeReclaimed {
			t.Errorf("runs = %+v, want the first reclaimed", runs)
		}
	})
}

func TestDispatcherStopsWorkersPastMaxRuntime(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, nil)
		k := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald", MaxRuntime: 10 * time.Minute})
		h.tick(d)
		h.clk.Advance(10 * time.Minute)
		d.Heartbeat(h.ctx)
		waitEnded(t, ended, 1)
		if got := h.wantStatus(k.ID, kanban.StatusReady); got.Failures != 1 || !strings.Contains(got.LastError, "max runtime") {
			t.Errorf("card past its max runtime = %+v", got)
		}
		if runs := mustRuns(t, h, k.ID); runs[0].Outcome != kanban.OutcomeTimedOut {
			t.Errorf("run = %+v, want timed_out", runs[0])
		}
	})
}

// Three dispatchers on one store, each card run once, none left behind.
func TestThreeDispatchersRunEachCardOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		const cards = 200
		var lanes []*scriptedLane
		var ds []*kanban.Dispatcher
		var endeds []chan string
		for i := range 3 {
			svc := &kanban.Service{Store: h.open(), Root: h.svc.Root}
			lane := newScriptedLane(svc)
			d, ended := h.dispatcher(fmt.Sprint("gw-", i), svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, func(o *kanban.DispatcherOptions) { o.MaxSpawn = 50 })
			lanes, ds, endeds = append(lanes, lane), append(ds, d), append(endeds, ended)
		}
		for i := range cards {
			h.create(kanban.CreateSpec{Title: fmt.Sprint("complete ", i), Assignee: "herald"})
		}
		for len(mustCards(t, h, kanban.StatusDone)) < cards {
			var wg sync.WaitGroup
			for _, d := range ds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := d.Tick(h.ctx, false); err != nil && !errs.Is(err, errs.Conflict) {
						t.Errorf("Tick: %v", err)
					}
				}()
			}
			wg.Wait()
			// Each dispatcher's workers end before the next round.
			for i, l := range lanes {
				l.mu.Lock()
				n := 0
				for _, c := range l.started {
					n += c
				}
				l.mu.Unlock()
				for len(endeds[i]) < n {
					waitEnded(t, endeds[i], 1)
					n--
				}
			}
			if t.Failed() {
				return
			}
		}
		total := map[string]int{}
		for _, l := range lanes {
			if l.overlap {
				t.Errorf("two workers ran one card at once")
			}
			for id, n := range l.started {
				total[id] += n
			}
		}
		if len(total) != cards {
			t.Errorf("%d cards run, want %d", len(total), cards)
		}
		for id, n := range total {
			if n != 1 {
				t.Errorf("card %s run %d times", id, n)
			}
		}
		if n := len(mustCards(t, h, kanban.StatusReady)); n != 0 {
			t.Errorf("%d cards left ready", n)
		}
	})
}

// Three failures in a row pause a lane; the others go on.
func TestDispatcherBreakerPausesABrokenLane(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"broken": {Lane: lane}, "good": {Lane: lane}}, nil)
		var cards []string
		for range 4 {
			cards = append(cards, h.create(kanban.CreateSpec{Title: "exit 1", Assignee: "broken", MaxRetries: 10}).ID)
		}
		for range 3 {
			rep := h.tick(d)
			waitEnded(t, ended, len(rep.Claimed))
		}
		good := h.create(kanban.CreateSpec{Title: "complete", Assignee: "good"})
		rep := h.tick(d)
		if len(rep.Claimed) != 1 || rep.Claimed[0] != good.ID {
			t.Fatalf("after the breaker tripped, claimed %v, want only the good lane's card", rep.Claimed)
		}
		for _, id := range cards {
			if rep.Skipped[id] != "lane_paused" {
				t.Errorf("card %s of the broken lane: %q, want lane_paused", id, rep.Skipped[id])
			}
		}
		waitEnded(t, ended, 1)
		h.clk.Advance(31 * time.Minute)
		if rep := h.tick(d); len(rep.Claimed) == 0 {
			t.Errorf("the lane's pause did not end: %+v", rep)
		}
	})
}

// A rate-limited worker that says how long its limit lasts holds its
// card and its lane back that long, with no failure counted.
func TestDispatcherWaitsOutAReportedRateLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"quota": {Lane: lane}}, nil)
		limited := h.create(kanban.CreateSpec{Title: "exit 75 10m", Assignee: "quota"})
		h.tick(d)
		waitEnded(t, ended, 1)
		k := h.wantStatus(limited.ID, kanban.StatusReady)
		if k.Failures != 0 || !k.RetryAt.Equal(t0.Add(10*time.Minute)) {
			t.Fatalf("card = %+v, want ready at %s with no failure", k, t0.Add(10*time.Minute))
		}
		// Claimed first after the limit: the limited card's worker, run
		// again, pauses the lane as soon as it exits.
		other := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "quota", Priority: 1})
		h.clk.Advance(5 * time.Minute)
		rep := h.tick(d)
		if len(rep.Claimed) != 0 || rep.Skipped[other.ID] != "lane_paused" {
			t.Fatalf("5 minutes in: %+v, want the lane paused", rep)
		}
		h.clk.Advance(6 * time.Minute)
		if rep := h.tick(d); len(rep.Claimed) != 2 {
			t.Fatalf("after the limit: %+v, want both claimed", rep)
		}
	})
}

// A worker that hands its card to review and takes a while to exit
// keeps the card from its reviewer here until it has: never two
// workers on one card, and the reviewer's claim is not dropped when the
// first one's end is recorded.
func TestReviewWaitsForTheLastWorkerToExit(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		exit := make(chan struct{})
		var mu sync.Mutex
		live, most := 0, 0
		lane := kanban.FuncLane{Run: func(ctx context.Context, spec kanban.WorkerSpec) error {
			mu.Lock()
			live++
			most = max(most, live)
			mu.Unlock()
			defer func() { mu.Lock(); live--; mu.Unlock() }()
			if spec.Review {
				_, err := h.svc.Complete(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "approved"}, "reviewer")
				return err
			}
			if _, err := h.svc.RequestReview(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "ready for review"}, "worker"); err != nil {
				return err
			}
			<-exit
			return nil
		}}
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, func(o *kanban.DispatcherOptions) { o.ReviewDispatch = true })
		k := h.create(kanban.CreateSpec{Title: "x", Assignee: "herald"})
		h.tick(d)
		testkit.Eventually(t, "the card in review", func() bool { return h.card(k.ID).Status == kanban.StatusReview })
		if rep := h.tick(d); len(rep.Claimed) != 0 || rep.Skipped[k.ID] == "" {
			t.Fatalf("tick while the worker exits = %+v, want the review held back", rep)
		}
		close(exit)
		waitEnded(t, ended, 1)
		if rep := h.tick(d); len(rep.Claimed) != 1 {
			t.Fatalf("tick after it exited = %+v, want the review claimed", rep)
		}
		waitEnded(t, ended, 1)
		h.wantStatus(k.ID, kanban.StatusDone)
		mu.Lock()
		defer mu.Unlock()
		if most != 1 {
			t.Errorf("%d workers ran on the card at once", most)
		}
	})
}

// signalLog records the signals a dispatcher writes.
type signalLog struct {
	mu  sync.Mutex
	got []signals.Signal
}

func (l *signalLog) Signal(_ context.Context, s signals.Signal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
	return nil
}

func (l *signalLog) SignalsAfter(context.Context, string, int) ([]signals.Signal, string, error) {
	return nil, "", nil
}

func (l *signalLog) signals() []signals.Signal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// A card made ready here is told to the other instances once, however
// many wakes came before the loop ran, named as this instance's (so it
// does not wake on its own). That another instance's signal makes a
// dispatcher look is proven across processes in e2e.
func TestDispatcherTellsTheOtherInstances(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		log := &signalLog{}
		lane := newScriptedLane(h.svc)
		d, _ := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, func(o *kanban.DispatcherOptions) {
			o.Signals, o.Interval = log, time.Hour
		})
		h.svc.Ready = d.Wake
		d.Wake()
		d.Wake()
		if err := d.Start(h.ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "one signal", func() bool { return len(log.signals()) == 1 })
		if s := log.signals()[0]; s.Kind != kanban.SignalReady || s.Text != "gw-a" {
			t.Errorf("signal %+v, want kanban.ready from gw-a", s)
		}
	})
}
