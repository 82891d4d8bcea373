package kanban_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/kanban"
)

// countingStore counts the calls a service makes of its store.
type countingStore struct {
	kanban.Store
	now, card, apply atomic.Int64
	stamped          atomic.Int64 // Apply calls with Stamp set
}

func (s *countingStore) Now(ctx context.Context) (time.Time, error) {
	s.now.Add(1)
	return s.Store.Now(ctx)
}

func (s *countingStore) Card(ctx context.Context, id string) (kanban.Card, error) {
	s.card.Add(1)
	return s.Store.Card(ctx, id)
}

func (s *countingStore) Apply(ctx context.Context, c kanban.Change) ([]kanban.Event, error) {
	s.apply.Add(1)
	if c.Stamp {
		s.stamped.Add(1)
	}
	return s.Store.Apply(ctx, c)
}

// TestACycleIsThreeStoreCallsStampedByTheStore checks a card's create,
// claim and complete: three store calls, the writes, each stamped by
// the store (the claim and the complete decide on the card as the
// service wrote it, with no read), no clock read of the service's own,
// and the cards returned carry the store's times, as the store keeps
// them.
func TestACycleIsThreeStoreCallsStampedByTheStore(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		st := &countingStore{Store: h.svc.Store}
		h.svc.Store = st
		created := h.clk.Now()
		k := h.create(kanban.CreateSpec{Title: "stamped", Assignee: "ops"})
		if !k.CreatedAt.Equal(created) || !k.UpdatedAt.Equal(created) || !k.ReadyAt.Equal(created) || k.Version != 1 {
			t.Errorf("created card: created %v, updated %v, ready %v, version %d; want %v thrice, 1", k.CreatedAt, k.UpdatedAt, k.ReadyAt, k.Version, created)
		}
		h.clk.Advance(time.Minute)
		claimed := h.clk.Now()
		k, err := h.svc.Claim(h.ctx, k.ID, kanban.ClaimSpec{Owner: "gw-a", Lane: "ops", TTL: 15 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if k.Claim == nil || !k.Claim.Started.Equal(claimed) || !k.Claim.Expires.Equal(claimed.Add(15*time.Minute)) || !k.CreatedAt.Equal(created) || k.Version != 2 {
			t.Fatalf("claimed card: %+v, claim %+v; want started %v, expiring 15 minutes on, version 2", k, k.Claim, claimed)
		}
		if got, err := st.Store.Card(h.ctx, k.ID); err != nil || got.Claim == nil || !got.Claim.Expires.Equal(k.Claim.Expires) {
			t.Errorf("the store's card = %+v, %v; want the claim returned", got.Claim, err)
		}
		h.clk.Advance(time.Minute)
		done := h.clk.Now()
		k, err = h.svc.Complete(h.ctx, k.ID, k.Claim.Token, kanban.Result{Summary: "done"}, "gw-a")
		if err != nil {
			t.Fatal(err)
		}
		if k.Status != kanban.StatusDone || !k.CompletedAt.Equal(done) || !k.UpdatedAt.Equal(done) || k.Version != 3 {
			t.Errorf("completed card: %s, completed %v, updated %v, version %d; want done at %v, version 3", k.Status, k.CompletedAt, k.UpdatedAt, k.Version, done)
		}
		runs, err := st.Store.Runs(h.ctx, k.ID)
		if err != nil || len(runs) != 1 || !runs[0].Started.Equal(claimed) || !runs[0].Ended.Equal(done) {
			t.Errorf("runs = %+v, %v; want one from %v to %v", runs, err, claimed, done)
		}
		if n, c, a, s := st.now.Load(), st.card.Load(), st.apply.Load(), st.stamped.Load(); n != 0 || c != 0 || a != 3 || s != 3 {
			t.Errorf("store calls: %d clock reads, %d card reads, %d applies (%d stamped); want 0, 0, 3 (3)", n, c, a, s)
		}
	})
}

// TestStampedLeavesTheChangeAsItWas checks that a store stamping a
// change writes a copy: the caller's cards and events keep their
// instants, and only instants of 1970 move.
func TestStampedLeavesTheChangeAsItWas(t *testing.T) {
	base := kanban.StampBase
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	c := kanban.Change{
		Stamp:  true,
		Cards:  []kanban.CardWrite{{Card: kanban.Card{ID: "t_1", CreatedAt: at, UpdatedAt: base, Claim: &kanban.Claim{Expires: base.Add(time.Hour)}}}},
		Events: []kanban.Event{{At: base.Add(time.Second)}},
	}
	got := c.Stamped(at.Add(time.Minute))
	if got.Stamp {
		t.Error("a stamped change still asks to be stamped")
	}
	k := got.Cards[0].Card
	if !k.CreatedAt.Equal(at) || !k.UpdatedAt.Equal(at.Add(time.Minute)) || !k.Claim.Expires.Equal(at.Add(time.Hour+time.Minute)) ||
		!got.Events[0].At.Equal(at.Add(time.Minute+time.Second)) {
		t.Errorf("stamped: created %v, updated %v, expires %v, event %v", k.CreatedAt, k.UpdatedAt, k.Claim.Expires, got.Events[0].At)
	}
	if w := c.Cards[0].Card; !w.UpdatedAt.Equal(base) || !w.Claim.Expires.Equal(base.Add(time.Hour)) || !c.Events[0].At.Equal(base.Add(time.Second)) {
		t.Errorf("the change given was changed: %+v, claim %+v, event %v", w, w.Claim, c.Events[0].At)
	}
}
