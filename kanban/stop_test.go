package kanban_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/signals"
)

// A stop request ends the running card's worker on the instance that
// runs it, told by the signal (not at its next heartbeat: the clock
// does not move), then blocks the card with the request's reason and
// person; the lane is not blamed. A card that is not running has no
// worker to stop.
func TestStopEndsTheWorkerThenBlocks(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		lane := newScriptedLane(h.svc)
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, func(o *kanban.DispatcherOptions) {
			o.Interval = time.Hour
		})
		k := h.create(kanban.CreateSpec{Title: "hang", Assignee: "herald"})
		idle := h.create(kanban.CreateSpec{Title: "later", Status: kanban.StatusTriage})
		if err := d.Start(h.ctx); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the worker spawned", func() bool { return h.card(k.ID).Claim != nil && h.card(k.ID).Claim.Spawned })
		_, err := h.svc.RequestStop(h.ctx, idle.ID, "", "ann")
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "triage, not running") {
			t.Errorf("RequestStop of a card in triage: %v, want Invalid", err)
		}
		marked, err := h.svc.RequestStop(h.ctx, k.ID, "wrong approach", "ann")
		if err != nil || marked.Status != kanban.StatusRunning || marked.Claim.Stop == nil || marked.Claim.Stop.Reason != "wrong approach" {
			t.Fatalf("RequestStop = %+v, %v; want it running, marked", marked, err)
		}
		d.HandleSignal(signals.Signal{Kind: kanban.SignalStop, Target: k.ID, Text: "cli"})
		waitEnded(t, ended, 1)
		got := h.wantStatus(k.ID, kanban.StatusBlocked)
		if got.BlockReason != "wrong approach" || got.Failures != 0 || got.Claim != nil {
			t.Errorf("stopped card = %+v, want blocked with the reason, no failure", got)
		}
		if runs := mustRuns(t, h, k.ID); len(runs) != 1 || runs[0].Outcome != kanban.OutcomeBlocked || runs[0].Error != "wrong approach" {
			t.Errorf("runs = %+v, want the one run ended blocked", runs)
		}
		kinds := h.kinds(k.ID)
		if i, j := slices.Index(kinds, kanban.EventStopAsked), slices.Index(kinds, kanban.EventBlocked); i < 0 || j < i {
			t.Errorf("events = %v, want stop_requested, then blocked", kinds)
		}
		if lane.count(k.ID) != 1 {
			t.Errorf("the card's workers = %d, want 1", lane.count(k.ID))
		}
	})
}

// A stop, as a reclaim does, ends a worker process on its own host
// there, and blocks at once a card whose gateway is gone; a worker in
// another host's live gateway is signalled for, and its card stays held,
// asked to stop, until that gateway ends it. No stop counts a failure.
func TestStopKillsHereOrKnowsTheGatewayGone(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		gw, deadGW := startProcess(t), startProcess(t)
		worker := startProcess(t)
		local := h.create(kanban.CreateSpec{Title: "here", Assignee: "herald"})
		h.claimAs(local.ID, "gw-a", "test-host", gw, worker.pid, worker.start)
		orphaned := h.create(kanban.CreateSpec{Title: "dead gateway", Assignee: "herald"})
		h.claimAs(orphaned.ID, "gw-old", "test-host", deadGW, 0, "")
		far := h.create(kanban.CreateSpec{Title: "there", Assignee: "herald"})
		h.claimAs(far.ID, "gw-far", "far-host", gw, 0, "")
		deadGW.kill()

		log := &signalLog{}
		spec := kanban.StopSpec{Reason: "wrong approach", Actor: "ann", Host: "test-host", Signals: log}
		for _, id := range []string{local.ID, orphaned.ID} {
			got, ended, err := h.svc.Stop(h.ctx, id, spec)
			if err != nil || !ended || got.Status != kanban.StatusBlocked || got.BlockReason != "wrong approach" || got.Failures != 0 {
				t.Errorf("Stop of %s = %+v, %v, %v; want it blocked at once with the reason, no failure", id, got, ended, err)
			}
			if runs := mustRuns(t, h, id); len(runs) != 1 || runs[0].Outcome != kanban.OutcomeBlocked {
				t.Errorf("runs of %s = %+v, want the one run ended blocked", id, runs)
			}
		}
		if proc.Alive(worker.pid, worker.start) {
			t.Errorf("the worker process %d on this host still runs after the stop", worker.pid)
		}
		if len(log.signals()) != 0 {
			t.Errorf("signals = %+v, want none for a worker stopped here or a dead gateway's", log.signals())
		}

		got, ended, err := h.svc.Stop(h.ctx, far.ID, spec)
		if err != nil || ended || got.Status != kanban.StatusRunning || got.Claim.Stop == nil || got.Claim.Stop.Then != kanban.StopBlock || got.Claim.Stop.By != "ann" {
			t.Fatalf("Stop of another host's worker = %+v, %v, %v; want it asked to stop, then block, the card still held", got, ended, err)
		}
		if sigs := log.signals(); len(sigs) != 1 || sigs[0].Kind != kanban.SignalStop || sigs[0].Target != far.ID {
			t.Errorf("signals = %+v, want one kanban.stop naming %s", sigs, far.ID)
		}
		if _, _, err := h.svc.Reclaim(h.ctx, far.ID, kanban.StopSpec{Reason: "other", Host: "test-host"}); err != nil {
			t.Fatal(err)
		}
		if c := h.card(far.ID).Claim; c == nil || c.Stop.Reason != "wrong approach" || c.Stop.Then != kanban.StopBlock {
			t.Errorf("claim after a second request = %+v, want the first request kept", c)
		}
	})
}

// Edit changes a card's title, body and priority, saying which; bad
// input is refused and changes nothing.
func TestEdit(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "draft", Body: "old", Priority: 1})
		title, body, prio := "  final  ", "new body", 5
		got, err := h.svc.Edit(h.ctx, k.ID, kanban.EditSpec{Title: &title, Body: &body, Priority: &prio}, "ann")
		if err != nil || got.Title != "final" || got.Body != "new body" || got.Priority != 5 || got.Version != k.Version+1 {
			t.Fatalf("Edit = %+v, %v", got, err)
		}
		if stored := h.card(k.ID); stored.Title != "final" || stored.Body != "new body" || stored.Priority != 5 {
			t.Errorf("stored = %+v", stored)
		}
		if kinds := h.kinds(k.ID); !slices.Equal(kinds, []string{kanban.EventCreated, kanban.EventEdited, kanban.EventPrioritized}) {
			t.Errorf("events = %v", kinds)
		}
		blank := " "
		for _, tt := range []struct {
			desc string
			id   string
			e    kanban.EditSpec
			code errs.Code
		}{
			{"nothing", k.ID, kanban.EditSpec{}, errs.Invalid},
			{"an empty title", k.ID, kanban.EditSpec{Title: &blank}, errs.Invalid},
			{"no card", "t_00000000", kanban.EditSpec{Body: &body}, errs.NotFound},
		} {
			if _, err := h.svc.Edit(h.ctx, tt.id, tt.e, "ann"); !errs.Is(err, tt.code) {
				t.Errorf("%s: %v, want %s", tt.desc, err, tt.code)
			}
		}
		if _, err := h.svc.Archive(h.ctx, k.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Edit(h.ctx, k.ID, kanban.EditSpec{Body: &blank}, "ann"); !errs.Is(err, errs.Invalid) {
			t.Errorf("an archived card's edit: %v, want Invalid", err)
		}
		if stored := h.card(k.ID); stored.Title != "final" || stored.Body != "new body" {
			t.Errorf("after refused edits: %+v", stored)
		}
	})
}
