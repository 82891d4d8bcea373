package delivery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/outbox"
)

func TestDeliveryKeepsOrderPerTarget(t *testing.T) {
	s := &scripted{}
	gate := make(chan struct{})
	var failed atomic.Bool
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		res := s.send(ctx, m)
		if m.Text == "first" && failed.CompareAndSwap(false, true) {
			<-gate // the second is claimed while the first one's send hangs
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "timeout"}
		}
		return res
	}}
	r := newDeliveryRig(t, Options{Senders: 4}, a)
	first := r.enqueue("telegram:7", "first")
	second := r.enqueue("telegram:7", "second")
	r.enqueue("telegram:8", "other chat")
	testkit.Eventually(t, "the other chat served while the first send hangs", func() bool { return s.count() == 2 })
	close(gate)

	// The first failed and waits; the second, behind it, waits as long
	// without spending an attempt.
	m1 := r.waitReleased(first, func(m outbox.Message) bool { return m.Attempts == 1 })
	m2 := r.waitReleased(second, func(m outbox.Message) bool { return m.NextAttempt.After(t0) })
	if m2.Attempts != 0 || !m2.NextAttempt.Equal(m1.NextAttempt) {
		t.Errorf("second: attempts %d, next %v; want 0, %v", m2.Attempts, m2.NextAttempt, m1.NextAttempt)
	}
	r.clk.Set(m1.NextAttempt)
	r.d.Notify()
	testkit.Eventually(t, "both sent", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 0
	})
	got := s.texts()
	if diff := cmp.Diff([]string{"first", "first", "second"}, without(got, "other chat")); diff != "" {
		t.Errorf("sends to telegram:7 (-want +got):\n%s", diff)
	}
}

func without(list []string, drop string) []string {
	out := []string{}
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// TestDeliveryHandsBackWhatIsBehindAMessageHandedBack: once a message of
// a lane goes back unsent, those behind it go back too, and the store
// gives them out again only after it.
func TestDeliveryHandsBackWhatIsBehindAMessageHandedBack(t *testing.T) {
	s := &scripted{results: []adapters.SendResult{{Outcome: adapters.RouteMissing, Reason: "not connected"}}}
	gate := make(chan struct{})
	var held atomic.Bool
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		if held.CompareAndSwap(false, true) {
			<-gate // the others are claimed behind it meanwhile
		}
		return s.send(ctx, m)
	}}
	r := newDeliveryRig(t, Options{}, a)
	r.enqueue("telegram:7", "first")
	testkit.Eventually(t, "the first send under way", held.Load)
	r.enqueue("telegram:7", "second")
	r.enqueue("telegram:7", "third")
	close(gate)
	testkit.Eventually(t, "all three given back", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 3 && ms[0].NextAttempt.After(t0) && ms[1].NextAttempt.After(t0) && ms[2].NextAttempt.After(t0)
	})
	r.clk.Advance(DefaultRouteRetry)
	r.d.Notify()
	testkit.Eventually(t, "all sent", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 0
	})
	if diff := cmp.Diff([]string{"first", "first", "second", "third"}, s.texts()); diff != "" {
		t.Errorf("sends (-want +got):\n%s", diff)
	}
}

// releaseFailsOnce is an outbox whose first Release fails.
type releaseFailsOnce struct {
	outbox.Store
	failed atomic.Bool
}

func (s *releaseFailsOnce) Release(ctx context.Context, c outbox.Claimed, next time.Time, reason string) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("store unreachable")
	}
	return s.Store.Release(ctx, c, next, reason)
}

// A message whose hand-back could not be written stays claimed by this
// worker until its claim runs out, so the store gives out the one behind
// it meanwhile: that one waits for it all the same.
func TestDeliveryAFailedHandBackHoldsTheMessagesBehindIt(t *testing.T) {
	s := &scripted{results: []adapters.SendResult{{Outcome: adapters.Transient, Reason: "timeout"}}}
	var wrap *releaseFailsOnce
	r := newWrappedDeliveryRig(t, func(o outbox.Store) outbox.Store {
		wrap = &releaseFailsOnce{Store: o}
		return wrap
	}, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	clk := r.clk
	r.enqueue("telegram:7", "first")
	testkit.Eventually(t, "first tried and its Release failed", func() bool { return s.count() == 1 && wrap.failed.Load() })
	second := r.enqueue("telegram:7", "second")
	testkit.Eventually(t, "second handed back or sent", func() bool {
		ms, err := r.store.Pending(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == second && m.NextAttempt.After(clk.Now()) {
				return true
			}
		}
		return s.count() > 1
	})
	if d := cmp.Diff([]string{"first"}, s.texts()); d != "" {
		t.Fatalf("sends while first is still claimed here (-want +got):\n%s", d)
	}
	clk.Advance(DefaultClaimTTL + time.Second)
	r.d.Notify()
	testkit.Eventually(t, "all sent", func() bool {
		ms, err := r.store.Pending(context.Background(), 10)
		return err == nil && len(ms) == 0
	})
	if d := cmp.Diff([]string{"first", "first", "second"}, s.texts()); d != "" {
		t.Errorf("sends (-want +got):\n%s", d)
	}
}
