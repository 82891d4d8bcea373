package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
)

// blipStore is an outbox whose heartbeats and claims fail once down is
// set, as while the store is away from one worker only.
type blipStore struct {
	outbox.Store
	down atomic.Bool
}

func (s *blipStore) Beat(ctx context.Context, worker string, ttl time.Duration) error {
	if s.down.Load() && ttl > 0 {
		return errors.New("store unreachable")
	}
	return s.Store.Beat(ctx, worker, ttl)
}

func (s *blipStore) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	if s.down.Load() {
		return nil, errors.New("store unreachable")
	}
	return s.Store.Claim(ctx, worker, platforms, max, ttl)
}

// A worker whose heartbeat ran out sends nothing more it claimed, though
// its claims have long to run: another worker's claim ended them, and it
// sends them.
func TestDeliveryStopsSendingOnceItsHeartbeatRunsOut(t *testing.T) {
	clk := clock.NewFake(t0)
	store := openSQLite(t, clk).Outbox()
	var mu sync.Mutex
	sent := map[string][]string{}
	gate := make(chan struct{})
	var waiting atomic.Bool
	adapter := func(worker string, block bool) adapters.Adapter {
		return &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
			if block && waiting.CompareAndSwap(false, true) {
				<-gate
			}
			mu.Lock()
			sent[worker] = append(sent[worker], m.Text)
			mu.Unlock()
			return adapters.SendResult{Outcome: adapters.Accepted, MessageID: worker}
		}}
	}
	tg, _ := outbox.ParseTarget("telegram:7")
	for _, text := range []string{"A", "B"} {
		if _, _, err := store.Enqueue(context.Background(), outbox.Message{Target: tg, Conv: "c", Text: text, Kind: "reply"}); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string, s outbox.Store, a adapters.Adapter, beat time.Duration) *Delivery {
		routes := NewRoutes()
		routes.Up(a)
		d, err := NewDelivery(DeliveryOptions{Name: name, Outbox: s, Routes: routes, Clock: clk, Logger: quietLogger(),
			PollMin: time.Millisecond, PollMax: 5 * time.Millisecond, Heartbeat: beat})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = d.Shutdown(ctx)
		})
		return d
	}
	blip := &blipStore{Store: store}
	w := start("w", blip, adapter("w", true), 3*time.Second)
	testkit.Eventually(t, "w sending A", waiting.Load)
	// The store goes away from w, alive, for longer than its heartbeat
	// holds; its claims have most of a minute to run.
	blip.down.Store(true)
	clk.Advance(4 * time.Second)
	start("x", store, adapter("x", false), 0)
	testkit.Eventually(t, "x sent both", func() bool { mu.Lock(); defer mu.Unlock(); return len(sent["x"]) == 2 })
	close(gate)
	testkit.Eventually(t, "w settled what it held", func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.held == 0 })
	mu.Lock()
	defer mu.Unlock()
	// A was under way when the heartbeat ran out; B was not.
	if d := cmp.Diff([]string{"A"}, sent["w"]); d != "" {
		t.Errorf("w's sends (-want +got):\n%s", d)
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
	}, DeliveryOptions{}, &fakeAdapter{platform: "telegram", send: s.send})
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
