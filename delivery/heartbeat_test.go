package delivery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
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
		return &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
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
	start := func(name string, s outbox.Store, a adapters.Adapter, beat time.Duration) *Worker {
		routes := NewRoutes()
		routes.Up(a)
		d, err := New(Options{Name: name, Outbox: s, Routes: routes, Clock: clk, Logger: quietLogger(),
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
	testkit.Eventually(t, "w settled what it held", func() bool { w.room.mu.Lock(); defer w.room.mu.Unlock(); return w.room.held == 0 })
	mu.Lock()
	defer mu.Unlock()
	// A was under way when the heartbeat ran out; B was not.
	if d := cmp.Diff([]string{"A"}, sent["w"]); d != "" {
		t.Errorf("w's sends (-want +got):\n%s", d)
	}
}
