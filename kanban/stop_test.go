package kanban_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/sessions"
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
		eventually(t, func() bool { return h.card(k.ID).Claim != nil && h.card(k.ID).Claim.Spawned })
		_, err := h.svc.RequestStop(h.ctx, idle.ID, "", "ann")
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "triage, not running") {
			t.Errorf("RequestStop of a card in triage: %v, want Invalid", err)
		}
		marked, err := h.svc.RequestStop(h.ctx, k.ID, "wrong approach", "ann")
		if err != nil || marked.Status != kanban.StatusRunning || marked.Claim.Stop == nil || marked.Claim.Stop.Reason != "wrong approach" {
			t.Fatalf("RequestStop = %+v, %v; want it running, marked", marked, err)
		}
		d.HandleSignal(sessions.Signal{Kind: kanban.SignalStop, Target: k.ID, Text: "cli"})
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
