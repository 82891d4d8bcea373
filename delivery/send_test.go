package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/outbox"
)

func TestDeliveryOutcomes(t *testing.T) {
	tests := []struct {
		desc   string
		result adapters.SendResult
		check  func(t *testing.T, r *deliveryRig, id string)
	}{
		{
			desc:   "accepted is acked",
			result: adapters.SendResult{Outcome: adapters.Accepted, MessageID: "tg-1"},
			check: func(t *testing.T, r *deliveryRig, id string) {
				testkit.Eventually(t, "ack", func() bool {
					ms, _ := r.store.Pending(context.Background(), 10)
					return len(ms) == 0
				})
				if d := r.dead(); len(d) != 0 {
					t.Errorf("dead letters %v", d)
				}
			},
		},
		{
			desc:   "rate limited waits the platform's retry-after and spends an attempt",
			result: adapters.SendResult{Outcome: adapters.RateLimited, RetryAfter: 7 * time.Second, Reason: "429 slow down"},
			check: func(t *testing.T, r *deliveryRig, id string) {
				m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == 1 })
				if !m.NextAttempt.Equal(t0.Add(7*time.Second)) || m.LastError != "429 slow down" {
					t.Errorf("next %v, error %q; want %v, the platform's reason", m.NextAttempt, m.LastError, t0.Add(7*time.Second))
				}
			},
		},
		{
			desc:   "transient backs off and spends an attempt",
			result: adapters.SendResult{Outcome: adapters.Transient, Reason: "502 bad gateway"},
			check: func(t *testing.T, r *deliveryRig, id string) {
				m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == 1 })
				if want := t0.Add(r.d.sender.backoff(id, 1)); !m.NextAttempt.Equal(want) || m.LastError != "502 bad gateway" {
					t.Errorf("next %v, error %q; want %v", m.NextAttempt, m.LastError, want)
				}
			},
		},
		{
			desc:   "permanent is dead-lettered with the platform's reason",
			result: adapters.SendResult{Outcome: adapters.Permanent, Reason: "403 bot was blocked by the user"},
			check: func(t *testing.T, r *deliveryRig, id string) {
				testkit.Eventually(t, "dead letter", func() bool { return len(r.dead()) == 1 })
				if d := r.dead()[0]; d.ID != id || d.LastError != "403 bot was blocked by the user" {
					t.Errorf("dead letter %+v", d)
				}
			},
		},
		{
			desc:   "route missing waits without spending an attempt",
			result: adapters.SendResult{Outcome: adapters.RouteMissing, Reason: "not connected"},
			check: func(t *testing.T, r *deliveryRig, id string) {
				m := r.waitReleased(id, func(m outbox.Message) bool { return m.NextAttempt.After(t0) })
				if m.Attempts != 0 || !m.NextAttempt.Equal(t0.Add(DefaultRouteRetry)) {
					t.Errorf("attempts %d, next %v; want 0, %v", m.Attempts, m.NextAttempt, t0.Add(DefaultRouteRetry))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s := &scripted{results: []adapters.SendResult{tt.result}}
			r := newDeliveryRig(t, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
			id := r.enqueue("telegram:42", "hello")
			tt.check(t, r, id)
			if s.count() != 1 {
				t.Errorf("sent %d times, want 1", s.count())
			}
			testkit.Eventually(t, "the attempt counted", func() bool { return r.attempts("telegram", tt.result.Outcome.String()) == 1 })
		})
	}
}

func TestDeliveryBackoffGrowsUntilItGivesUp(t *testing.T) {
	const maxAttempts = 6
	var calls atomic.Int32
	fail := &adaptertest.Adapter{Name: "slack", OnSend: func(context.Context, outbox.Message) adapters.SendResult {
		n := calls.Add(1)
		return adapters.SendResult{Outcome: adapters.Transient, Reason: fmt.Sprintf("503 try %d", n)}
	}}
	r := newDeliveryRig(t, Options{MaxAttempts: maxAttempts, BackoffMin: time.Second, BackoffMax: 10 * time.Second}, fail)
	id := r.enqueue("slack:C1", "report")

	var waits []time.Duration
	for attempt := 1; attempt < maxAttempts; attempt++ {
		m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == attempt })
		waits = append(waits, m.NextAttempt.Sub(r.clk.Now()))
		if m.LastError != fmt.Sprintf("503 try %d", attempt) {
			t.Errorf("attempt %d: last error %q", attempt, m.LastError)
		}
		// Not due before its time: nothing is sent while the clock stands.
		time.Sleep(20 * time.Millisecond)
		if int(calls.Load()) != attempt {
			t.Fatalf("sent %d times before the backoff ended, want %d", calls.Load(), attempt)
		}
		r.clk.Set(m.NextAttempt)
		r.d.Notify()
	}
	testkit.Eventually(t, "dead letter", func() bool { return len(r.dead()) == 1 })
	want := fmt.Sprintf("gave up after %d attempts: 503 try %d", maxAttempts, maxAttempts)
	if got := r.dead()[0].LastError; got != want {
		t.Errorf("dead letter reason %q, want %q", got, want)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] {
			t.Errorf("backoff shrank: %v", waits)
		}
	}
	if waits[1] <= waits[0] || waits[2] <= waits[1] {
		t.Errorf("backoff does not grow: %v", waits)
	}
	for i, w := range waits {
		if w > 11*time.Second {
			t.Errorf("wait %d is %v, over the cap of 10s (plus a tenth)", i+1, w)
		}
	}
	if got := r.attempts("slack", "transient"); got != maxAttempts {
		t.Errorf("transient attempts counted %v, want %d", got, maxAttempts)
	}
}

func TestDeliveryBackoff(t *testing.T) {
	d, err := New(Options{Outbox: &fakeOutbox{}, Routes: NewRoutes(), BackoffMin: time.Second, BackoffMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	prev := time.Duration(0)
	for attempt := 1; attempt <= 12; attempt++ {
		w := d.sender.backoff("17", attempt)
		base := min(time.Second<<(attempt-1), time.Minute)
		if w < base || w > base+base/10 {
			t.Errorf("attempt %d: %v, want within a tenth above %v", attempt, w, base)
		}
		if w < prev {
			t.Errorf("attempt %d: %v shorter than the one before, %v", attempt, w, prev)
		}
		prev = w
	}
	//lint:ignore SA4000 two calls, compared: the wait must not be random per call
	if d.sender.backoff("17", 3) != d.sender.backoff("17", 3) {
		t.Error("the same message and attempt gave two waits")
	}
}

func TestDeliveryRouteMissingSpendsNoAttempt(t *testing.T) {
	s := &scripted{}
	for range 20 {
		s.results = append(s.results, adapters.SendResult{Outcome: adapters.RouteMissing, Reason: "reconnecting"})
	}
	r := newDeliveryRig(t, Options{MaxAttempts: 3}, &adaptertest.Adapter{Name: "discord", OnSend: s.send})
	id := r.enqueue("discord:9", "hi")
	for round := 1; round <= 5; round++ {
		m := r.waitReleased(id, func(m outbox.Message) bool { return m.NextAttempt.After(r.clk.Now()) })
		if m.Attempts != 0 {
			t.Fatalf("round %d: attempts %d, want 0", round, m.Attempts)
		}
		r.clk.Set(m.NextAttempt)
		r.d.Notify()
	}
	if len(r.dead()) != 0 {
		t.Error("a message without a route was dead-lettered")
	}
}

func TestDeliveryCountsResends(t *testing.T) {
	s := &scripted{}
	var failAck atomic.Bool
	failAck.Store(true)
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	ob := &fakeOutbox{Store: db.Outbox()}
	ob.ack = func(ctx context.Context, c outbox.Claimed) error {
		if failAck.CompareAndSwap(true, false) {
			// The platform has the message but the ack never lands.
			return errs.E("test.Ack", errs.Unavailable, "the store went away")
		}
		return ob.Store.Ack(ctx, c)
	}
	routes := NewRoutes()
	routes.Up(&adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	m := newCounts()
	d, err := New(Options{Outbox: ob, Routes: routes, Clock: clk, Metrics: m.hooks(), Logger: quietLogger(), ClaimTTL: 30 * time.Second, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	if _, _, err := ob.Enqueue(context.Background(), outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "5"}, Text: "once"}); err != nil {
		t.Fatal(err)
	}
	d.Notify()
	testkit.Eventually(t, "the first send", func() bool { return s.count() == 1 })
	time.Sleep(20 * time.Millisecond)
	if got := m.resent("telegram"); got != 0 {
		t.Fatalf("resends %v before the claim ran out", got)
	}

	clk.Advance(31 * time.Second) // the claim runs out
	d.Notify()
	testkit.Eventually(t, "the resend", func() bool { return s.count() == 2 })
	testkit.Eventually(t, "the ack", func() bool {
		ms, _ := db.Outbox().Pending(context.Background(), 10)
		return len(ms) == 0
	})
	if got := m.resent("telegram"); got != 1 {
		t.Errorf("resends %v, want 1", got)
	}
}

// slowClaimStore is an outbox whose heartbeats fail, so that only claims
// keep a worker's heartbeat, and whose first claim that takes messages
// returns once slow went by on clk, as a store that stalls does.
type slowClaimStore struct {
	outbox.Store
	clk  *clock.Fake
	slow time.Duration
	done atomic.Bool
}

func (s *slowClaimStore) Beat(ctx context.Context, worker string, ttl time.Duration) error {
	return errors.New("store unreachable")
}

func (s *slowClaimStore) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	cs, err := s.Store.Claim(ctx, worker, platforms, max, ttl)
	if len(cs) > 0 && s.done.CompareAndSwap(false, true) {
		s.clk.Advance(s.slow)
	}
	return cs, err
}

// A message whose earlier claim ended unsettled is counted a resend even
// when the claim that takes it hands it back unsent (the claim returned
// too late in the worker's heartbeat to send): the hand-back settles that
// claim, so the one that sends it after is no resend.
func TestDeliveryCountsAResendHandedBackUnsent(t *testing.T) {
	s := &scripted{}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	ctx := context.Background()
	if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "5"}, Text: "once"}); err != nil {
		t.Fatal(err)
	}
	// A worker that dies claims it, and its claim runs out.
	if cs, err := db.Outbox().Claim(ctx, "dead", []string{"telegram"}, 1, time.Second); err != nil || len(cs) != 1 {
		t.Fatalf("the dead worker's claim: %v, %v", cs, err)
	}
	clk.Advance(2 * time.Second)

	routes := NewRoutes()
	routes.Up(&adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	m := newCounts()
	ob := &slowClaimStore{Store: db.Outbox(), clk: clk, slow: 1500 * time.Millisecond}
	d, err := New(Options{Outbox: ob, Routes: routes, Clock: clk, Metrics: m.hooks(), Logger: quietLogger(), ClaimTTL: 30 * time.Second,
		Heartbeat: 2 * time.Second, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(ctx)
	d.Notify()
	testkit.Eventually(t, "the send", func() bool { return s.count() == 1 })
	if got := m.attempted("telegram", adapters.Accepted.String()); got != 1 {
		t.Fatalf("%d sends accepted, want 1", got)
	}
	if got := m.resent("telegram"); got != 1 {
		t.Errorf("resends %v, want 1", got)
	}
}

func TestDeliveryAdapterPanicIsTransient(t *testing.T) {
	var calls atomic.Int32
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(context.Context, outbox.Message) adapters.SendResult {
		if calls.Add(1) == 1 {
			panic(errors.New("nil map"))
		}
		return adapters.SendResult{Outcome: adapters.Accepted}
	}}
	r := newDeliveryRig(t, Options{}, a)
	id := r.enqueue("telegram:3", "boom")
	m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == 1 })
	r.clk.Set(m.NextAttempt)
	r.d.Notify()
	testkit.Eventually(t, "the retry accepted", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 0
	})
}

func TestDeliveryRedactsReasons(t *testing.T) {
	const token = "123456:SECRET-bot-token"
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(context.Context, outbox.Message) adapters.SendResult {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "POST https://api.telegram.org/bot" + token + "/sendMessage: 400"}
	}}
	r := newDeliveryRig(t, Options{Redact: redact.New([]string{token}).String}, a)
	r.enqueue("telegram:3", "x")
	testkit.Eventually(t, "dead letter", func() bool { return len(r.dead()) == 1 })
	if got, want := r.dead()[0].LastError, "POST https://api.telegram.org/bot****/sendMessage: 400"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
}

// Whatever put a secret of herald's in an outbox message (a script's
// output in a cron report, a worker's summary), the chat gets it masked.
func TestDeliveryRedactsText(t *testing.T) {
	const token = "123456:SECRET-bot-token"
	var got []string
	var mu sync.Mutex
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.Text)
		return adapters.SendResult{Outcome: adapters.Accepted}
	}}
	r := newDeliveryRig(t, Options{Redact: redact.New([]string{token}).String}, a)
	r.enqueue("telegram:3", "TELEGRAM_BOT_TOKEN="+token+"\nPATH=/usr/bin")
	testkit.Eventually(t, "sent", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	if want := "TELEGRAM_BOT_TOKEN=****\nPATH=/usr/bin"; got[0] != want {
		t.Errorf("sent %q, want %q", got[0], want)
	}
}

// TestDeliveryKeepsThePartsSentInTheStore: the parts an adapter reports
// accepted are written with the message under its claim, so the next
// attempt, here after a failure, gets them back and sends only the rest.
func TestDeliveryKeepsThePartsSentInTheStore(t *testing.T) {
	var mu sync.Mutex
	var resumedAt []int
	a := &adaptertest.Adapter{Name: "telegram", OnSend: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		mu.Lock()
		resumedAt = append(resumedAt, m.Parts.Done)
		mu.Unlock()
		if m.Parts.Done == 0 {
			// The first part goes, the second fails.
			if err := adapters.KeepParts(ctx, outbox.Parts{Done: 1, First: "p1"}); err != nil {
				return adapters.PartsNotKept("telegram", err)
			}
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "timeout"}
		}
		return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.Parts.First}
	}}
	r := newDeliveryRig(t, Options{}, a)
	id := r.enqueue("telegram:7", "long")
	m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == 1 })
	if m.Parts != (outbox.Parts{Done: 1, First: "p1"}) {
		t.Fatalf("parts in the store after the failure = %+v, want the first part's", m.Parts)
	}
	r.clk.Set(m.NextAttempt)
	r.d.Notify()
	testkit.Eventually(t, "the message sent", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]int{0, 1}, resumedAt); diff != "" {
		t.Errorf("parts done at each attempt (-want +got):\n%s", diff)
	}
}
