package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// handoffTTL is how long handed claims last. It differs from the lease
// ttl, so that a backend claiming for the wrong one shows.
const handoffTTL = 45 * time.Second

// everyPlatform names every platform the handoff cases send to, so that a
// delivery worker's Claim would see any of their messages.
var everyPlatform = []string{"telegram", "slack"}

// handoffCommit is one of the two calls that take a Finish.Handoff. The
// turn is what FinishAndClaim claimed; Finish claims none.
type handoffCommit struct {
	name   string
	commit func(f *fixture, l sessions.Lease, fin sessions.Finish) (*sessions.Turn, error)
}

var handoffCommits = []handoffCommit{
	{"Finish", func(f *fixture, l sessions.Lease, fin sessions.Finish) (*sessions.Turn, error) {
		return nil, f.ss.Finish(f.ctx, l, fin)
	}},
	{"FinishAndClaim", func(f *fixture, l sessions.Lease, fin sessions.Finish) (*sessions.Turn, error) {
		return f.ss.FinishAndClaim(f.ctx, l, fin, "w2", ttl)
	}},
}

// handed records what a Handoff's Claimed was given. Stores call Claimed
// before Finish returns, so the case reads it right after without a lock.
type handed struct {
	calls  int
	claims []outbox.Claimed
}

// handoff asks for the finish's messages to be claimed for worker.
func (h *handed) handoff(worker string) *sessions.Handoff {
	return &sessions.Handoff{Worker: worker, TTL: handoffTTL, Claimed: func(cs []outbox.Claimed) {
		h.calls++
		h.claims = append(h.claims, cs...)
	}}
}

// handoffTurn queues an entry in "c" and one in "other", and claims c's
// for w1: its finish is what the cases commit, and FinishAndClaim then
// has "other" to claim.
func (f *fixture) handoffTurn() *sessions.Turn {
	f.t.Helper()
	f.appendAll(user("c", "1"), user("other", "1"))
	turn := f.mustClaim("w1")
	if turn.Lease.Conv != "c" {
		f.t.Fatalf("Claim took %q, want \"c\"", turn.Lease.Conv)
	}
	return turn
}

// commitHandoff commits fin, with a handoff to d1, on turn's lease and
// returns what was handed.
func (f *fixture) commitHandoff(c handoffCommit, turn *sessions.Turn, fin sessions.Finish) *handed {
	f.t.Helper()
	h := &handed{}
	fin.EntryID, fin.Handoff = turn.Entry.ID, h.handoff("d1")
	if _, err := c.commit(f, turn.Lease, fin); err != nil {
		f.t.Fatalf("%s with a handoff: %v", c.name, err)
	}
	if h.calls != 1 {
		f.t.Fatalf("%s called Claimed %d times, want once", c.name, h.calls)
	}
	return h
}

// noOutboxClaim checks that worker's outbox Claim gets nothing now.
func (f *fixture) noOutboxClaim(worker string) {
	f.t.Helper()
	if cs := f.claimOutbox(worker, everyPlatform, 10); len(cs) != 0 {
		f.t.Errorf("outbox Claim(%s) = %q, want nothing", worker, claimedTexts(cs))
	}
}

// ackHanded acks cs with AckAll and checks that every ack went through.
func (f *fixture) ackHanded(cs []outbox.Claimed) {
	f.t.Helper()
	acked, err := f.ob.AckAll(f.ctx, cs)
	if err != nil {
		f.t.Fatalf("AckAll: %v", err)
	}
	for i, err := range acked {
		if err != nil {
			f.t.Errorf("AckAll of %q: %v", cs[i].Text, err)
		}
	}
}

// runHandoff checks Finish.Handoff: a finish enqueues its outbox messages
// that are due already claimed for the handoff's worker, as an outbox
// Claim would have claimed them, and passes the claims to Claimed once it
// has committed.
func runHandoff(t *testing.T, b Backend) {
	for _, c := range handoffCommits {
		t.Run(c.name, func(t *testing.T) { runHandoffWith(t, b, c) })
	}
}

func runHandoffWith(t *testing.T, b Backend, c handoffCommit) {
	t.Run("the due messages are handed claimed, in order", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		turn := f.handoffTurn()
		out := []outbox.Message{reply("c", "one"), to("slack", reply("c", "two")), reply("c", "three")}
		out[0].ReplyTo = "m-1"
		out[1].Kind = "notice"
		out[1].Target.Thread = "t-1"
		h := &handed{}
		next, err := c.commit(f, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Outbox: out, Release: true, Handoff: h.handoff("d1")})
		if err != nil {
			t.Fatalf("%s with a handoff: %v", c.name, err)
		}
		if h.calls != 1 {
			t.Fatalf("Claimed called %d times, want once", h.calls)
		}
		if c.name == "FinishAndClaim" && (next == nil || next.Lease.Conv != "other") {
			t.Errorf("FinishAndClaim claimed %+v, want other's turn", next)
		}
		pending := f.pending()
		if d := cmp.Diff([]string{"one", "two", "three"}, outTexts(pending)); d != "" {
			t.Fatalf("outbox pending (-want +got):\n%s", d)
		}
		// Each claim carries the message as the store keeps it: its id,
		// what the finish gave, no attempts.
		want := make([]outbox.Message, len(out))
		for i, m := range out {
			m.ID = pending[i].ID
			want[i] = m
		}
		wantMessages(t, "handed claims", claimedMessages(h.claims), want)
		for _, cl := range h.claims {
			if cl.ID == "" {
				t.Errorf("claim of %q has no message id", cl.Text)
			}
			if cl.Expires.Sub(f.clk.Now().Add(handoffTTL)).Abs() > time.Millisecond {
				t.Errorf("claim of %q expires %v, want %v", cl.Text, cl.Expires, f.clk.Now().Add(handoffTTL))
			}
		}
		// Held for d1: no other delivery worker takes them.
		f.noOutboxClaim("d2")
		f.ackHanded(h.claims)
		if p := f.pending(); len(p) != 0 {
			t.Errorf("outbox pending after the acks = %q, want none", outTexts(p))
		}
		f.noOutboxClaim("d2")
	})

	t.Run("a handed claim acks on its own", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), reply("c", "two")}})
		if len(h.claims) != 2 {
			t.Fatalf("handed %q, want both messages", claimedTexts(h.claims))
		}
		if err := f.ob.Ack(f.ctx, h.claims[1]); err != nil {
			t.Fatalf("Ack(two): %v", err)
		}
		if d := cmp.Diff([]string{"one"}, outTexts(f.pending())); d != "" {
			t.Errorf("outbox pending after acking two (-want +got):\n%s", d)
		}
		wantCode(t, "second Ack(two)", f.ob.Ack(f.ctx, h.claims[1]), errs.NotFound)
		if err := f.ob.Ack(f.ctx, h.claims[0]); err != nil {
			t.Fatalf("Ack(one): %v", err)
		}
		if p := f.pending(); len(p) != 0 {
			t.Errorf("outbox pending after the acks = %q, want none", outTexts(p))
		}
	})

	t.Run("a handed claim releases and postpones like a Claim's", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), reply("c", "two")}})
		if len(h.claims) != 2 {
			t.Fatalf("handed %q, want both messages", claimedTexts(h.claims))
		}
		retry := f.clk.Now().Add(10 * time.Second)
		if err := f.ob.Release(f.ctx, h.claims[0], retry, "429 retry after 10s"); err != nil {
			t.Fatalf("Release(one): %v", err)
		}
		if err := f.ob.Postpone(f.ctx, h.claims[1], retry); err != nil {
			t.Fatalf("Postpone(two): %v", err)
		}
		one, two := h.claims[0].Message, h.claims[1].Message
		one.Attempts, one.LastError = 1, "429 retry after 10s"
		wantMessages(t, "outbox pending after Release and Postpone", f.pending(), []outbox.Message{one, two})
		f.noOutboxClaim("d2")
		f.clk.Advance(10 * time.Second)
		cs := f.claimOutbox("d2", everyPlatform, 10)
		wantMessages(t, "outbox Claim when due again", claimedMessages(cs), []outbox.Message{one, two})
		f.ackHanded(cs)
	})

	t.Run("a handed claim that runs out goes to another worker", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one")}})
		if len(h.claims) != 1 {
			t.Fatalf("handed %q, want the message", claimedTexts(h.claims))
		}
		f.clk.Advance(handoffTTL - time.Second)
		f.noOutboxClaim("d2")
		f.clk.Advance(2 * time.Second)
		cs := f.claimOutbox("d2", everyPlatform, 10)
		wantMessages(t, "outbox Claim after the handed claim ran out", claimedMessages(cs), claimedMessages(h.claims))
		wantCode(t, "Ack under the handed claim that ran out", f.ob.Ack(f.ctx, h.claims[0]), errs.LeaseLost)
		f.ackHanded(cs)
		if p := f.pending(); len(p) != 0 {
			t.Errorf("outbox pending after d2's ack = %q, want none", outTexts(p))
		}
	})

	// A handed claim that ran out stays its holder's until someone claims
	// the message again: a slow sender that got through still acks it, or
	// gives it back, or dead-letters it. A claim for another platform
	// comes first, as it finds the lapsed claims of every platform on
	// Redis.
	t.Run("a handed claim that ran out still settles while nobody claimed again", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), reply("c", "two"), reply("c", "three")}})
		if len(h.claims) != 3 {
			t.Fatalf("handed %q, want the three messages", claimedTexts(h.claims))
		}
		f.clk.Advance(handoffTTL + time.Second)
		if cs := f.claimOutbox("d2", []string{"slack"}, 10); len(cs) != 0 {
			t.Fatalf("outbox Claim(slack) = %q, want nothing", claimedTexts(cs))
		}
		wantMessages(t, "outbox pending once the handed claims ran out", f.pending(), claimedMessages(h.claims))
		f.ackHanded(h.claims[:1])
		retry := f.clk.Now().Add(time.Hour)
		if err := f.ob.Release(f.ctx, h.claims[1], retry, "503"); err != nil {
			t.Fatalf("Release(two) under the lapsed claim: %v", err)
		}
		if err := f.ob.Dead(f.ctx, h.claims[2], "400 bad request"); err != nil {
			t.Fatalf("Dead(three) under the lapsed claim: %v", err)
		}
		two := h.claims[1].Message
		two.Attempts, two.LastError, two.NextAttempt = 1, "503", retry
		wantMessages(t, "outbox pending after the ack, the release and the dead letter", f.pending(), []outbox.Message{two})
		if d := cmp.Diff([]string{"three"}, outTexts(f.deadLetters())); d != "" {
			t.Errorf("dead letters (-want +got):\n%s", d)
		}
		f.noOutboxClaim("d2")
		f.clk.Advance(time.Hour)
		wantMessages(t, "outbox Claim when two is due again", claimedMessages(f.claimOutbox("d2", everyPlatform, 10)), []outbox.Message{two})
	})

	t.Run("a message behind an earlier one to its target waits its turn", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "queued"), toChat("200", reply("c", "elsewhere")))
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), toChat("300", reply("c", "free"))}})
		if d := cmp.Diff([]string{"free"}, claimedTexts(h.claims)); d != "" {
			t.Errorf("handed claims (-want +got):\n%s", d)
		}
		// d1, the worker handed to, claims what was queued, and the one
		// behind it in the same claim, in order.
		if d := cmp.Diff([]string{"queued", "elsewhere", "one"}, claimedTexts(f.claimOutbox("d1", everyPlatform, 10))); d != "" {
			t.Errorf("outbox Claim (-want +got):\n%s", d)
		}
	})

	t.Run("a message behind the worker's own claim is handed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "queued"))
		if d := cmp.Diff([]string{"queued"}, claimedTexts(f.claimOutbox("d1", everyPlatform, 10))); d != "" {
			t.Fatalf("outbox Claim (-want +got):\n%s", d)
		}
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one")}})
		if d := cmp.Diff([]string{"one"}, claimedTexts(h.claims)); d != "" {
			t.Errorf("handed claims (-want +got):\n%s", d)
		}
	})

	t.Run("a message due later is enqueued, not handed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// To a target of its own: behind "one", it would wait for it.
		later := toChat("200", reply("c", "later"))
		later.NextAttempt = f.clk.Now().Add(10 * time.Second)
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), later, reply("c", "three")}})
		if d := cmp.Diff([]string{"one", "three"}, claimedTexts(h.claims)); d != "" {
			t.Errorf("handed claims (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"one", "later", "three"}, outTexts(f.pending())); d != "" {
			t.Errorf("outbox pending (-want +got):\n%s", d)
		}
		f.noOutboxClaim("d2")
		// Due while the handed claims still hold: only it is claimed.
		f.clk.Advance(10 * time.Second)
		if d := cmp.Diff([]string{"later"}, claimedTexts(f.claimOutbox("d2", everyPlatform, 10))); d != "" {
			t.Errorf("outbox Claim when due (-want +got):\n%s", d)
		}
	})

	t.Run("a message whose idempotency key was seen is neither handed nor enqueued again", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// To a target of its own: the messages behind it would wait for it.
		first := toChat("200", reply("c", "first"))
		first.IdempotencyKey = "k1"
		f.enqueue(first)
		dup := reply("c", "dup of first")
		dup.IdempotencyKey = "k1"
		three := reply("c", "three")
		three.IdempotencyKey = "k3"
		again := reply("c", "dup of three")
		again.IdempotencyKey = "k3"
		h := f.commitHandoff(c, f.handoffTurn(), sessions.Finish{Outbox: []outbox.Message{reply("c", "one"), dup, three, again}})
		if d := cmp.Diff([]string{"one", "three"}, claimedTexts(h.claims)); d != "" {
			t.Errorf("handed claims (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"first", "one", "three"}, outTexts(f.pending())); d != "" {
			t.Errorf("outbox pending (-want +got):\n%s", d)
		}
		// The message enqueued before is not held by the handoff.
		if d := cmp.Diff([]string{"first"}, claimedTexts(f.claimOutbox("d2", everyPlatform, 10))); d != "" {
			t.Errorf("outbox Claim (-want +got):\n%s", d)
		}
	})

	for _, tc := range refusedFinishes {
		t.Run("refused, nothing handed or enqueued: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendAll(user("c", "1"))
			l, fin := tc.setup(f, f.mustClaim("w1"))
			h := &handed{}
			fin.Outbox = append(fin.Outbox, reply("c", "one"), reply("c", "two"))
			fin.Handoff = h.handoff("d1")
			_, err := c.commit(f, l, fin)
			wantCode(t, c.name, err, tc.code)
			if h.calls != 0 {
				t.Errorf("Claimed called %d times with %q, want never", h.calls, claimedTexts(h.claims))
			}
			if p := f.pending(); len(p) != 0 {
				t.Errorf("outbox pending = %q, want none", outTexts(p))
			}
		})
	}

	t.Run("without a handoff nothing is claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		turn := f.handoffTurn()
		if _, err := c.commit(f, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{reply("c", "one"), reply("c", "two")}}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d := cmp.Diff([]string{"one", "two"}, claimedTexts(f.claimOutbox("d2", everyPlatform, 10))); d != "" {
			t.Errorf("outbox Claim (-want +got):\n%s", d)
		}
	})

	// With nothing to enqueue there is nothing to hand: a store may call
	// Claimed with no claims, or not at all, as the worker has nothing to
	// send either way.
	t.Run("a handoff without outbox messages hands nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		turn := f.handoffTurn()
		h := &handed{}
		fin := sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{{Role: "assistant", Content: "one"}}, Handoff: h.handoff("d1")}
		if _, err := c.commit(f, turn.Lease, fin); err != nil {
			t.Fatalf("%s with a handoff: %v", c.name, err)
		}
		if h.calls > 1 || len(h.claims) != 0 {
			t.Errorf("Claimed called %d times with %q, want at most once with none", h.calls, claimedTexts(h.claims))
		}
		if h := f.history("c"); len(h) != 1 {
			t.Errorf("history = %+v, want the one message", h)
		}
	})
}
