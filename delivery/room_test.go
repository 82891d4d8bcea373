package delivery

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
)

// claimSizes records the most each Claim asked for.
type claimSizes struct {
	outbox.Store
	mu   sync.Mutex
	asks []int
}

func (c *claimSizes) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	c.mu.Lock()
	c.asks = append(c.asks, max)
	c.mu.Unlock()
	return c.Store.Claim(ctx, worker, platforms, max, ttl)
}

func (c *claimSizes) largest() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Max(append([]int{0}, c.asks...))
}

func TestDeliveryClaimsAheadOfFastSendsWithinSenders(t *testing.T) {
	const senders, messages = 2, 60
	var running, most atomic.Int32
	s := &scripted{}
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return s.send(ctx, m)
	}}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	ob := &claimSizes{Store: db.Outbox()}
	routes := NewRoutes()
	routes.Up(a)
	d, err := New(Options{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: senders, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	ctx := context.Background()
	// One message first, so a send is timed before the rest are due.
	for i := range messages {
		if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: fmt.Sprint(i)}, Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			d.Notify()
			testkit.Eventually(t, "the first send", func() bool { return s.count() == 1 })
		}
	}
	d.Notify()
	testkit.Eventually(t, "every send", func() bool { return s.count() == messages })
	if got := ob.largest(); got <= senders {
		t.Errorf("the largest claim asked for %d messages; with sends this fast, want more than the %d senders", got, senders)
	}
	if got := most.Load(); got > senders {
		t.Errorf("%d sends ran at once, want at most %d", got, senders)
	}
}

// TestRoomBoundsClaimsAndHandoffsApart: the claim loop holds at most
// maxHeld of its own (or one a sender, when that is more), the worker
// as many as the senders send in a quarter of a claim, commits' handoffs
// included, and until a send was timed one a sender.
func TestRoomBoundsClaimsAndHandoffsApart(t *testing.T) {
	r := &room{senders: 2, claimTTL: time.Hour, free: make(chan struct{}, 1)}
	if got := r.left(); got != 2 {
		t.Errorf("before a timed send the loop may claim %d, want 2 (one a sender)", got)
	}
	if r.reserve(3) {
		t.Error("before a timed send a handoff of 3 was taken, want at most 2")
	}
	r.timed(time.Microsecond) // 2 senders × 15 min ÷ 1 µs: more than an int32 holds
	if got := r.left(); got != maxHeld {
		t.Errorf("with sends this fast the loop may claim %d, want maxHeld %d", got, maxHeld)
	}
	if !r.reserve(maxHeld + 1) {
		t.Errorf("with sends this fast a handoff of %d was refused", maxHeld+1)
	}
	r.hold(maxHeld+1, false) // the commit handed them over
	r.release(maxHeld + 1)
	if got := r.left(); got != maxHeld {
		t.Errorf("with %d handed over the loop may claim %d, want its own %d", maxHeld+1, got, maxHeld)
	}
	r.hold(maxHeld, true)
	if got := r.left(); got != 0 {
		t.Errorf("holding %d of its own the loop may claim %d, want 0", maxHeld, got)
	}
	if !r.reserve(1) {
		t.Error("with the loop's share taken a handoff was refused")
	}
	r.release(1)
	r.settle(true)
	if got := r.left(); got != 1 {
		t.Errorf("one of the loop's settled, it may claim %d, want 1", got)
	}
	for range maxHeld + 1 {
		r.settle(false)
	}
	for range maxHeld - 1 {
		r.settle(true)
	}
	if r.held != 0 || r.looped != 0 {
		t.Errorf("all settled, %d held and %d the loop's, want none", r.held, r.looped)
	}

	many := &room{senders: maxHeld + 10, claimTTL: time.Hour, free: make(chan struct{}, 1)}
	many.timed(time.Microsecond)
	if got := many.left(); got != maxHeld+10 {
		t.Errorf("with %d senders the loop may claim %d, want one a sender", maxHeld+10, got)
	}

	slow := &room{senders: 2, claimTTL: 4 * time.Second, free: make(chan struct{}, 1)}
	slow.timed(time.Second) // 2 senders × 1 s ÷ 1 s
	if slow.left() != 2 || slow.reserve(3) || !slow.reserve(2) {
		t.Error("with sends of a second and a claim of 4 s, want room for 2, claimed or handed over")
	}
	if got := slow.left(); got != 0 {
		t.Errorf("with the 2 promised to a commit the loop may claim %d, want 0: the room is the senders'", got)
	}
}
