package delivery

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// deliveryRig is a delivery worker on a real SQLite outbox and a fake
// clock, with one adapter per platform given.
type deliveryRig struct {
	t        *testing.T
	clk      *clock.Fake
	store    outbox.Store   // the real outbox
	sessions sessions.Store // the real sessions, on the outbox's database
	routes   *Routes
	metrics  *counts
	d        *Worker
}

func newDeliveryRig(t *testing.T, opts Options, as ...adapters.Adapter) *deliveryRig {
	t.Helper()
	return newWrappedDeliveryRig(t, nil, opts, as...)
}

// newWrappedDeliveryRig is newDeliveryRig with the worker's outbox the
// real one as wrap returns it (nil wraps nothing).
func newWrappedDeliveryRig(t *testing.T, wrap func(outbox.Store) outbox.Store, opts Options, as ...adapters.Adapter) *deliveryRig {
	t.Helper()
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	r := &deliveryRig{t: t, clk: clk, store: db.Outbox(), sessions: db.Sessions(), routes: NewRoutes(), metrics: newCounts()}
	for _, a := range as {
		r.routes.Up(a)
	}
	if opts.Outbox == nil {
		opts.Outbox = r.store
	}
	if wrap != nil {
		opts.Outbox = wrap(opts.Outbox)
	}
	opts.Routes, opts.Clock, opts.Metrics = r.routes, clk, r.metrics.hooks()
	if opts.PollMin == 0 {
		opts.PollMin, opts.PollMax = time.Millisecond, 5*time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	var err error
	if r.d, err = New(opts); err != nil {
		t.Fatal(err)
	}
	if err := r.d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := r.d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return r
}

func (r *deliveryRig) enqueue(target, text string) string {
	r.t.Helper()
	tg, err := outbox.ParseTarget(target)
	if err != nil {
		r.t.Fatal(err)
	}
	id, _, err := r.store.Enqueue(context.Background(), outbox.Message{Target: tg, Conv: target, Text: text, Kind: "reply"})
	if err != nil {
		r.t.Fatalf("Enqueue: %v", err)
	}
	r.d.Notify()
	return id
}

// pending returns the one pending message, or fails.
func (r *deliveryRig) pending() outbox.Message {
	r.t.Helper()
	ms, err := r.store.Pending(context.Background(), 10)
	if err != nil || len(ms) != 1 {
		r.t.Fatalf("Pending = %d messages, %v; want 1", len(ms), err)
	}
	return ms[0]
}

func (r *deliveryRig) dead() []outbox.Message {
	r.t.Helper()
	ms, err := r.store.DeadLetters(context.Background(), 10)
	if err != nil {
		r.t.Fatalf("DeadLetters: %v", err)
	}
	return ms
}

// settledPending waits until the message with id is pending again (not
// held by a claim) with at least attempts attempts, and returns it.
func (r *deliveryRig) waitReleased(id string, check func(m outbox.Message) bool) outbox.Message {
	r.t.Helper()
	var got outbox.Message
	testkit.Eventually(r.t, "message "+id+" given back", func() bool {
		ms, err := r.store.Pending(context.Background(), 10)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == id && check(m) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

func (r *deliveryRig) attempts(platform, result string) int {
	return r.metrics.attempted(platform, result)
}

// scripted answers each send with the next result, then accepts.
type scripted struct {
	mu      sync.Mutex
	results []adapters.SendResult
	sent    []outbox.Message
}

func (s *scripted) send(_ context.Context, m outbox.Message) adapters.SendResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	if len(s.results) == 0 {
		return adapters.SendResult{Outcome: adapters.Accepted, MessageID: "p-" + m.ID}
	}
	res := s.results[0]
	s.results = s.results[1:]
	return res
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func (s *scripted) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{}
	for _, m := range s.sent {
		out = append(out, m.Text)
	}
	return out
}

func TestDeliveryPlatformWithoutAdapterStaysPending(t *testing.T) {
	s := &scripted{}
	r := newDeliveryRig(t, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	id := r.enqueue("slack:C1", "for slack")
	r.enqueue("telegram:1", "for telegram")
	testkit.Eventually(t, "the telegram message sent", func() bool { return s.count() == 1 })
	// Once its send is acked, the slack message is all that is left.
	testkit.Eventually(t, "the telegram message acked", func() bool {
		ms, err := r.store.Pending(context.Background(), 10)
		return err == nil && len(ms) == 1
	})
	m := r.pending()
	if m.ID != id || m.Attempts != 0 {
		t.Errorf("pending %+v, want the slack message with no attempt", m)
	}

	// The route comes up: the message goes.
	slack := &scripted{}
	r.routes.Up(&adaptertest.Adapter{Name: "slack", OnSend: slack.send})
	r.d.Notify()
	testkit.Eventually(t, "the slack message sent", func() bool { return slack.count() == 1 })
}

func TestDeliveryNotifyWakesAtOnce(t *testing.T) {
	s := &scripted{}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(&adaptertest.Adapter{Name: "api", OnSend: s.send})
	d, err := New(Options{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), PollMin: time.Hour, PollMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	time.Sleep(10 * time.Millisecond) // the loop found nothing and sleeps for an hour
	if _, _, err := db.Outbox().Enqueue(context.Background(), outbox.Message{Target: outbox.Target{Platform: "api", Chat: "x"}, Text: "now"}); err != nil {
		t.Fatal(err)
	}
	d.Notify()
	testkit.Eventually(t, "the send after Notify", func() bool { return s.count() == 1 })
}

func TestDeliveryShutdownHandsBackWithoutSpendingAnAttempt(t *testing.T) {
	started := make(chan struct{})
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		close(started)
		<-ctx.Done()
		return adapters.SendResult{Outcome: adapters.Transient, Reason: ctx.Err().Error()}
	}}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(a)
	d, err := New(Options{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), PollMin: time.Millisecond, PollMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Outbox().Enqueue(context.Background(), outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "slow"}); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	ms, err := db.Outbox().Pending(context.Background(), 10)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Pending = %v, %v", ms, err)
	}
	if ms[0].Attempts != 0 || ms[0].NextAttempt.After(t0) {
		t.Errorf("handed back with attempts %d, next %v; want 0 attempts, due now", ms[0].Attempts, ms[0].NextAttempt)
	}
	// Due now and claimable by another process at once.
	got, err := db.Outbox().Claim(context.Background(), "other", []string{"telegram"}, 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Errorf("another worker's claim = %v, %v", got, err)
	}
}

func TestDeliveryShutdownDrainsWhatIsDue(t *testing.T) {
	s := &scripted{}
	slow := &adaptertest.Adapter{Name: "api", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		time.Sleep(5 * time.Millisecond)
		return s.send(ctx, m)
	}}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(slow)
	d, err := New(Options{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 2, PollMin: time.Hour, PollMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the loop found nothing and sleeps for an hour
	for i := range 10 {
		m := outbox.Message{Target: outbox.Target{Platform: "api", Chat: fmt.Sprint(i % 3)}, Text: fmt.Sprint(i)}
		if _, _, err := db.Outbox().Enqueue(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	// Queued after the last poll and never notified: Shutdown still
	// sends them.
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if s.count() != 10 {
		t.Errorf("sent %d of 10 before stopping", s.count())
	}
	if ms, _ := db.Outbox().Pending(context.Background(), 20); len(ms) != 0 {
		t.Errorf("%d messages left pending", len(ms))
	}
}
