package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runDispatchLimit holds a dispatch's limit (delegation.Dispatch.Limit):
// counted in the step that writes it, so dispatches arriving together
// cannot both pass it; Create refuses one that does not fit, and a
// turn's commit saves the turn with the dispatch's children ended
// rejected and their completion made.
func runDispatchLimit(t *testing.T, b Backend) {
	t.Run("create beyond the limit is refused with the room left, nothing written", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		first := newDelegation("deleg_1", "c", "one", "two")
		if err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: first, Limit: 3}); err != nil {
			t.Fatalf("Create within the limit: %v", err)
		}
		over := newDelegation("deleg_2", "c", "three", "four")
		err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: over, Limit: 3})
		wantCode(t, "Create beyond the limit", err, errs.Conflict)
		full, ok := delegation.FullOf(err)
		if !ok {
			t.Fatalf("Create beyond the limit = %v, want a *delegation.Full inside", err)
		}
		if want := (delegation.Full{Conv: "c", Running: 2, Limit: 3, Want: 2}); *full != want || full.Free() != 1 {
			t.Errorf("Full = %+v (free %d), want %+v (free 1)", *full, full.Free(), want)
		}
		f.noDelegation(over.ID, over.Children...)
		if n := f.activeChildren("c"); n != 2 {
			t.Errorf("Active(c) = %d, want 2", n)
		}
		// Another conversation has its own room.
		if err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: newDelegation("deleg_3", "d", "x", "y"), Limit: 3}); err != nil {
			t.Errorf("Create in another conversation: %v", err)
		}
		// A child's end frees its place.
		_, claims := f.claimChildren("w1", 1)
		f.endChild(claims[0], done("ok"))
		if err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: over, Limit: 3}); err != nil {
			t.Errorf("Create after an end freed a place: %v", err)
		}
	})

	t.Run("two concurrent creates at the limit on two stores: one is written", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []delegation.Store{f.dlg(), other.Delegations()}
		for round := range 20 {
			conv := fmt.Sprintf("c%d", round)
			var errsOf [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range views {
				wg.Go(func() {
					<-start
					g := newDelegation(fmt.Sprintf("deleg_%d_%d", round, i), conv, "a", "b")
					errsOf[i] = views[i].Create(f.ctx, delegation.Dispatch{Delegation: g, Limit: 3})
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for i, err := range errsOf {
				switch _, full := delegation.FullOf(err); {
				case err == nil:
					won++
				case !full:
					t.Errorf("round %d: Create on store %d: %v, want nil or a Full", round, i, err)
				}
			}
			if won != 1 {
				t.Errorf("round %d: %d creates written (%v), want 1", round, won, errsOf)
			}
			if n := f.activeChildren(conv); n != 2 {
				t.Errorf("round %d: Active = %d, want 2", round, n)
			}
		}
	})

	t.Run("a turn's commit beyond the limit saves the turn and ends the children rejected", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.dispatch(newDelegation("deleg_1", "c", "one", "two"))
		g := newDelegation("deleg_2", "c", "three", "four")
		g.CreatedAt = f.clk.Now()
		if err := f.commitWrites("c", delegation.Dispatch{Delegation: g, Limit: 3}); err != nil {
			t.Fatalf("Finish carrying a dispatch beyond the limit: %v", err)
		}
		f.noClaim("w-next") // the turn's entry was acked: the commit was saved
		if n := f.activeChildren("c"); n != 2 {
			t.Errorf("Active(c) = %d, want 2: the rejected children take no place", n)
		}
		if cs, _ := f.claimChildren("w1", 10); len(cs) != 2 || cs[0].Delegation != "deleg_1" || cs[1].Delegation != "deleg_1" {
			t.Errorf("Claim = %v, want the first dispatch's two children only", childIDs(cs))
		}
		free := 1
		got := f.delegation(g.ID)
		var results []delegation.Result
		for i, c := range got.Children {
			want := delegation.Rejected(delegation.Pending(g.Children[i]), 3, &free)
			if c.Status != delegation.StatusRejected || c.Result == nil {
				t.Fatalf("child %d = %s, result %+v; want rejected", i, c.Status, c.Result)
			}
			if d := cmp.Diff(want, *c.Result); d != "" {
				t.Errorf("child %d's result (-want +got):\n%s", i, d)
			}
			results = append(results, want)
		}
		if s := got.Status(); s != delegation.StatusRejected {
			t.Errorf("delegation status %s, want rejected (the status its children share)", s)
		}
		cmps := f.completionsOf(g.ID)
		if len(cmps) != 1 {
			t.Fatalf("%d completions, want 1", len(cmps))
		}
		if d := cmp.Diff(completionOf(got, "", cmps[0].CreatedAt, results...), &cmps[0], timeOpts); d != "" {
			t.Errorf("completion (-want +got):\n%s", d)
		}
		if due := f.claimCompletions("d1", 10); len(due) != 1 || due[0].Completion.ID != cmps[0].ID {
			t.Errorf("ClaimCompletions = %d, want the rejection's completion, due", len(due))
		}
		if live := f.listDelegations(delegation.Query{Conv: "c", Active: true}); len(live) != 1 || live[0].ID != "deleg_1" {
			t.Errorf("active delegations = %d, want deleg_1 only", len(live))
		}
	})

	t.Run("a turn's commit within the limit counts the turn's earlier dispatch", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		a := newDelegation("deleg_1", "c", "one", "two")
		c := newDelegation("deleg_2", "c", "three", "four")
		if err := f.commitWrites("c", delegation.Dispatch{Delegation: a, Limit: 3}, delegation.Dispatch{Delegation: c, Limit: 3}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if n := f.activeChildren("c"); n != 2 {
			t.Errorf("Active(c) = %d, want 2", n)
		}
		if s := f.child(c.Children[0].ID).Status; s != delegation.StatusRejected {
			t.Errorf("the second dispatch's child is %s, want rejected", s)
		}
	})
}
