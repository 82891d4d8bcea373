package kanban_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/kanban"
)

// failingCheck makes every completion check of svc fail, and counts
// them: the workers of several cards check at once.
func failingCheck(svc *kanban.Service, pass *bool) *atomic.Int64 {
	n := new(atomic.Int64)
	svc.Check = func(_ context.Context, k kanban.Card, _ string) (string, bool, error) {
		n.Add(1)
		return "FAIL: " + k.CompletionCheck, pass != nil && *pass, nil
	}
	return n
}

// A card whose completion check always fails is run up to its failure
// limit, each run check_failed, then blocked with gave_up: never run
// again by itself.
func TestAFailingCheckEndsAtTheFailureLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		checks := failingCheck(h.svc, nil)
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, nil)
		own := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "herald", CompletionCheck: "make test", MaxRetries: 3})
		byDefault := h.create(kanban.CreateSpec{Title: "complete that", Assignee: "herald", CompletionCheck: "make lint"})
		for range 6 {
			rep := h.tick(d)
			waitEnded(t, ended, len(rep.Claimed))
			h.clk.Advance(time.Minute)
		}
		if n := lane.count(own.ID); n != 3 {
			t.Errorf("the card with max_retries 3 ran %d times, want 3", n)
		}
		if n := lane.count(byDefault.ID); n != kanban.DefaultFailureLimit {
			t.Errorf("the card with the default limit ran %d times, want %d", n, kanban.DefaultFailureLimit)
		}
		if n := checks.Load(); n != 3+kanban.DefaultFailureLimit {
			t.Errorf("%d checks ran, want one a run", n)
		}
		k := h.wantStatus(own.ID, kanban.StatusBlocked)
		if k.Failures != 3 || !strings.Contains(k.BlockReason, "completion check failed") {
			t.Errorf("given up card = %+v, want 3 failures and the check named", k)
		}
		if kinds := h.kinds(own.ID); kinds[len(kinds)-1] != kanban.EventGaveUp {
			t.Errorf("events = %v, want gave_up last", kinds)
		}
		runs := mustRuns(t, h, own.ID)
		want := []kanban.Outcome{kanban.OutcomeCheckFailed, kanban.OutcomeCheckFailed, kanban.OutcomeGaveUp}
		for i, r := range runs {
			if i >= len(want) || r.Outcome != want[i] || r.Ended.IsZero() {
				t.Errorf("run %d = %+v, want %v", i, r, want)
			}
		}
		if !strings.HasPrefix(runs[2].Error, string(kanban.OutcomeCheckFailed)) {
			t.Errorf("the last run's error = %q, want it to say the check failed", runs[2].Error)
		}
		h.wantStatus(byDefault.ID, kanban.StatusBlocked)
	})
}

// A card that asks for review runs its completion check when its
// worker completes, and again before an approval makes it done.
func TestAReviewCardRunsItsCheck(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		pass := false
		checks := failingCheck(h.svc, &pass)
		k := h.create(kanban.CreateSpec{Title: "feature", Review: true, CompletionCheck: "make test", MaxRetries: 5})
		r := h.claim(k.ID)
		got, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "did it"}, "w")
		if err != nil || got.Status != kanban.StatusReady || got.Failures != 1 {
			t.Fatalf("a worker's complete with a failing check = %+v, %v; want ready with a failure", got, err)
		}
		if runs := mustRuns(t, h, k.ID); runs[0].Outcome != kanban.OutcomeCheckFailed {
			t.Errorf("run = %+v, want check_failed", runs[0])
		}
		pass = true
		r = h.claim(k.ID)
		if got, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "fixed"}, "w"); err != nil || got.Status != kanban.StatusReview {
			t.Fatalf("complete with a passing check = %+v, %v; want review", got, err)
		}
		// The tree moved on while it waited: a person's approval runs the
		// check again, and it fails.
		pass = false
		if got, err := h.svc.Approve(h.ctx, k.ID, 0, "ship it", "ann"); err != nil || got.Status != kanban.StatusReady || got.Failures != 2 {
			t.Fatalf("approval with a failing check = %+v, %v; want ready with a failure", got, err)
		}
		// A reviewer's complete (its approval) runs it too.
		pass = true
		r = h.claim(k.ID)
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "again"}, "w"); err != nil {
			t.Fatal(err)
		}
		pass = false
		rv, err := h.svc.Claim(h.ctx, k.ID, kanban.ClaimSpec{Owner: "gw-b", Lane: "reviewer", TTL: time.Minute, Review: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := h.svc.Complete(h.ctx, k.ID, rv.Claim.Token, kanban.Result{Summary: "looks right"}, "reviewer"); err != nil || got.Status != kanban.StatusReady {
			t.Fatalf("a reviewer's approval with a failing check = %+v, %v; want ready", got, err)
		}
		pass = true
		r = h.claim(k.ID)
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "again"}, "w"); err != nil {
			t.Fatal(err)
		}
		if got, err := h.svc.Approve(h.ctx, k.ID, 0, "ship it", "ann"); err != nil || got.Status != kanban.StatusDone || got.Failures != 0 {
			t.Fatalf("approval with a passing check = %+v, %v; want done", got, err)
		}
		if n := checks.Load(); n != 7 {
			t.Errorf("%d checks ran, want 7: each complete and each approval", n)
		}
	})
}

// A crashed card waits out the crash grace before it runs again.
func TestACrashedCardWaitsOutItsGrace(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.svc.CrashGrace = 30 * time.Second
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, nil)
		k := h.create(kanban.CreateSpec{Title: "exit 2", Assignee: "herald", MaxRetries: 5})
		h.tick(d)
		waitEnded(t, ended, 1)
		if got := h.wantStatus(k.ID, kanban.StatusReady); !got.RetryAt.Equal(t0.Add(30 * time.Second)) {
			t.Fatalf("crashed card = %+v, want it held until %s", got, t0.Add(30*time.Second))
		}
		h.clk.Advance(29 * time.Second)
		if rep := h.tick(d); len(rep.Claimed) != 0 || rep.Skipped[k.ID] != "retry_wait" {
			t.Fatalf("a tick within the grace = %+v, want the card waiting", rep)
		}
		h.clk.Advance(time.Second)
		if rep := h.tick(d); len(rep.Claimed) != 1 {
			t.Fatalf("a tick after the grace = %+v, want the card run again", rep)
		}
		waitEnded(t, ended, 1)
		if n := lane.count(k.ID); n != 2 {
			t.Errorf("the card ran %d times, want 2", n)
		}
	})
}

// An exit 75 that names no time holds the card and its lane back for
// the configured wait.
func TestARateLimitWithNoTimeWaitsTheConfiguredWait(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"quota": {Lane: lane}}, func(o *kanban.DispatcherOptions) {
			o.RateLimitWait = 7 * time.Minute
		})
		k := h.create(kanban.CreateSpec{Title: "exit 75", Assignee: "quota"})
		h.tick(d)
		waitEnded(t, ended, 1)
		if got := h.wantStatus(k.ID, kanban.StatusReady); got.Failures != 0 || !got.RetryAt.Equal(t0.Add(7*time.Minute)) {
			t.Fatalf("rate-limited card = %+v, want it held until %s", got, t0.Add(7*time.Minute))
		}
		other := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "quota"})
		h.clk.Advance(7*time.Minute - time.Second)
		if rep := h.tick(d); len(rep.Claimed) != 0 || rep.Skipped[other.ID] != "lane_paused" {
			t.Fatalf("a tick within the wait = %+v, want the lane paused", rep)
		}
		h.clk.Advance(time.Second)
		if rep := h.tick(d); len(rep.Claimed) != 2 {
			t.Fatalf("a tick after the wait = %+v, want both run", rep)
		}
	})
}

// A lane's breaker and rate-limit pause are the store's: another
// instance, and a dispatcher started afresh, honour them, and a dry
// run names them.
func TestALanePauseHoldsOnEveryInstance(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		lanes := map[string]kanban.LaneConfig{"broken": {Lane: lane}, "quota": {Lane: lane}}
		a, endedA := h.dispatcher("gw-a", h.svc, lanes, nil)
		for range 3 {
			h.create(kanban.CreateSpec{Title: "exit 1", Assignee: "broken", MaxRetries: 10})
		}
		rep := h.tick(a)
		waitEnded(t, endedA, len(rep.Claimed))
		limited := h.create(kanban.CreateSpec{Title: "exit 75 20m", Assignee: "quota"})
		rep = h.tick(a)
		waitEnded(t, endedA, len(rep.Claimed))
		h.wantStatus(limited.ID, kanban.StatusReady)

		// Another instance, on its own handle of the store, and one
		// started after a restart: both lanes are paused for them too.
		for _, name := range []string{"gw-b", "gw-a-restarted"} {
			svc := &kanban.Service{Store: h.open(), Root: h.svc.Root}
			d, _ := h.dispatcher(name, svc, map[string]kanban.LaneConfig{"broken": {Lane: newScriptedLane(svc)}, "quota": {Lane: newScriptedLane(svc)}}, nil)
			fresh := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "quota"})
			dry, err := d.Tick(h.ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(dry.Claimed) != 0 || dry.Skipped[fresh.ID] != "lane_paused" {
				t.Errorf("%s's dry run = %+v, want the quota lane paused", name, dry)
			}
			paused := map[string]kanban.LaneState{}
			for _, l := range dry.Paused {
				paused[l.Lane] = l
			}
			if b := paused["broken"]; !b.PausedUntil.Equal(t0.Add(30*time.Minute)) || !strings.Contains(b.Reason, "failed 3 times") {
				t.Errorf("%s: the broken lane's pause = %+v", name, b)
			}
			if q := paused["quota"]; !q.PausedUntil.Equal(t0.Add(20*time.Minute)) || !strings.Contains(q.Reason, "rate limited") {
				t.Errorf("%s: the quota lane's pause = %+v", name, q)
			}
			if rep := h.tick(d); len(rep.Claimed) != 0 {
				t.Errorf("%s claimed %v while the lanes are paused", name, rep.Claimed)
			}
			if _, err := h.svc.Archive(h.ctx, fresh.ID, "ann"); err != nil {
				t.Fatal(err)
			}
		}
		h.clk.Advance(30 * time.Minute)
		if rep := h.tick(a); len(rep.Claimed) != 4 || len(rep.Paused) != 0 {
			t.Errorf("after the pauses: %+v, want every card claimed", rep)
		}
	})
}

// process is a real process a test starts, in a process group of its
// own, as a gateway or a command lane's worker would be.
type process struct {
	cmd   *exec.Cmd
	pid   int
	start string
}

func startProcess(t *testing.T) *process {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Env = []string{} // a stand-in needs nothing of the test's environment
	proc.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, start: proc.StartTime(cmd.Process.Pid)}
	t.Cleanup(p.kill)
	return p
}

// kill ends p and reaps it: its PID names no process after.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// claimAs claims id for owner, a dispatcher in process gw on host, and
// records its worker (pid 0: in process).
func (h *harness) claimAs(id, owner, host string, gw *process, pid int, start string) kanban.Card {
	h.t.Helper()
	k, err := h.svc.Claim(h.ctx, id, kanban.ClaimSpec{Owner: owner, Lane: "herald", TTL: 15 * time.Minute, Host: host, PID: gw.pid, ProcStart: gw.start})
	if err != nil {
		h.t.Fatal(err)
	}
	if k, err = h.svc.Spawned(h.ctx, id, k.Claim.Token, host, pid, start); err != nil {
		h.t.Fatal(err)
	}
	return k
}

// A worker whose gateway died is reclaimed by the next dispatch of any
// dispatcher on its host, whatever that one is named, not once its
// claim runs out; a command worker that outlived it is left to finish,
// and reclaimed once it has. Another host's claims are its own.
func TestAWorkerWhoseGatewayDiedIsReclaimedAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-new", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, nil)
		gw := startProcess(t)
		inproc := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "herald"})
		h.claimAs(inproc.ID, "gw-old", "test-host", gw, 0, "")
		worker := startProcess(t)
		orphan := h.create(kanban.CreateSpec{Title: "complete that", Assignee: "herald"})
		h.claimAs(orphan.ID, "gw-old", "test-host", gw, worker.pid, worker.start)
		far := h.create(kanban.CreateSpec{Title: "complete there", Assignee: "herald"})
		h.claimAs(far.ID, "gw-far", "far-host", gw, 0, "")

		if rep := h.tick(d); len(rep.Reclaimed) != 0 {
			t.Fatalf("a tick while the gateway lives reclaimed %v", rep.Reclaimed)
		}
		gw.kill()
		if owner, w := kanban.ClaimGone(*h.card(inproc.ID).Claim, "test-host"); !owner || !w {
			t.Errorf("ClaimGone of an in-process worker of a dead gateway = %v, %v; want both gone", owner, w)
		}
		if owner, w := kanban.ClaimGone(*h.card(orphan.ID).Claim, "test-host"); !owner || w {
			t.Errorf("ClaimGone of a live worker of a dead gateway = %v, %v; want the owner gone, the worker not", owner, w)
		}
		if owner, w := kanban.ClaimGone(*h.card(far.ID).Claim, "test-host"); owner || w {
			t.Errorf("ClaimGone of another host's claim = %v, %v; want neither known", owner, w)
		}
		rep := h.tick(d)
		if len(rep.Reclaimed) != 1 || rep.Reclaimed[0] != inproc.ID {
			t.Fatalf("the tick after the gateway died reclaimed %v, want %s only", rep.Reclaimed, inproc.ID)
		}
		waitEnded(t, ended, len(rep.Claimed))
		h.wantStatus(inproc.ID, kanban.StatusDone)
		for _, r := range mustRuns(t, h, inproc.ID) {
			if r.Owner == "gw-old" && (r.Outcome != kanban.OutcomeCrashed || !strings.Contains(r.Error, "gw-old, pid "+strconv.Itoa(gw.pid))) {
				t.Errorf("the dead gateway's run = %+v, want crashed, naming its process", r)
			}
		}
		if k := h.wantStatus(orphan.ID, kanban.StatusRunning); k.Claim.Owner != "gw-old" {
			t.Errorf("the live orphan's card = %+v, want it left to its worker", k)
		}
		worker.kill()
		if rep := h.tick(d); len(rep.Reclaimed) != 1 || rep.Reclaimed[0] != orphan.ID {
			t.Errorf("the tick after the orphan ended reclaimed %v, want %s", rep.Reclaimed, orphan.ID)
		}
		if k := h.wantStatus(far.ID, kanban.StatusRunning); k.Claim.Owner != "gw-far" {
			t.Errorf("another host's card = %+v, want it left alone", k)
		}
	})
}

// A reclaim of a card whose worker runs in another gateway keeps the
// card from every other claim until that gateway stopped its worker,
// asked over the signal bus or, without it, at its next heartbeat: never
// two workers on one card.
func TestAReclaimNeverGivesACardTwoWorkers(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		log := &signalLog{}
		lane := newScriptedLane(h.svc)
		lanes := map[string]kanban.LaneConfig{"herald": {Lane: lane}}
		a, endedA := h.dispatcher("gw-a", h.svc, lanes, nil)
		other := &kanban.Service{Store: h.open(), Root: h.svc.Root}
		b, endedB := h.dispatcher("gw-b", other, lanes, nil)
		signalled := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald", MaxRetries: 5})
		silent := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald", MaxRetries: 5})
		if rep := h.tick(a); len(rep.Claimed) != 2 {
			t.Fatalf("a claimed %v", rep.Claimed)
		}
		for _, k := range []kanban.Card{signalled, silent} {
			spec := kanban.StopSpec{Reason: "stuck", Host: "test-host", Clock: h.clk}
			if k.ID == signalled.ID {
				spec.Signals = log
			}
			got, released, err := h.svc.Reclaim(h.ctx, k.ID, spec)
			if err != nil || released || got.Status != kanban.StatusRunning || got.Claim.Stop == nil || got.Claim.Stop.Reason != "stuck" || got.Claim.Stop.Then != kanban.StopReclaim {
				t.Fatalf("Reclaim of a worker in another live gateway = %+v, %v, %v; want it asked to stop, the card still held", got, released, err)
			}
		}
		if rep := h.tick(b); len(rep.Claimed) != 0 || len(rep.Reclaimed) != 0 {
			t.Fatalf("b's tick while the old workers run = %+v, want nothing claimed", rep)
		}
		// gw-a hears the signal and stops one; it stops the other at its
		// heartbeat.
		sigs := log.signals()
		if len(sigs) != 1 || sigs[0].Kind != kanban.SignalStop || sigs[0].Target != signalled.ID {
			t.Fatalf("signals = %+v, want one kanban.stop naming %s", sigs, signalled.ID)
		}
		a.HandleSignal(sigs[0])
		waitEnded(t, endedA, 1)
		if k := h.wantStatus(signalled.ID, kanban.StatusReady); k.Failures != 1 || k.LastError != "stuck" {
			t.Errorf("the reclaimed card = %+v, want ready with the reason", k)
		}
		h.wantStatus(silent.ID, kanban.StatusRunning)
		a.Heartbeat(h.ctx)
		waitEnded(t, endedA, 1)
		h.wantStatus(silent.ID, kanban.StatusReady)
		for _, id := range []string{signalled.ID, silent.ID} {
			if rs := mustRuns(t, h, id); rs[0].Outcome != kanban.OutcomeReclaimed {
				t.Errorf("the first run of %s = %+v, want reclaimed", id, rs[0])
			}
		}
		if rep := h.tick(b); len(rep.Claimed) != 2 {
			t.Errorf("b's tick after the old workers stopped = %+v, want both claimed", rep)
		}
		lane.mu.Lock()
		overlap := lane.overlap
		lane.mu.Unlock()
		if overlap {
			t.Errorf("two workers ran one card at once")
		}
		_ = b.Shutdown(h.ctx)
		_ = endedB
	})
}

// A reclaim on the worker's host ends its process group there, and
// releases the card once it is gone.
func TestAReclaimStopsAWorkerProcessOnItsHost(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lanes := map[string]kanban.LaneConfig{"shell": {Lane: kanban.CommandLane{Command: "sleep", Args: []string{"300"}, Clock: h.clk}}}
		a, ended := h.dispatcher("gw-a", h.svc, lanes, nil)
		k := h.create(kanban.CreateSpec{Title: "x", Assignee: "shell"})
		h.tick(a)
		c := h.wantStatus(k.ID, kanban.StatusRunning).Claim
		if c.PID == 0 || !proc.Alive(c.PID, c.ProcStart) {
			t.Fatalf("claim = %+v, want a live worker process", c)
		}
		got, released, err := h.svc.Reclaim(h.ctx, k.ID, kanban.StopSpec{Reason: "wrong branch", Host: "test-host"})
		if err != nil || !released || got.Status != kanban.StatusReady {
			t.Fatalf("Reclaim = %+v, %v, %v; want it released", got, released, err)
		}
		if proc.Alive(c.PID, c.ProcStart) {
			t.Errorf("the worker process %d still runs after the reclaim", c.PID)
		}
		waitEnded(t, ended, 1)
		if got := h.wantStatus(k.ID, kanban.StatusReady); got.Failures != 1 || got.LastError != "wrong branch" {
			t.Errorf("card = %+v, want one failure with the reason", got)
		}
	})
}
