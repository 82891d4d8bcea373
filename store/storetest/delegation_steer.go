package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runSteer holds a child's steers (Store.Steer): recorded only while it
// runs, and its end checked against the record, so that a steer sent as
// it finishes, from any instance, is said in its result or refused,
// never lost.
func runSteer(t *testing.T, b Backend) {
	t.Run("recorded while running; an end that counts fewer is refused until they are said", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "one"))
		id := g.Children[0].ID
		wantCode(t, "Steer of a pending child", f.dlg().Steer(f.ctx, id, "early"), errs.Conflict)
		wantCode(t, "Steer of an unknown child", f.dlg().Steer(f.ctx, "sub_nope", "x"), errs.NotFound)
		_, claims := f.claimChildren("w1", 1)
		for _, s := range []string{"go left", `then "right"`} {
			if err := f.dlg().Steer(f.ctx, id, s); err != nil {
				t.Fatalf("Steer(%q): %v", s, err)
			}
		}
		c := f.child(id)
		if got := strings.Join(c.Steers, "|"); got != `go left|then "right"` {
			t.Errorf("Steers = %q, want both, in order", c.Steers)
		}

		r := done("did it")
		r.Steers = 1 // it took the first only
		_, err := f.dlg().End(f.ctx, claims[0], r)
		wantCode(t, "End counting fewer steers than recorded", err, errs.Conflict)
		if got := f.child(id); got.Status != delegation.StatusRunning || got.Result != nil {
			t.Fatalf("after the refused End: %s, result %+v; want running, nothing written", got.Status, got.Result)
		}
		r = delegation.Unlanded(c, r)
		if cmp := f.endChild(claims[0], r); cmp == nil {
			t.Errorf("End said as not landed made no completion")
		}
		got := f.child(id).Result
		if got == nil || got.PendingSteer != `then "right"` || got.Steers != 2 || !strings.HasSuffix(got.Summary, `did not land: then "right")`) {
			t.Errorf("result %+v: want the second steer pending, said at the end of the summary", got)
		}
		wantCode(t, "Steer after the end", f.dlg().Steer(f.ctx, id, "late"), errs.Conflict)
	})

	t.Run("a child takes at most MaxSteers", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "one"))
		f.claimChildren("w1", 1)
		for i := range delegation.MaxSteers {
			if err := f.dlg().Steer(f.ctx, g.Children[0].ID, fmt.Sprint(i)); err != nil {
				t.Fatalf("Steer %d: %v", i, err)
			}
		}
		wantCode(t, "one steer more", f.dlg().Steer(f.ctx, g.Children[0].ID, "more"), errs.TooLarge)
		if n := len(f.child(g.Children[0].ID).Steers); n != delegation.MaxSteers {
			t.Errorf("%d steers recorded, want %d", n, delegation.MaxSteers)
		}
	})

	t.Run("a reaped child's steers are said as not landed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "one"))
		f.claimChildren("w1", 1)
		if err := f.dlg().Steer(f.ctx, g.Children[0].ID, "hello?"); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(ttl + tick)
		if got := f.reap(10); len(got) != 1 {
			t.Fatalf("Reap = %d children, want 1", len(got))
		}
		if r := f.child(g.Children[0].ID).Result; r == nil || r.Status != delegation.StatusUnknown || r.PendingSteer != "hello?" {
			t.Errorf("reaped result %+v: want unknown with the steer pending", r)
		}
	})

	t.Run("a steer on one store racing the end on another: said in the result, or refused", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		steerer := other.Delegations()
		landed, refused := 0, 0
		for round := range 20 {
			g := f.dispatch(newDelegation(fmt.Sprintf("deleg_%d", round), "c", "a"))
			id := g.Children[0].ID
			_, claims := f.claimChildren("w1", 1)
			var steerErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				steerErr = steerer.Steer(f.ctx, id, "late news")
			})
			wg.Go(func() {
				<-start
				// The runner's end: on a refusal, read the child and say
				// what did not land.
				r := done("finished")
				for range 3 {
					_, err := f.dlg().End(f.ctx, claims[0], r)
					if !errs.Is(err, errs.Conflict) {
						if err != nil {
							t.Errorf("round %d: End: %v", round, err)
						}
						return
					}
					c, err := f.dlg().Child(f.ctx, id)
					if err != nil {
						t.Errorf("round %d: Child: %v", round, err)
						return
					}
					r = delegation.Unlanded(c, r)
				}
				t.Errorf("round %d: End still refused", round)
			})
			close(start)
			wg.Wait()
			res := f.child(id).Result
			switch {
			case res == nil:
				t.Errorf("round %d: no result", round)
			case steerErr == nil && res.PendingSteer == "late news":
				landed++
			case errs.Is(steerErr, errs.Conflict) && res.PendingSteer == "":
				refused++
			default:
				t.Errorf("round %d: steer %v, result's pending steer %q: want it said, or the steer refused", round, steerErr, res.PendingSteer)
			}
		}
		t.Logf("said in the result %d times, refused %d times", landed, refused)
	})
}
