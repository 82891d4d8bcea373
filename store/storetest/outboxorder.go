package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// runOutboxOrder holds the order of a target's messages across workers,
// the end of a dead worker's claims, the resends a claim reports and the
// parts a message sent in parts keeps.
func runOutboxOrder(t *testing.T, b Backend) {
	t.Run("a target's messages wait for an earlier one another worker holds", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"), reply("c", "2"), toChat("200", reply("d", "other")), reply("c", "3"))
		if d := cmp.Diff([]string{"1"}, claimedTexts(f.claimOutbox("d1", telegram, 1))); d != "" {
			t.Fatalf("d1's Claim(1) (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"other"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Errorf("d2's Claim while d1 holds 1 (-want +got):\n%s", d)
		}
		// Behind its own claim, d1 takes the rest, in order.
		if d := cmp.Diff([]string{"2", "3"}, claimedTexts(f.claimOutbox("d1", telegram, 10))); d != "" {
			t.Errorf("d1's second Claim (-want +got):\n%s", d)
		}
	})

	t.Run("an earlier message given back until later holds the ones behind it", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"), reply("c", "2"))
		cs := f.claimOutbox("d1", telegram, 10)
		if len(cs) != 2 {
			t.Fatalf("Claim = %q, want both", claimedTexts(cs))
		}
		if err := f.ob.Release(f.ctx, cs[0], f.clk.Now().Add(time.Minute), "502"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := f.ob.Postpone(f.ctx, cs[1], f.clk.Now()); err != nil {
			t.Fatalf("Postpone: %v", err)
		}
		f.enqueueAll(reply("c", "3"))
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("Claim while 1 waits = %q, want nothing", claimedTexts(got))
		}
		f.clk.Advance(time.Minute)
		if d := cmp.Diff([]string{"1", "2", "3"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Errorf("Claim once 1 is due (-want +got):\n%s", d)
		}
	})

	t.Run("a dead letter holds nothing up", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "doomed"), reply("c", "next"))
		cs := f.claimOutbox("d1", telegram, 1)
		if len(cs) != 1 {
			t.Fatalf("Claim = %q, want doomed", claimedTexts(cs))
		}
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("Claim while doomed is held = %q, want nothing", claimedTexts(got))
		}
		if err := f.ob.Dead(f.ctx, cs[0], "403: blocked"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		if d := cmp.Diff([]string{"next"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Errorf("Claim after the dead letter (-want +got):\n%s", d)
		}
	})

	t.Run("unsent: a target's pending and claimed messages, not its acked or dead ones", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		target := reply("c", "").Target
		other := toChat("300", reply("c", "")).Target // never sent to
		threaded := target
		threaded.Thread = "7"
		unsent := func(want bool, when string) {
			t.Helper()
			for _, tc := range []struct {
				target outbox.Target
				want   bool
			}{{target, want}, {other, false}, {threaded, false}} {
				got, err := f.ob.Unsent(f.ctx, tc.target)
				if err != nil {
					t.Fatalf("Unsent(%s) %s: %v", tc.target, when, err)
				}
				if got != tc.want {
					t.Errorf("Unsent(%s) %s = %v, want %v", tc.target, when, got, tc.want)
				}
			}
		}
		unsent(false, "with nothing enqueued")
		// Another chat's message is its own.
		f.enqueueAll(toChat("200", reply("c", "elsewhere")))
		unsent(false, "with another chat's message pending")
		f.enqueueAll(reply("c", "acked"))
		unsent(true, "with a pending message")
		cs := f.claimOutbox("d1", telegram, 10)
		if d := cmp.Diff([]string{"elsewhere", "acked"}, claimedTexts(cs)); d != "" {
			t.Fatalf("Claim (-want +got):\n%s", d)
		}
		if err := f.ob.Ack(f.ctx, cs[0]); err != nil {
			t.Fatalf("Ack elsewhere: %v", err)
		}
		unsent(true, "with a claimed message")
		if err := f.ob.Ack(f.ctx, cs[1]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		unsent(false, "once it was acked")
		f.enqueueAll(reply("c", "doomed"))
		cs = f.claimOutbox("d1", telegram, 10)
		if len(cs) != 1 {
			t.Fatalf("Claim = %q, want doomed", claimedTexts(cs))
		}
		if err := f.ob.Dead(f.ctx, cs[0], "403: blocked"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		unsent(false, "with a dead letter")
		if _, err := f.ob.Unsent(f.ctx, outbox.Target{Platform: "telegram"}); !errs.Is(err, errs.Invalid) {
			t.Errorf("Unsent of a target with no chat: %v, want Invalid", err)
		}
	})

	t.Run("an expired claim goes first and is reported a resend", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"))
		first := f.claimOutbox("d1", telegram, 1)
		if len(first) != 1 || first[0].Resend {
			t.Fatalf("first Claim = %+v, want 1, not a resend", first)
		}
		f.enqueueAll(reply("c", "2"))
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("Claim while d1 holds 1 = %q, want nothing", claimedTexts(got))
		}
		f.clk.Advance(ttl + time.Second)
		cs := f.claimOutbox("d2", telegram, 10)
		if d := cmp.Diff([]string{"1", "2"}, claimedTexts(cs)); d != "" {
			t.Fatalf("Claim after d1's claim ran out (-want +got):\n%s", d)
		}
		if !cs[0].Resend || cs[1].Resend {
			t.Errorf("Resend = %v, %v; want 1's earlier claim reported, 2 fresh", cs[0].Resend, cs[1].Resend)
		}
		// A message given back is not a resend when claimed again.
		if err := f.ob.Postpone(f.ctx, cs[1], f.clk.Now()); err != nil {
			t.Fatalf("Postpone: %v", err)
		}
		if again := f.claimOutbox("d2", telegram, 10); len(again) != 1 || again[0].Resend {
			t.Errorf("Claim after Postpone = %+v, want 2, not a resend", again)
		}
	})

	t.Run("a dead worker's claims end when its heartbeat runs out", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const beat = 5 * time.Second
		beatAll(t, f, beat, "d1", "d2")
		f.enqueueAll(reply("c", "1"), toChat("200", reply("d", "alive")))
		stale := f.claimOutbox("d1", telegram, 1)
		alive := f.claimOutbox("d2", telegram, 1)
		if len(stale) != 1 || len(alive) != 1 {
			t.Fatalf("Claims = %q, %q; want one each", claimedTexts(stale), claimedTexts(alive))
		}
		f.enqueueAll(reply("c", "2"))
		// d2 beats on; d1 does not.
		f.clk.Advance(beat - time.Second)
		if err := f.ob.Beat(f.ctx, "d2", beat); err != nil {
			t.Fatalf("Beat(d2): %v", err)
		}
		if got := f.claimOutbox("d3", telegram, 10); len(got) != 0 {
			t.Errorf("Claim while d1's heartbeat holds = %q, want nothing", claimedTexts(got))
		}
		f.clk.Advance(2 * time.Second)
		if err := f.ob.Beat(f.ctx, "d3", beat); err != nil {
			t.Fatalf("Beat(d3): %v", err)
		}
		cs := f.claimOutbox("d3", telegram, 10)
		if d := cmp.Diff([]string{"1", "2"}, claimedTexts(cs)); d != "" {
			t.Fatalf("Claim after d1's heartbeat ran out, long before its claim (-want +got):\n%s", d)
		}
		if !cs[0].Resend {
			t.Errorf("the dead worker's message is not reported a resend")
		}
		wantCode(t, "the dead worker's Ack", f.ob.Ack(f.ctx, stale[0]), errs.LeaseLost)
		if err := f.ob.Ack(f.ctx, alive[0]); err != nil {
			t.Errorf("the live worker's Ack: %v", err)
		}
		// A worker whose own heartbeat ran out (it was paused) keeps its
		// claims when it claims again.
		f.clk.Advance(beat + time.Second)
		f.enqueueAll(reply("c", "3"))
		if d := cmp.Diff([]string{"3"}, claimedTexts(f.claimOutbox("d3", telegram, 10))); d != "" {
			t.Errorf("d3's Claim after its own heartbeat ran out (-want +got):\n%s", d)
		}
		if err := f.ob.Ack(f.ctx, cs[0]); err != nil {
			t.Errorf("d3's Ack after its own claim: %v", err)
		}
	})

	t.Run("a claim renews its worker's heartbeat", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const beat = 3 * time.Second
		beatAll(t, f, beat, "d1", "d2")
		// d1's beats fail, but its claim goes through: it is alive.
		f.clk.Advance(beat + time.Second)
		if err := f.ob.Beat(f.ctx, "d2", beat); err != nil {
			t.Fatalf("Beat(d2): %v", err)
		}
		f.enqueueAll(reply("c", "1"))
		cs := f.claimOutbox("d1", telegram, 1)
		if len(cs) != 1 {
			t.Fatalf("d1's Claim = %q, want 1", claimedTexts(cs))
		}
		f.clk.Advance(beat - time.Second)
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("d2's Claim within the heartbeat d1's claim renewed = %q, want nothing", claimedTexts(got))
		}
		if err := f.ob.Ack(f.ctx, cs[0]); err != nil {
			t.Errorf("d1's Ack: %v", err)
		}
	})

	t.Run("a dead worker's claims end on every platform, whoever claims", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const beat = 3 * time.Second
		if err := f.ob.Beat(f.ctx, "d1", beat); err != nil {
			t.Fatalf("Beat(d1): %v", err)
		}
		f.enqueueAll(reply("c", "1"))
		if len(f.claimOutbox("d1", telegram, 1)) != 1 {
			t.Fatal("d1's Claim took nothing")
		}
		f.clk.Advance(beat + time.Second)
		// The first claim after d1 died is for another platform only.
		if got := f.claimOutbox("d2", []string{"slack"}, 10); len(got) != 0 {
			t.Fatalf("d2's Claim of slack = %q, want nothing", claimedTexts(got))
		}
		cs := f.claimOutbox("d3", telegram, 10)
		if d := cmp.Diff([]string{"1"}, claimedTexts(cs)); d != "" {
			t.Fatalf("d3's Claim of telegram after d1 died, long before its claim ran out (-want +got):\n%s", d)
		}
		if !cs[0].Resend {
			t.Errorf("the dead worker's message is not reported a resend")
		}
	})

	t.Run("a worker that leaves keeps its claims until they run out", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		if err := f.ob.Beat(f.ctx, "d1", time.Second); err != nil {
			t.Fatalf("Beat: %v", err)
		}
		f.enqueueAll(reply("c", "1"))
		if len(f.claimOutbox("d1", telegram, 1)) != 1 {
			t.Fatal("Claim took nothing")
		}
		if err := f.ob.Beat(f.ctx, "d1", 0); err != nil {
			t.Fatalf("Beat(0): %v", err)
		}
		f.clk.Advance(10 * time.Second)
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("Claim after d1 left = %q, want nothing until its claim runs out", claimedTexts(got))
		}
		wantCode(t, "Beat without a name", f.ob.Beat(f.ctx, "", time.Second), errs.Invalid)
	})

	t.Run("the parts sent are kept with the message, under its claim", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "long"))
		c := f.claimOutbox("d1", telegram, 1)[0]
		if c.Parts != (outbox.Parts{}) {
			t.Errorf("a fresh message's Parts = %+v, want none", c.Parts)
		}
		one := outbox.Parts{Done: 1, First: "msg-1"}
		if err := f.ob.KeepParts(f.ctx, c, one); err != nil {
			t.Fatalf("KeepParts: %v", err)
		}
		two := outbox.Parts{Done: 2, First: "msg-1", Mode: "plain", Unstreamed: true}
		if err := f.ob.KeepParts(f.ctx, c, two); err != nil {
			t.Fatalf("second KeepParts: %v", err)
		}
		if p := f.pending(); len(p) != 1 || p[0].Parts != two {
			t.Errorf("Pending = %+v, want the message with parts %+v", p, two)
		}
		// The process died: the next claim, by another worker, reads them.
		f.clk.Advance(ttl + time.Second)
		again := f.claimOutbox("d2", telegram, 1)
		if len(again) != 1 || again[0].Parts != two {
			t.Fatalf("Claim after the claim ran out = %+v, want parts %+v", again, two)
		}
		wantCode(t, "KeepParts under the lost claim", f.ob.KeepParts(f.ctx, c, outbox.Parts{Done: 3}), errs.LeaseLost)
		wantCode(t, "KeepParts of a negative count", f.ob.KeepParts(f.ctx, again[0], outbox.Parts{Done: -1}), errs.Invalid)
		if err := f.ob.Release(f.ctx, again[0], f.clk.Now(), "502"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		f.clk.Advance(tick)
		last := f.claimOutbox("d2", telegram, 1)
		if len(last) != 1 || last[0].Parts != two {
			t.Fatalf("Claim after Release = %+v, want parts %+v kept", last, two)
		}
		if err := f.ob.Ack(f.ctx, last[0]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		wantCode(t, "KeepParts of a delivered message", f.ob.KeepParts(f.ctx, last[0], two), errs.NotFound)
	})
}

// beatAll beats for each of workers, ttl long.
func beatAll(t *testing.T, f *fixture, ttl time.Duration, workers ...string) {
	t.Helper()
	for _, w := range workers {
		if err := f.ob.Beat(f.ctx, w, ttl); err != nil {
			t.Fatalf("Beat(%s): %v", w, err)
		}
	}
}
