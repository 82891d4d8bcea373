package delivery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
)

// gatedAcks holds its first AckAll until release is closed and records
// the size of every batch.
type gatedAcks struct {
	outbox.Store
	release chan struct{}
	first   chan struct{} // closed when the first AckAll arrived
	once    sync.Once

	mu      sync.Mutex
	batches []int
}

func (g *gatedAcks) AckAll(ctx context.Context, cs []outbox.Claimed) ([]error, error) {
	g.mu.Lock()
	g.batches = append(g.batches, len(cs))
	g.mu.Unlock()
	g.once.Do(func() {
		close(g.first)
		<-g.release
	})
	return g.Store.AckAll(ctx, cs)
}

func (g *gatedAcks) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.batches...)
}

func TestDeliveryAcksWhatWaitsTogetherAndBeforeShutdownReturns(t *testing.T) {
	s := &scripted{}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	ob := &gatedAcks{Store: db.Outbox(), release: make(chan struct{}), first: make(chan struct{})}
	routes := NewRoutes()
	routes.Up(&adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	d, err := New(Options{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 8, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func(chat string) {
		if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: chat}, Text: chat}); err != nil {
			t.Fatal(err)
		}
		d.Notify()
	}
	enqueue("0")
	<-ob.first
	// The first ack is out; the next four are sent meanwhile and wait.
	for i := 1; i <= 4; i++ {
		enqueue(fmt.Sprint(i))
	}
	testkit.Eventually(t, "five sends", func() bool { return s.count() == 5 })

	stopped := make(chan error, 1)
	go func() { stopped <- d.Shutdown(ctx) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) before the queued acks were written", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(ob.release)
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := cmp.Diff([]int{1, 4}, ob.sizes()); d != "" {
		t.Errorf("AckAll batch sizes (-want +got):\n%s", d)
	}
	if ms, err := db.Outbox().Pending(ctx, 10); err != nil || len(ms) != 0 {
		t.Errorf("Pending after Shutdown = %d messages, %v; want every one acked", len(ms), err)
	}
}

func TestDeliveryAcksWaitForOthersToJoinThem(t *testing.T) {
	s := &scripted{}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	open := make(chan struct{})
	close(open)
	ob := &gatedAcks{Store: db.Outbox(), release: open, first: make(chan struct{})}
	routes := NewRoutes()
	routes.Up(&adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	// A linger far longer than the test: only a full batch or the
	// shutdown writes acks.
	d, err := New(Options{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 8, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond, AckLinger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func(from, to int) {
		for i := from; i < to; i++ {
			if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: fmt.Sprint(i)}, Text: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		d.Notify()
	}
	enqueue(0, 10)
	testkit.Eventually(t, "ten sends", func() bool { return s.count() == 10 })
	time.Sleep(20 * time.Millisecond)
	if got := ob.sizes(); len(got) != 0 {
		t.Fatalf("AckAll batches %v before the linger ran out or a batch filled", got)
	}
	// The 64th queued ack fills a batch, which goes at once.
	enqueue(10, ackEnough)
	testkit.Eventually(t, "a full batch of acks", func() bool { return len(ob.sizes()) == 1 })
	enqueue(ackEnough, ackEnough+3)
	testkit.Eventually(t, "three more sends", func() bool { return s.count() == ackEnough+3 })
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := cmp.Diff([]int{ackEnough, 3}, ob.sizes()); d != "" {
		t.Errorf("AckAll batch sizes (-want +got):\n%s", d)
	}
	if ms, err := db.Outbox().Pending(ctx, 100); err != nil || len(ms) != 0 {
		t.Errorf("Pending after Shutdown = %d messages, %v; want every one acked", len(ms), err)
	}
}
