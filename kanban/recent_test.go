package kanban_test

import (
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// TestARememberedCardIsOnlyAGuess checks that a service deciding on the
// card as it last wrote it decides on the board as it is, when another
// instance changed the card since: a card claimed there is not claimed
// again here; a claim released and taken again there is not completed
// here under the old token, nor its worker's start recorded; and a child
// made there of a card held here is promoted when the card is completed
// here.
func TestARememberedCardIsOnlyAGuess(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		other := &kanban.Service{Store: h.open(), Root: h.svc.Root}
		spec := func(owner string) kanban.ClaimSpec {
			return kanban.ClaimSpec{Owner: owner, Lane: "ops", TTL: time.Minute}
		}

		taken := h.create(kanban.CreateSpec{Title: "taken", Assignee: "ops"})
		if _, err := other.Claim(h.ctx, taken.ID, spec("gw-b")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Claim(h.ctx, taken.ID, spec("gw-a")); !errs.Is(err, errs.Conflict) {
			t.Errorf("a claim of a card claimed elsewhere = %v, want Conflict", err)
		}
		if k := h.wantStatus(taken.ID, kanban.StatusRunning); k.Claim.Owner != "gw-b" || k.Version != 2 {
			t.Errorf("the card claimed elsewhere: owner %s, version %d; want gw-b, 2", k.Claim.Owner, k.Version)
		}

		parent := h.create(kanban.CreateSpec{Title: "parent", Assignee: "ops"})
		parent, err := h.svc.Claim(h.ctx, parent.ID, spec("gw-a"))
		if err != nil {
			t.Fatal(err)
		}
		child, _, err := other.Create(h.ctx, kanban.CreateSpec{Title: "child", Parents: []string{parent.ID}})
		if err != nil || child.Status != kanban.StatusTodo {
			t.Fatalf("child: %s, %v; want todo", child.Status, err)
		}
		if _, err := h.svc.Complete(h.ctx, parent.ID, parent.Claim.Token, kanban.Result{Summary: "done"}, "gw-a"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(parent.ID, kanban.StatusDone)
		h.wantStatus(child.ID, kanban.StatusReady)

		again := h.create(kanban.CreateSpec{Title: "again", Assignee: "ops"})
		old, err := h.svc.Claim(h.ctx, again.ID, spec("gw-a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Release(h.ctx, again.ID, old.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeCrashed, Reason: "gone", Uncounted: true}); err != nil {
			t.Fatal(err)
		}
		now, err := other.Claim(h.ctx, again.ID, spec("gw-b"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Spawned(h.ctx, again.ID, old.Claim.Token, "host", 0, ""); !errs.Is(err, errs.LeaseLost) {
			t.Errorf("a start recorded under a claim taken again elsewhere = %v, want LeaseLost", err)
		}
		if _, err := h.svc.Complete(h.ctx, again.ID, old.Claim.Token, kanban.Result{Summary: "done"}, "gw-a"); !errs.Is(err, errs.LeaseLost) {
			t.Errorf("a complete under a claim taken again elsewhere = %v, want LeaseLost", err)
		}
		if k := h.wantStatus(again.ID, kanban.StatusRunning); k.Claim.Token != now.Claim.Token || k.Claim.Spawned {
			t.Errorf("the card claimed again: token %d, spawned %v; want %d, not spawned", k.Claim.Token, k.Claim.Spawned, now.Claim.Token)
		}
	})
}
