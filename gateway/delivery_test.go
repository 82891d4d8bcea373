package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
)

// deliveryRig is a delivery worker on a real SQLite outbox and a fake
// clock, with one adapter per platform given.
type deliveryRig struct {
	t       *testing.T
	clk     *clock.Fake
	store   outbox.Store // the real outbox
	routes  *Routes
	metrics *Metrics
	d       *Delivery
}

func newDeliveryRig(t *testing.T, opts DeliveryOptions, as ...adapters.Adapter) *deliveryRig {
	t.Helper()
	return newWrappedDeliveryRig(t, nil, opts, as...)
}

// newWrappedDeliveryRig is newDeliveryRig with the worker's outbox the
// real one as wrap returns it (nil wraps nothing).
func newWrappedDeliveryRig(t *testing.T, wrap func(outbox.Store) outbox.Store, opts DeliveryOptions, as ...adapters.Adapter) *deliveryRig {
	t.Helper()
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	r := &deliveryRig{t: t, clk: clk, store: db.Outbox(), routes: NewRoutes(), metrics: NewMetrics()}
	for _, a := range as {
		r.routes.Up(a)
	}
	if opts.Outbox == nil {
		opts.Outbox = r.store
	}
	if wrap != nil {
		opts.Outbox = wrap(opts.Outbox)
	}
	opts.Routes, opts.Clock, opts.Metrics = r.routes, clk, r.metrics
	opts.PollMin, opts.PollMax = time.Millisecond, 5*time.Millisecond
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	var err error
	if r.d, err = NewDelivery(opts); err != nil {
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

func (r *deliveryRig) attempts(platform, result string) float64 {
	return metricValue(r.t, r.metrics, "herald_delivery_attempts_total", "platform="+platform, "result="+result)
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
				if want := t0.Add(r.d.Backoff(id, 1)); !m.NextAttempt.Equal(want) || m.LastError != "502 bad gateway" {
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
			r := newDeliveryRig(t, DeliveryOptions{}, &fakeAdapter{platform: "telegram", send: s.send})
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
	fail := &fakeAdapter{platform: "slack", send: func(context.Context, outbox.Message) adapters.SendResult {
		n := calls.Add(1)
		return adapters.SendResult{Outcome: adapters.Transient, Reason: fmt.Sprintf("503 try %d", n)}
	}}
	r := newDeliveryRig(t, DeliveryOptions{MaxAttempts: maxAttempts, BackoffMin: time.Second, BackoffMax: 10 * time.Second}, fail)
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
	d, err := NewDelivery(DeliveryOptions{Outbox: &fakeOutbox{}, Routes: NewRoutes(), BackoffMin: time.Second, BackoffMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	prev := time.Duration(0)
	for attempt := 1; attempt <= 12; attempt++ {
		w := d.Backoff("17", attempt)
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
	if d.Backoff("17", 3) != d.Backoff("17", 3) {
		t.Error("the same message and attempt gave two waits")
	}
}

func TestDeliveryRouteMissingSpendsNoAttempt(t *testing.T) {
	s := &scripted{}
	for range 20 {
		s.results = append(s.results, adapters.SendResult{Outcome: adapters.RouteMissing, Reason: "reconnecting"})
	}
	r := newDeliveryRig(t, DeliveryOptions{MaxAttempts: 3}, &fakeAdapter{platform: "discord", send: s.send})
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

func TestDeliveryPlatformWithoutAdapterStaysPending(t *testing.T) {
	s := &scripted{}
	r := newDeliveryRig(t, DeliveryOptions{}, &fakeAdapter{platform: "telegram", send: s.send})
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
	r.routes.Up(&fakeAdapter{platform: "slack", send: slack.send})
	r.d.Notify()
	testkit.Eventually(t, "the slack message sent", func() bool { return slack.count() == 1 })
}

func TestDeliveryKeepsOrderPerTarget(t *testing.T) {
	s := &scripted{}
	gate := make(chan struct{})
	var failed atomic.Bool
	a := &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		res := s.send(ctx, m)
		if m.Text == "first" && failed.CompareAndSwap(false, true) {
			<-gate // the second is claimed while the first one's send hangs
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "timeout"}
		}
		return res
	}}
	r := newDeliveryRig(t, DeliveryOptions{Senders: 4}, a)
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
	routes.Up(&fakeAdapter{platform: "telegram", send: s.send})
	m := NewMetrics()
	d, err := NewDelivery(DeliveryOptions{Outbox: ob, Routes: routes, Clock: clk, Metrics: m, Logger: quietLogger(), ClaimTTL: 30 * time.Second, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
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
	if got := metricValue(t, m, "herald_delivery_resends_total", "platform=telegram"); got != 0 {
		t.Fatalf("resends %v before the claim ran out", got)
	}

	clk.Advance(31 * time.Second) // the claim runs out
	d.Notify()
	testkit.Eventually(t, "the resend", func() bool { return s.count() == 2 })
	testkit.Eventually(t, "the ack", func() bool {
		ms, _ := db.Outbox().Pending(context.Background(), 10)
		return len(ms) == 0
	})
	if got := metricValue(t, m, "herald_delivery_resends_total", "platform=telegram"); got != 1 {
		t.Errorf("resends %v, want 1", got)
	}
}

func TestDeliveryNotifyWakesAtOnce(t *testing.T) {
	s := &scripted{}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(&fakeAdapter{platform: "api", send: s.send})
	d, err := NewDelivery(DeliveryOptions{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), PollMin: time.Hour, PollMax: time.Hour})
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
	a := &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		close(started)
		<-ctx.Done()
		return adapters.SendResult{Outcome: adapters.Transient, Reason: ctx.Err().Error()}
	}}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(a)
	d, err := NewDelivery(DeliveryOptions{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), PollMin: time.Millisecond, PollMax: time.Millisecond})
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

func TestDeliveryAdapterPanicIsTransient(t *testing.T) {
	var calls atomic.Int32
	a := &fakeAdapter{platform: "telegram", send: func(context.Context, outbox.Message) adapters.SendResult {
		if calls.Add(1) == 1 {
			panic(errors.New("nil map"))
		}
		return adapters.SendResult{Outcome: adapters.Accepted}
	}}
	r := newDeliveryRig(t, DeliveryOptions{}, a)
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
	a := &fakeAdapter{platform: "telegram", send: func(context.Context, outbox.Message) adapters.SendResult {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "POST https://api.telegram.org/bot" + token + "/sendMessage: 400"}
	}}
	r := newDeliveryRig(t, DeliveryOptions{Redact: redact.New([]string{token}).String}, a)
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
	a := &fakeAdapter{platform: "telegram", send: func(_ context.Context, m outbox.Message) adapters.SendResult {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.Text)
		return adapters.SendResult{Outcome: adapters.Accepted}
	}}
	r := newDeliveryRig(t, DeliveryOptions{Redact: redact.New([]string{token}).String}, a)
	r.enqueue("telegram:3", "TELEGRAM_BOT_TOKEN="+token+"\nPATH=/usr/bin")
	testkit.Eventually(t, "sent", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	if want := "TELEGRAM_BOT_TOKEN=****\nPATH=/usr/bin"; got[0] != want {
		t.Errorf("sent %q, want %q", got[0], want)
	}
}

func TestDeliveryShutdownDrainsWhatIsDue(t *testing.T) {
	s := &scripted{}
	slow := &fakeAdapter{platform: "api", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		time.Sleep(5 * time.Millisecond)
		return s.send(ctx, m)
	}}
	clk := clock.NewFake(t0)
	db := openSQLite(t, clk)
	routes := NewRoutes()
	routes.Up(slow)
	d, err := NewDelivery(DeliveryOptions{Outbox: db.Outbox(), Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 2, PollMin: time.Hour, PollMax: time.Hour})
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
	routes.Up(&fakeAdapter{platform: "telegram", send: s.send})
	d, err := NewDelivery(DeliveryOptions{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 8, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
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
	routes.Up(&fakeAdapter{platform: "telegram", send: s.send})
	// A linger far longer than the test: only a full batch or the
	// shutdown writes acks.
	d, err := NewDelivery(DeliveryOptions{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: 8, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond, AckLinger: time.Hour})
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
	a := &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
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
	d, err := NewDelivery(DeliveryOptions{Outbox: ob, Routes: routes, Clock: clk, Logger: quietLogger(), Senders: senders, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
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

// TestDeliveryKeepsThePartsSentInTheStore: the parts an adapter reports
// accepted are written with the message under its claim, so the next
// attempt, here after a failure, gets them back and sends only the rest.
func TestDeliveryKeepsThePartsSentInTheStore(t *testing.T) {
	var mu sync.Mutex
	var resumedAt []int
	a := &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
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
	r := newDeliveryRig(t, DeliveryOptions{}, a)
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

// TestDeliveryHandsBackWhatIsBehindAMessageHandedBack: once a message of
// a lane goes back unsent, those behind it go back too, and the store
// gives them out again only after it.
func TestDeliveryHandsBackWhatIsBehindAMessageHandedBack(t *testing.T) {
	s := &scripted{results: []adapters.SendResult{{Outcome: adapters.RouteMissing, Reason: "not connected"}}}
	gate := make(chan struct{})
	var held atomic.Bool
	a := &fakeAdapter{platform: "telegram", send: func(ctx context.Context, m outbox.Message) adapters.SendResult {
		if held.CompareAndSwap(false, true) {
			<-gate // the others are claimed behind it meanwhile
		}
		return s.send(ctx, m)
	}}
	r := newDeliveryRig(t, DeliveryOptions{}, a)
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
