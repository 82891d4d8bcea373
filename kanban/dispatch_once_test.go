package kanban_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/kanban"
)

// onceDispatch is one dispatch of h's service over lane, as the CLI
// runs it.
func (h *harness) onceDispatch(lane kanban.Lane) *kanban.OnceDispatch {
	h.t.Helper()
	o, err := kanban.NewOnceDispatch(kanban.DispatcherOptions{
		Service: h.svc, Lanes: map[string]kanban.LaneConfig{"herald": {Lane: lane}}, Name: "cli", Host: "test-host",
		ClaimTTL: time.Minute, Clock: h.clk,
	}, "the dispatch was interrupted")
	if err != nil {
		h.t.Fatal(err)
	}
	return o
}

// One dispatch waits for the workers it started and says how each left
// its card.
func TestOnceDispatchWaitsForItsWorkers(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		done := h.create(kanban.CreateSpec{Title: "complete it", Assignee: "herald"})
		blocked := h.create(kanban.CreateSpec{Title: "block it", Assignee: "herald"})
		o := h.onceDispatch(newScriptedLane(h.svc))
		rep, err := o.Tick(h.ctx)
		if err != nil || len(rep.Claimed) != 2 {
			t.Fatalf("Tick = %+v, %v; want both cards claimed", rep, err)
		}
		ended, interrupted := o.Wait(h.ctx, rep.Claimed)
		if interrupted || o.Running() != 0 {
			t.Errorf("Wait: interrupted %v, %d running; want every worker ended", interrupted, o.Running())
		}
		if ended[done.ID] != kanban.StatusDone || ended[blocked.ID] != kanban.StatusBlocked || len(ended) != 2 {
			t.Errorf("ended = %v, want %s done and %s blocked", ended, done.ID, blocked.ID)
		}
	})
}

// An interrupted dispatch releases its workers' claims, uncounted, and
// stops them before it returns: the card is ready for another
// dispatcher, with no failure counted.
func TestOnceDispatchInterruptedReleasesItsWorkers(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald"})
		lane := newScriptedLane(h.svc)
		o := h.onceDispatch(lane)
		rep, err := o.Tick(h.ctx)
		if err != nil || len(rep.Claimed) != 1 || o.Running() != 1 {
			t.Fatalf("Tick = %+v, %v, %d running; want the card's worker running", rep, err, o.Running())
		}
		ctx, cancel := context.WithCancel(h.ctx)
		cancel()
		ended, interrupted := o.Wait(ctx, rep.Claimed)
		if !interrupted || o.Running() != 0 {
			t.Errorf("Wait: interrupted %v, %d running; want the worker stopped", interrupted, o.Running())
		}
		if ended[k.ID] != kanban.StatusReady {
			t.Errorf("ended = %v, want %s ready again", ended, k.ID)
		}
		got := h.wantStatus(k.ID, kanban.StatusReady)
		if got.Failures != 0 || got.Claim != nil {
			t.Errorf("released card = %+v, want no claim and no failure counted", got)
		}
		runs := mustRuns(t, h, k.ID)
		if last := runs[len(runs)-1]; last.Outcome != kanban.OutcomeReclaimed || last.Error != "the dispatch was interrupted" {
			t.Errorf("the run = %+v, want reclaimed, saying why", last)
		}
		lane.mu.Lock()
		live := lane.live[k.ID]
		lane.mu.Unlock()
		if live != 0 {
			t.Errorf("the worker runs on")
		}
	})
}
