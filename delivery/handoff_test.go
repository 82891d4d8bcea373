package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// errNotCommitted is a commit's failure that the store refused it.
var errNotCommitted = errs.E("test", errs.Conflict, "not committed")

// countingOutbox counts the claims the delivery worker makes.
type countingOutbox struct {
	outbox.Store
	claims *atomic.Int32
}

func (o countingOutbox) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	o.claims.Add(1)
	return o.Store.Claim(ctx, worker, platforms, max, ttl)
}

// TestCommitsHandRepliesToDelivery checks both ways a turn commits: a
// reply to a platform this process serves is handed to the running
// delivery worker, claimed by the commit, and sent without a claim of
// the worker's own; one the worker cannot take now (not running, or no
// route) is queued and wakes the worker instead, and a commit without a
// reply does neither.
func TestCommitsHandRepliesToDelivery(t *testing.T) {
	reply := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}
	elsewhere := []outbox.Message{{Target: outbox.Target{Platform: "slack", Chat: "C1"}, Text: "hi"}}
	cases := []struct {
		desc    string
		outbox  []outbox.Message
		claim   bool // commit with FinishAndClaim
		started bool // the delivery worker runs
		handed  bool // want the reply sent without a claim
		woken   bool // want the worker woken
	}{
		{desc: "Finish with a reply, worker running", outbox: reply, started: true, handed: true},
		{desc: "FinishAndClaim with a reply, worker running", outbox: reply, claim: true, started: true, handed: true},
		{desc: "Finish with a reply, worker not running", outbox: reply, woken: true},
		{desc: "FinishAndClaim with a reply, worker not running", outbox: reply, claim: true, woken: true},
		{desc: "Finish with a reply to a platform without a route", outbox: elsewhere, started: true},
		{desc: "Finish without a reply", started: true},
		{desc: "FinishAndClaim without a reply", claim: true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			db := openSQLite(t, clock.Real{})
			claims := &atomic.Int32{}
			sent := make(chan outbox.Message, 4)
			routes := NewRoutes()
			routes.Up(&adaptertest.Adapter{Name: "telegram", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
				sent <- m
				return adapters.SendResult{Outcome: adapters.Accepted}
			}})
			d, err := New(Options{
				Outbox: countingOutbox{Store: db.Outbox(), claims: claims},
				Routes: routes,
				// The loop claims once as it starts, then only when woken.
				PollMin: time.Hour, PollMax: time.Hour,
				Logger: quietLogger(),
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.started {
				if err := d.Start(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					if err := d.Shutdown(sctx); err != nil {
						t.Errorf("Shutdown: %v", err)
					}
				})
				testkit.Eventually(t, "the worker's first claim", func() bool { return claims.Load() == 1 })
				// A claim on its way refuses offers: this one has ended.
				offerTaken(t, d, reply, "once the first claim ended")
			}

			commitTurn(t, Sessions(db.Sessions(), d), tc.outbox, tc.claim)

			if tc.handed {
				select {
				case m := <-sent:
					if m.Text != "hi" || m.ID == "" {
						t.Errorf("sent %+v, want the reply with its outbox id", m)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the handed reply was not sent")
				}
				testkit.Eventually(t, "the reply acked", func() bool {
					ms, err := db.Outbox().Pending(ctx, 10)
					return err == nil && len(ms) == 0
				})
				if n := claims.Load(); n != 1 {
					t.Errorf("the worker claimed %d times, want only its first claim", n)
				}
				return
			}
			if !tc.started {
				if woken := len(d.notices.wake) == 1; woken != tc.woken {
					t.Errorf("woken = %v, want %v", woken, tc.woken)
				}
			} else if len(tc.outbox) > 0 {
				testkit.Eventually(t, "the woken worker's claim", func() bool { return claims.Load() == 2 })
			}
			ms, err := db.Outbox().Pending(ctx, 10)
			if err != nil || len(ms) != len(tc.outbox) {
				t.Fatalf("Pending = %d messages, %v; want %d", len(ms), err, len(tc.outbox))
			}
			// Queued due, not held by a claim: any worker may take it.
			for _, m := range ms {
				got, err := db.Outbox().Claim(ctx, "other", []string{m.Target.Platform}, 1, time.Minute)
				if err != nil || len(got) != 1 {
					t.Errorf("another worker's Claim = %d messages, %v; want the queued reply", len(got), err)
				}
			}
			select {
			case m := <-sent:
				t.Errorf("sent %+v, want nothing sent", m)
			default:
			}
		})
	}
}

// TestHandoffToAStoppedWorkerGoesBack hands claims to a delivery worker
// that has stopped: it sends nothing and gives the messages back, due at
// once, for another worker.
func TestHandoffToAStoppedWorkerGoesBack(t *testing.T) {
	sent := &scripted{}
	r := newDeliveryRig(t, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	ctx := context.Background()
	if err := r.d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	tg := outbox.Target{Platform: "telegram", Chat: "1"}
	if _, _, err := r.store.Enqueue(ctx, outbox.Message{Target: tg, Conv: "telegram:1", Text: "late"}); err != nil {
		t.Fatal(err)
	}
	claims, err := r.store.Claim(ctx, r.d.name, []string{"telegram"}, 1, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim = %d messages, %v; want 1", len(claims), err)
	}
	if h, done := r.d.Handoff([]outbox.Message{claims[0].Message}); h != nil {
		done(errNotCommitted)
		t.Errorf("a stopped worker offered a handoff")
	}
	r.d.handed(claims, 0)
	if n := sent.count(); n != 0 {
		t.Errorf("a stopped worker sent %d messages", n)
	}
	again, err := r.store.Claim(ctx, "other", []string{"telegram"}, 1, time.Minute)
	if err != nil || len(again) != 1 || again[0].ID != claims[0].ID || again[0].Attempts != 0 {
		t.Errorf("another worker's Claim = %+v, %v; want the message back, no attempt spent", again, err)
	}
}

// TestHandoffKeepsRoomForCommitsInFlight offers replies of commits still
// running: the worker promises no more than it may hold, and takes more
// once a commit returned.
func TestHandoffKeepsRoomForCommitsInFlight(t *testing.T) {
	// The loop claims once as it starts, then not for an hour: a claim
	// on its way would refuse the offers too, and wait for the commits.
	claims := &atomic.Int32{}
	counted := func(s outbox.Store) outbox.Store { return countingOutbox{Store: s, claims: claims} }
	r := newWrappedDeliveryRig(t, counted, Options{Senders: 2, PollMin: time.Hour, PollMax: time.Hour}, &adaptertest.Adapter{Name: "telegram"})
	msg := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}
	testkit.Eventually(t, "the loop's first claim", func() bool { return claims.Load() == 1 })
	offerTaken(t, r.d, msg, "once the loop's first claim ended")
	var dones []func(err error)
	for i := range 2 {
		h, done := r.d.Handoff(msg)
		if h == nil {
			t.Fatalf("offer %d refused, want room for 2 (one per sender)", i+1)
		}
		dones = append(dones, done)
	}
	if h, done := r.d.Handoff(msg); h != nil {
		done(errNotCommitted)
		t.Fatal("a third offer was taken while two commits hold the room")
	}
	dones[0](errNotCommitted)
	h, done := r.d.Handoff(msg)
	if h == nil {
		t.Fatal("an offer was refused after a commit gave its room back")
	}
	done(errNotCommitted)
	dones[1](errNotCommitted)
}

// TestHandoffTakesABurstBeyondWhatTheLoopClaims: with sends this fast,
// commits in flight hand over more replies than the claim loop may hold
// (maxHeld), since the replies are in the process already and enqueued
// due each would cost a claim; the loop keeps its own share meanwhile.
func TestHandoffTakesABurstBeyondWhatTheLoopClaims(t *testing.T) {
	// The loop claims as it starts and when woken, never on a timer: a
	// claim on its way would wait for the commits offered here.
	claims := &atomic.Int32{}
	counted := func(s outbox.Store) outbox.Store { return countingOutbox{Store: s, claims: claims} }
	sent := &scripted{}
	// A claim of an hour, so that one send slowed by a busy machine still
	// makes room for thousands.
	r := newWrappedDeliveryRig(t, counted, Options{Senders: 2, ClaimTTL: time.Hour, PollMin: time.Hour, PollMax: time.Hour},
		&adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	ctx := context.Background()
	testkit.Eventually(t, "the loop's first claim", func() bool { return claims.Load() == 1 })
	// One send timed first, so that the room is what the senders send in
	// a quarter of a claim, not one message a sender: the claim that
	// takes it, then one that finds nothing, and the loop sleeps.
	queue := NotifyingOutbox(r.store, r.d.NotifyTarget)
	if _, _, err := queue.Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "warm"}, Text: "warm"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the first message sent and settled, and the loop idle", func() bool {
		return sent.count() == 1 && claims.Load() == 3 && r.d.room.left() == maxHeld
	})

	// Each offer taken holds the handoff lock's read side until its done:
	// nothing may wake the loop from here on, whose claim would wait for
	// the write side and block the next offer.
	msg := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}
	var dones []func(err error)
	defer func() {
		for _, done := range dones {
			done(errNotCommitted)
		}
	}()
	for i := range maxHeld + 100 {
		h, done := r.d.Handoff(msg)
		if h == nil {
			t.Fatalf("offer %d refused; with sends this fast, want room for more than the loop's %d", i+1, maxHeld)
		}
		dones = append(dones, done)
	}
	if got := r.d.room.left(); got != maxHeld {
		t.Errorf("with %d replies promised, the claim loop may claim %d, want its own %d", maxHeld+100, got, maxHeld)
	}
}

// gatedOutbox holds each Claim until the test lets it go, and says on
// started (when set) that one began.
type gatedOutbox struct {
	outbox.Store
	started chan struct{}
	release chan struct{}
}

func (o gatedOutbox) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	if o.started != nil {
		o.started <- struct{}{}
	}
	<-o.release
	return o.Store.Claim(ctx, worker, platforms, max, ttl)
}

// TestHandoffWaitsForAnEarlierMessagesClaim: a message enqueued here and
// not yet claimed (a command's answer) is not passed by a commit's
// replies: until a claim that began after it ends, commits enqueue their
// replies due, behind it.
func TestHandoffWaitsForAnEarlierMessagesClaim(t *testing.T) {
	gate := gatedOutbox{started: make(chan struct{}, 1000), release: make(chan struct{})}
	gate.Store = openSQLite(t, clock.NewFake(t0)).Outbox()
	var open sync.Once
	letGo := func() { open.Do(func() { close(gate.release) }) }
	// The loop claims as it starts, then only when woken.
	r := newDeliveryRig(t, Options{Senders: 2, Outbox: gate, PollMin: time.Hour, PollMax: time.Hour}, &adaptertest.Adapter{Name: "telegram"})
	t.Cleanup(letGo) // runs before the rig's Shutdown, which claims once more
	msg := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}

	// Nothing was enqueued here: once the first claim is in the lanes (a
	// claim on its way refuses offers too), an offer is taken.
	<-gate.started
	gate.release <- struct{}{}
	offerTaken(t, r.d, msg, "with nothing waiting unclaimed")

	// A message is enqueued; every claim is held, so none ends after it.
	r.d.Notify()
	if h, done := r.d.Handoff(msg); h != nil {
		done(errNotCommitted)
		t.Fatal("an offer was taken while a message enqueued before it waits unclaimed")
	}
	letGo()
	offerTaken(t, r.d, msg, "after the loop claimed")
}

// TestHandoffWaitsUntilEveryDueMessageIsClaimed: a claim that took a full
// batch may have left the earlier message due, so offers stay refused
// until a claim takes fewer than it asked for.
func TestHandoffWaitsUntilEveryDueMessageIsClaimed(t *testing.T) {
	gate := gatedOutbox{started: make(chan struct{}, 1000), release: make(chan struct{})}
	gate.Store = openSQLite(t, clock.NewFake(t0)).Outbox()
	var open sync.Once
	letGo := func() { open.Do(func() { close(gate.release) }) }
	r := newDeliveryRig(t, Options{Senders: 2, Batch: 1, Outbox: gate}, &adaptertest.Adapter{Name: "telegram"})
	t.Cleanup(letGo)
	msg := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}
	refused := func(what string) {
		t.Helper()
		if h, done := r.d.Handoff(msg); h != nil {
			done(errNotCommitted)
			t.Fatalf("an offer was taken %s", what)
		}
	}

	<-gate.started // the first claim began before anything was enqueued
	for _, text := range []string{"answer 1", "answer 2"} {
		m := outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: text}
		if _, _, err := gate.Store.Enqueue(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	r.d.Notify()
	gate.release <- struct{}{} // the first claim, begun before the enqueue, takes one
	<-gate.started
	refused("while both answers wait")
	gate.release <- struct{}{} // the second takes the other, a full batch of one
	<-gate.started
	refused("after a full batch, which may have left a message due")
	letGo() // the third finds nothing more
	offerTaken(t, r.d, msg, "after a claim took every due message")
}

// offerTaken waits until d takes an offer of msgs.
func offerTaken(t *testing.T, d *Worker, msgs []outbox.Message, when string) {
	t.Helper()
	testkit.Eventually(t, "an offer taken "+when, func() bool {
		h, done := d.Handoff(msgs)
		if h != nil {
			done(errNotCommitted)
		}
		return h != nil
	})
}

// heldAfterClaim makes the first Claim that takes messages in the store
// wait before it returns them, until release is closed, and says on taken
// that it took them: the store has given them to the worker, and they
// are not in its lanes yet.
type heldAfterClaim struct {
	outbox.Store
	taken   chan struct{}
	release chan struct{}
	once    *sync.Once
}

func (o heldAfterClaim) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	cs, err := o.Store.Claim(ctx, worker, platforms, max, ttl)
	if len(cs) > 0 {
		o.once.Do(func() {
			close(o.taken)
			<-o.release
		})
	}
	return cs, err
}

// TestHandedRepliesDoNotPassAClaimOnItsWay: a commit's reply behind a
// message the worker's claim took is not sent before that message, even
// when the commit comes between the claim's store call and its messages
// reaching the lanes, where the store, seeing the earlier message held by
// the worker, would hand the reply over: the commit waits for the claim.
func TestHandedRepliesDoNotPassAClaimOnItsWay(t *testing.T) {
	taken, release := make(chan struct{}), make(chan struct{})
	held := func(s outbox.Store) outbox.Store {
		return heldAfterClaim{Store: s, taken: taken, release: release, once: &sync.Once{}}
	}
	sent := &scripted{}
	r := newWrappedDeliveryRig(t, held, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	var open sync.Once
	letGo := func() { open.Do(func() { close(release) }) }
	t.Cleanup(letGo) // runs before the rig's Shutdown, which claims once more

	// Enqueued by another process, which wakes no one here: the loop's
	// poll claims it.
	tg := outbox.Target{Platform: "telegram", Chat: "1"}
	if _, _, err := r.store.Enqueue(context.Background(), outbox.Message{Target: tg, Conv: "telegram:1", Text: "first"}); err != nil {
		t.Fatal(err)
	}
	<-taken
	committed := make(chan error, 1)
	go func() {
		committed <- commitConv(Sessions(r.sessions, r.d), "telegram:1", []outbox.Message{{Target: tg, Conv: "telegram:1", Text: "second"}}, false)
	}()
	letGo()
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "both messages sent", func() bool { return sent.count() == 2 })
	if got, want := sent.texts(), []string{"first", "second"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q: the reply after the message claimed before it", got, want)
	}
}

// commitTurn runs a turn of conversation telegram:1 on s and commits it
// with out, by FinishAndClaim when andClaim, else by Finish.
func commitTurn(t *testing.T, s sessions.Store, out []outbox.Message, andClaim bool) {
	t.Helper()
	if err := commitConv(s, "telegram:1", out, andClaim); err != nil {
		t.Fatal(err)
	}
}

// commitConv is commitTurn for conversation conv, off the test's
// goroutine.
func commitConv(s sessions.Store, conv string, out []outbox.Message, andClaim bool) error {
	ctx := context.Background()
	if _, err := s.Append(ctx, sessions.Inbound{Conv: conv, Text: "hello"}); err != nil {
		return err
	}
	turn, err := s.Claim(ctx, "w", 0)
	if err != nil || turn == nil {
		return fmt.Errorf("Claim = %v, %v; want a turn", turn, err)
	}
	f := sessions.Finish{EntryID: turn.Entry.ID, Outbox: out, Release: true}
	if andClaim {
		_, err = s.FinishAndClaim(ctx, turn.Lease, f, "w", 0)
	} else {
		err = s.Finish(ctx, turn.Lease, f)
	}
	return err
}

// claimsSeen holds, once, the first claim that takes the message whose
// text is hold (until release is closed), and records the texts every
// claim took.
type claimsSeen struct {
	outbox.Store
	hold    string
	taken   chan struct{}
	release chan struct{}
	once    *sync.Once
	mu      *sync.Mutex
	texts   *[]string
}

func (o claimsSeen) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	cs, err := o.Store.Claim(ctx, worker, platforms, max, ttl)
	o.mu.Lock()
	for _, c := range cs {
		*o.texts = append(*o.texts, c.Text)
	}
	o.mu.Unlock()
	if slices.ContainsFunc(cs, func(c outbox.Claimed) bool { return c.Text == o.hold }) {
		o.once.Do(func() {
			close(o.taken)
			<-o.release
		})
	}
	return cs, err
}

func (o claimsSeen) took(text string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(*o.texts, text)
}

// TestAnotherChatsReplyIsHandedOverPastABacklog: a commit's reply to one
// chat, made while the worker claims another chat's backlog queued here
// (claim after claim, the first of them on its way), is handed over by
// its commit, not queued due behind the backlog.
func TestAnotherChatsReplyIsHandedOverPastABacklog(t *testing.T) {
	seen := claimsSeen{hold: "b0", taken: make(chan struct{}), release: make(chan struct{}),
		once: &sync.Once{}, mu: &sync.Mutex{}, texts: &[]string{}}
	wrap := func(s outbox.Store) outbox.Store {
		seen.Store = s
		return seen
	}
	sent := &scripted{}
	r := newWrappedDeliveryRig(t, wrap, Options{Batch: 4}, &adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	var open sync.Once
	letGo := func() { open.Do(func() { close(seen.release) }) }
	t.Cleanup(letGo)
	ctx := context.Background()
	queue := NotifyingOutbox(r.store, r.d.NotifyTarget)

	// One send timed first, so that the worker's room is its claims' and
	// not one message a sender.
	warm := outbox.Target{Platform: "telegram", Chat: "warm"}
	if _, _, err := queue.Enqueue(ctx, outbox.Message{Target: warm, Text: "warm"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the first message sent", func() bool { return sent.count() == 1 })

	busy := outbox.Target{Platform: "telegram", Chat: "busy"}
	for i := range 20 {
		if _, _, err := queue.Enqueue(ctx, outbox.Message{Target: busy, Text: fmt.Sprintf("b%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	<-seen.taken
	committed := make(chan error, 1)
	go func() {
		committed <- commitConv(Sessions(r.sessions, r.d), "telegram:1",
			[]outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Conv: "telegram:1", Text: "reply"}}, false)
	}()
	letGo()
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "every message sent", func() bool { return sent.count() == 22 })
	if seen.took("reply") {
		t.Errorf("the reply was claimed behind the busy chat's backlog; want it handed over by its commit")
	}
	var order []string
	for _, text := range sent.texts() {
		if strings.HasPrefix(text, "b") {
			order = append(order, text)
		}
	}
	for i, text := range order {
		if want := fmt.Sprintf("b%d", i); text != want {
			t.Fatalf("the busy chat's messages went out as %q, want b0 … b19 in order", order)
		}
	}
}

// lostClaimReply carries out the first claim that takes the message whose
// text is lose and answers it with an error, as when the store's reply
// never came: the store holds the message for the worker, which never
// sees it.
type lostClaimReply struct {
	outbox.Store
	lose  string
	lost  *atomic.Bool
	calls *atomic.Int32
}

func (o lostClaimReply) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	o.calls.Add(1)
	cs, err := o.Store.Claim(ctx, worker, platforms, max, ttl)
	if err == nil && slices.ContainsFunc(cs, func(c outbox.Claimed) bool { return c.Text == o.lose }) && o.lost.CompareAndSwap(false, true) {
		return nil, errs.E("test", errs.Unavailable, "the claim's reply was lost")
	}
	return cs, err
}

// TestALostClaimsMessagesAreNotPassed: a claim carried out whose reply
// never came leaves a message held for the worker that it does not know;
// a reply to the same chat committed after is not handed over past it,
// nor claimed before it, and goes out after it once that claim ran out.
func TestALostClaimsMessagesAreNotPassed(t *testing.T) {
	lost, calls := &atomic.Bool{}, &atomic.Int32{}
	wrap := func(s outbox.Store) outbox.Store {
		return lostClaimReply{Store: s, lose: "first", lost: lost, calls: calls}
	}
	sent := &scripted{}
	r := newWrappedDeliveryRig(t, wrap, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	ctx := context.Background()
	tg := outbox.Target{Platform: "telegram", Chat: "1"}

	// Enqueued by another process: the loop's poll claims it, and loses
	// the reply.
	if _, _, err := r.store.Enqueue(ctx, outbox.Message{Target: tg, Conv: "telegram:1", Text: "first"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the claim whose reply was lost", lost.Load)
	// The worker doubts what it holds, or (were it not to) claims again.
	after := calls.Load()
	testkit.Eventually(t, "the worker's answer to the lost claim", func() bool {
		return r.d.doubt.left() > 0 || calls.Load() > after
	})
	commitTurn(t, Sessions(r.sessions, r.d), []outbox.Message{{Target: tg, Conv: "telegram:1", Text: "second"}}, false)
	// Were the reply handed over or claimed, it would be sent now.
	testkit.Eventually(t, "the reply held back or sent", func() bool { return r.d.doubt.left() > 0 || sent.count() > 0 })
	if n := sent.count(); n != 0 {
		t.Fatalf("sent %q while the lost claim held the message before it, want nothing", sent.texts())
	}
	r.clk.Advance(DefaultClaimTTL + claimMargin + time.Second)
	testkit.Eventually(t, "both messages sent", func() bool { return sent.count() == 2 })
	if got, want := sent.texts(), []string{"first", "second"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q: the reply after the message the lost claim held", got, want)
	}
}

// refusedClaim answers the first claim with the error of a server that
// refused it (out of memory), carrying out nothing.
type refusedClaim struct {
	outbox.Store
	refused *atomic.Bool
}

func (o refusedClaim) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	if o.refused.CompareAndSwap(false, true) {
		return nil, errs.Wrap("test", errs.Unavailable, errs.MarkNotRun(errors.New("OOM command not allowed")))
	}
	return o.Store.Claim(ctx, worker, platforms, max, ttl)
}

// TestARefusedClaimLeavesNothingInDoubt: a claim the store refused before
// doing anything took no message, so the worker does not hold back: a
// reply committed after is handed over and sent without waiting for any
// claim to run out.
func TestARefusedClaimLeavesNothingInDoubt(t *testing.T) {
	refused := &atomic.Bool{}
	wrap := func(s outbox.Store) outbox.Store { return refusedClaim{Store: s, refused: refused} }
	sent := &scripted{}
	r := newWrappedDeliveryRig(t, wrap, Options{}, &adaptertest.Adapter{Name: "telegram", OnSend: sent.send})
	tg := outbox.Target{Platform: "telegram", Chat: "1"}
	testkit.Eventually(t, "the refused claim", refused.Load)
	if d := r.d.doubt.left(); d > 0 {
		t.Fatalf("the worker doubts what it holds for %s after a refused claim, want not at all", d)
	}
	commitTurn(t, Sessions(r.sessions, r.d), []outbox.Message{{Target: tg, Conv: "telegram:1", Text: "reply"}}, false)
	testkit.Eventually(t, "the reply sent", func() bool { return sent.count() == 1 })
}
