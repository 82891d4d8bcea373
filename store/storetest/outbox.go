package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

var telegram = []string{"telegram"}

func runOutbox(t *testing.T, b Backend) {
	t.Run("enqueue and pending round-trip every field", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		full := outbox.Message{
			Target:         outbox.Target{Platform: "slack", Chat: "C123", Thread: "1712345000.000001"},
			Conv:           "slack:T1:C123",
			Text:           "**done** — see <https://example.org>\nline two ✓",
			ReplyTo:        "1712345678.000100",
			Kind:           "completion",
			IdempotencyKey: "deleg_1:done",
		}
		want := f.enqueueAll(full, reply("telegram:1", "second"), to("discord", reply("discord:9", "third")))
		got := f.pending()
		opts := cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond), cmpopts.IgnoreFields(outbox.Message{}, "NextAttempt")}
		if d := cmp.Diff(want, got, opts); d != "" {
			t.Errorf("Pending (-want +got):\n%s", d)
		}
		limited, err := f.ob.Pending(f.ctx, 2)
		if err != nil {
			t.Fatalf("Pending(2): %v", err)
		}
		if d := cmp.Diff([]string{full.Text, "second"}, outTexts(limited)); d != "" {
			t.Errorf("Pending(2) (-want +got):\n%s", d)
		}
	})

	t.Run("claim and ack", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		want := f.enqueueAll(reply("c", "1"), reply("c", "2"), reply("c", "3"))
		claimedAt := f.clk.Now()
		cs := f.claimOutbox("d1", telegram, 10)
		wantMessages(t, "Claim", claimedMessages(cs), want)
		for _, c := range cs {
			if c.Expires.Sub(claimedAt.Add(ttl)).Abs() > time.Millisecond {
				t.Errorf("claim of %q expires %v, want %v", c.Text, c.Expires, claimedAt.Add(ttl))
			}
		}
		if again := f.claimOutbox("d2", telegram, 10); len(again) != 0 {
			t.Errorf("second Claim = %q, want nothing while the first holds them", claimedTexts(again))
		}
		for _, c := range cs {
			if err := f.ob.Ack(f.ctx, c); err != nil {
				t.Fatalf("Ack(%q): %v", c.Text, err)
			}
		}
		if p := f.pending(); len(p) != 0 {
			t.Errorf("Pending after the acks = %q, want none", outTexts(p))
		}
		wantCode(t, "second Ack", f.ob.Ack(f.ctx, cs[0]), errs.NotFound)
		if d := f.deadLetters(); len(d) != 0 {
			t.Errorf("DeadLetters = %q, want none", outTexts(d))
		}
	})

	t.Run("ack all: each message on its own claim, in one call", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"), reply("c", "2"), reply("c", "3"), reply("c", "4"))
		cs := f.claimOutbox("d1", telegram, 4)
		if len(cs) != 4 {
			t.Fatalf("Claim took %d messages, want 4", len(cs))
		}
		// "2" is acked already, "3"'s claim ran out and went to d2, and one
		// claim names no message at all.
		if err := f.ob.Ack(f.ctx, cs[1]); err != nil {
			t.Fatalf("Ack(2): %v", err)
		}
		f.clk.Advance(ttl + time.Second)
		taken := f.claimOutbox("d2", telegram, 10)
		if d := cmp.Diff([]string{"1", "3", "4"}, claimedTexts(taken)); d != "" {
			t.Fatalf("d2's claim after the expiry (-want +got):\n%s", d)
		}
		ghost := outbox.Claimed{Message: outbox.Message{ID: "no-such-message"}, Token: cs[0].Token}
		batch := []outbox.Claimed{taken[0], cs[1], cs[2], ghost, taken[2]}
		acked, err := f.ob.AckAll(f.ctx, batch)
		if err != nil {
			t.Fatalf("AckAll: %v", err)
		}
		want := []errs.Code{"", errs.NotFound, errs.LeaseLost, errs.NotFound, ""}
		if len(acked) != len(want) {
			t.Fatalf("AckAll returned %d outcomes for %d messages", len(acked), len(batch))
		}
		for i, code := range want {
			if errs.CodeOf(acked[i]) != code {
				t.Errorf("AckAll outcome %d (%q) = %v, want code %q", i, batch[i].Text, acked[i], code)
			}
		}
		// Only d2's claim on "3" is left.
		if d := cmp.Diff([]string{"3"}, outTexts(f.pending())); d != "" {
			t.Errorf("Pending after AckAll (-want +got):\n%s", d)
		}
		if err := f.ob.Ack(f.ctx, taken[1]); err != nil {
			t.Errorf("Ack of 3 under d2's claim: %v", err)
		}
		if acked, err := f.ob.AckAll(f.ctx, nil); err != nil || len(acked) != 0 {
			t.Errorf("AckAll(none) = %v, %v; want nothing", acked, err)
		}
	})

	t.Run("claim takes at most max, oldest due first", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(toChat("1", reply("c", "1")), toChat("2", reply("c", "2")), toChat("3", reply("c", "3")))
		if d := cmp.Diff([]string{"1", "2"}, claimedTexts(f.claimOutbox("d1", telegram, 2))); d != "" {
			t.Errorf("Claim(max 2) (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"3"}, claimedTexts(f.claimOutbox("d2", telegram, 2))); d != "" {
			t.Errorf("second Claim (-want +got):\n%s", d)
		}
	})

	t.Run("concurrent claims never share a message", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const messages, workers = 60, 8
		for i := range messages {
			f.enqueue(toChat(convName("chat", i), reply("c", convName("m", i))))
		}
		var mu sync.Mutex
		claimedBy := map[string]string{}
		var wg sync.WaitGroup
		for w := range workers {
			worker := fmt.Sprintf("d%d", w)
			wg.Go(func() {
				for {
					cs, err := f.ob.Claim(f.ctx, worker, telegram, 4, ttl)
					if err != nil {
						t.Errorf("Claim(%s): %v", worker, err)
						return
					}
					if len(cs) == 0 {
						return
					}
					mu.Lock()
					for _, c := range cs {
						if other, ok := claimedBy[c.ID]; ok {
							t.Errorf("message %q claimed by %s and %s", c.Text, other, worker)
						}
						claimedBy[c.ID] = worker
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(claimedBy) != messages {
			t.Errorf("%d of %d messages claimed", len(claimedBy), messages)
		}
	})

	t.Run("pending lists claimed and unclaimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		want := f.enqueueAll(reply("c", "1"), reply("c", "2"))
		f.claimOutbox("d1", telegram, 1)
		wantMessages(t, "Pending", f.pending(), want)
	})

	t.Run("release counts an attempt and waits until next", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		msgs := f.enqueueAll(reply("c", "1"))
		c := f.claimOutbox("d1", telegram, 1)[0]
		next := f.clk.Now().Add(time.Minute)
		if err := f.ob.Release(f.ctx, c, next, "429 retry after 60s"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		want := msgs[0]
		want.Attempts, want.LastError = 1, "429 retry after 60s"
		pending := f.pending()
		wantMessages(t, "Pending after Release", pending, []outbox.Message{want})
		if len(pending) == 1 && pending[0].NextAttempt.Sub(next).Abs() > time.Millisecond {
			t.Errorf("NextAttempt = %v, want %v", pending[0].NextAttempt, next)
		}
		if cs := f.claimOutbox("d1", telegram, 1); len(cs) != 0 {
			t.Errorf("Claim right after Release = %q, want nothing", claimedTexts(cs))
		}
		f.clk.Advance(59 * time.Second)
		if cs := f.claimOutbox("d1", telegram, 1); len(cs) != 0 {
			t.Errorf("Claim before next = %q, want nothing", claimedTexts(cs))
		}
		f.clk.Advance(2 * time.Second)
		cs := f.claimOutbox("d2", telegram, 1)
		wantMessages(t, "Claim after next", claimedMessages(cs), []outbox.Message{want})
		if len(cs) == 1 {
			if err := f.ob.Release(f.ctx, cs[0], f.clk.Now().Add(time.Second), "timeout"); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			want.Attempts, want.LastError = 2, "timeout"
			wantMessages(t, "Pending after the second Release", f.pending(), []outbox.Message{want})
		}
	})

	t.Run("postpone spends no attempt", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		msgs := f.enqueueAll(reply("c", "1"))
		c := f.claimOutbox("d1", telegram, 1)[0]
		next := f.clk.Now().Add(time.Minute)
		if err := f.ob.Postpone(f.ctx, c, next); err != nil {
			t.Fatalf("Postpone: %v", err)
		}
		pending := f.pending()
		wantMessages(t, "Pending after Postpone", pending, msgs)
		if len(pending) == 1 && pending[0].NextAttempt.Sub(next).Abs() > time.Millisecond {
			t.Errorf("NextAttempt = %v, want %v", pending[0].NextAttempt, next)
		}
		if cs := f.claimOutbox("d1", telegram, 1); len(cs) != 0 {
			t.Errorf("Claim before next = %q, want nothing", claimedTexts(cs))
		}
		f.clk.Advance(time.Minute + time.Second)
		wantMessages(t, "Claim after next", claimedMessages(f.claimOutbox("d1", telegram, 1)), msgs)
	})

	t.Run("dead letter and requeue", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		doomed := f.enqueueAll(reply("c", "doomed"))
		c := f.claimOutbox("d1", telegram, 1)[0]
		if err := f.ob.Release(f.ctx, c, f.clk.Now(), "timeout"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		f.clk.Advance(time.Second)
		c = f.claimOutbox("d1", telegram, 1)[0]
		msgs := append(doomed, f.enqueueAll(reply("c", "fine"))...)
		if err := f.ob.Dead(f.ctx, c, "403: bot was blocked by the user"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		wantMessages(t, "Pending after Dead", f.pending(), msgs[1:])
		dead := f.deadLetters()
		if len(dead) != 1 || dead[0].ID != msgs[0].ID || dead[0].Text != "doomed" || dead[0].LastError != "403: bot was blocked by the user" {
			t.Errorf("DeadLetters = %+v, want %q with its reason", dead, msgs[0].Text)
		}
		if cs := f.claimOutbox("d1", telegram, 10); len(cs) != 1 || cs[0].ID != msgs[1].ID {
			t.Errorf("Claim = %q, want only %q: a dead message is never claimed", claimedTexts(cs), msgs[1].Text)
		}

		if err := f.ob.Requeue(f.ctx, msgs[0].ID); err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		if d := f.deadLetters(); len(d) != 0 {
			t.Errorf("DeadLetters after Requeue = %q, want none", outTexts(d))
		}
		cs := f.claimOutbox("d2", telegram, 10)
		if len(cs) != 1 || cs[0].ID != msgs[0].ID || cs[0].Attempts != 0 {
			t.Errorf("Claim after Requeue = %+v, want %q due at once with its attempts reset", cs, msgs[0].Text)
		}
		wantCode(t, "Requeue of a message that is not dead", f.ob.Requeue(f.ctx, msgs[0].ID), errs.NotFound)
		if len(cs) == 1 {
			if err := f.ob.Ack(f.ctx, cs[0]); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			wantCode(t, "Requeue of a delivered message", f.ob.Requeue(f.ctx, msgs[0].ID), errs.NotFound)
		}
		wantCode(t, "Requeue of an unknown id", f.ob.Requeue(f.ctx, "no-such-message"), errs.NotFound)
	})

	t.Run("dead letters oldest first, up to the limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"), reply("c", "2"), reply("c", "3"))
		for _, c := range f.claimOutbox("d1", telegram, 10) {
			if err := f.ob.Dead(f.ctx, c, "gone "+c.Text); err != nil {
				t.Fatalf("Dead: %v", err)
			}
			f.clk.Advance(tick)
		}
		dead, err := f.ob.DeadLetters(f.ctx, 2)
		if err != nil {
			t.Fatalf("DeadLetters(2): %v", err)
		}
		if d := cmp.Diff([]string{"1", "2"}, outTexts(dead)); d != "" {
			t.Errorf("DeadLetters(2) (-want +got):\n%s", d)
		}
		if len(dead) > 0 && dead[0].LastError != "gone 1" {
			t.Errorf("dead letter reason = %q, want \"gone 1\"", dead[0].LastError)
		}
	})

	t.Run("idempotency key dedupes", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		m := reply("c", "first")
		m.IdempotencyKey = "cron:daily:2031-03-04"
		msgs := f.enqueueAll(m)

		again := m
		again.Text = "second"
		id, dup, err := f.ob.Enqueue(f.ctx, again)
		if err != nil || !dup || id != msgs[0].ID {
			t.Errorf("Enqueue with a seen key = %q, %v, %v; want %q, true, nil", id, dup, err, msgs[0].ID)
		}
		wantMessages(t, "Pending", f.pending(), msgs)

		// Still a duplicate once delivered: the key guards against a second
		// send, not only a second queue entry.
		for _, c := range f.claimOutbox("d1", telegram, 10) {
			if err := f.ob.Ack(f.ctx, c); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
		id, dup, err = f.ob.Enqueue(f.ctx, again)
		if err != nil || !dup || id != msgs[0].ID {
			t.Errorf("Enqueue with a delivered key = %q, %v, %v; want %q, true, nil", id, dup, err, msgs[0].ID)
		}
		if p := f.pending(); len(p) != 0 {
			t.Errorf("Pending = %q, want none", outTexts(p))
		}

		// Messages without a key are never deduped.
		plain := f.enqueueAll(reply("c", "same"), reply("c", "same"))
		if plain[0].ID == plain[1].ID {
			t.Errorf("two messages without a key got one id %q", plain[0].ID)
		}
	})

	t.Run("a route without an adapter stays pending and spends nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		msgs := f.enqueueAll(reply("c", "tg1"), to("slack", reply("c", "slack1")), reply("c", "tg2"))
		if d := cmp.Diff([]string{"tg1", "tg2"}, claimedTexts(f.claimOutbox("d1", telegram, 10))); d != "" {
			t.Errorf("Claim(telegram) (-want +got):\n%s", d)
		}
		if cs := f.claimOutbox("d1", []string{"discord"}, 10); len(cs) != 0 {
			t.Errorf("Claim(discord) = %q, want nothing", claimedTexts(cs))
		}
		f.clk.Advance(time.Hour)
		wantMessages(t, "Claim(slack) later", claimedMessages(f.claimOutbox("d2", []string{"slack", "discord"}, 10)), msgs[1:2])
	})

	t.Run("an expired claim goes to another worker", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		msgs := f.enqueueAll(reply("c", "1"))
		stale := f.claimOutbox("d1", telegram, 1)[0]
		f.clk.Advance(ttl - time.Second)
		if cs := f.claimOutbox("d2", telegram, 1); len(cs) != 0 {
			t.Errorf("Claim before the claim expired = %q, want nothing", claimedTexts(cs))
		}
		f.clk.Advance(2 * time.Second)
		cs := f.claimOutbox("d2", telegram, 1)
		wantMessages(t, "Claim after the claim expired", claimedMessages(cs), msgs)
		if len(cs) != 1 {
			return
		}
		if cs[0].Token == stale.Token {
			t.Errorf("new claim token = %d, the same as the expired claim's", cs[0].Token)
		}

		wantCode(t, "stale Ack", f.ob.Ack(f.ctx, stale), errs.LeaseLost)
		wantCode(t, "stale Release", f.ob.Release(f.ctx, stale, f.clk.Now().Add(time.Hour), "stale"), errs.LeaseLost)
		wantCode(t, "stale Postpone", f.ob.Postpone(f.ctx, stale, f.clk.Now().Add(time.Hour)), errs.LeaseLost)
		wantCode(t, "stale Dead", f.ob.Dead(f.ctx, stale, "stale"), errs.LeaseLost)
		wantMessages(t, "Pending after the stale calls", f.pending(), msgs)
		if d := f.deadLetters(); len(d) != 0 {
			t.Errorf("DeadLetters = %q, want none", outTexts(d))
		}
		if err := f.ob.Ack(f.ctx, cs[0]); err != nil {
			t.Errorf("current holder's Ack: %v", err)
		}
		if p := f.pending(); len(p) != 0 {
			t.Errorf("Pending after the Ack = %q, want none", outTexts(p))
		}
	})

	// A delivery process that dies holding many claims leaves them to
	// expire together; a message of another platform whose claim expired
	// after them is due as well and must not wait for a second Claim.
	t.Run("an expired claim behind many of another platform", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const others = 300
		for i := range others {
			f.enqueue(to("slack", reply("c", convName("slack", i))))
		}
		for claimed := 0; claimed < others; {
			cs := f.claimOutbox("d-dead", []string{"slack"}, 100)
			if len(cs) == 0 {
				t.Fatalf("Claim(slack) = nothing after %d of %d", claimed, others)
			}
			claimed += len(cs)
		}
		f.clk.Advance(tick)
		msgs := f.enqueueAll(reply("c", "tg"))
		f.claimOutbox("d-dead", telegram, 1)
		f.clk.Advance(ttl + time.Second)
		wantMessages(t, "Claim(telegram) after every claim expired", claimedMessages(f.claimOutbox("d2", telegram, 10)), msgs)
	})

	t.Run("unknown message", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.enqueueAll(reply("c", "1"))
		c := f.claimOutbox("d1", telegram, 1)[0]
		ghost := c
		ghost.ID = "no-such-message"
		wantCode(t, "Ack", f.ob.Ack(f.ctx, ghost), errs.NotFound)
		wantCode(t, "Release", f.ob.Release(f.ctx, ghost, f.clk.Now(), "x"), errs.NotFound)
		wantCode(t, "Postpone", f.ob.Postpone(f.ctx, ghost, f.clk.Now()), errs.NotFound)
		wantCode(t, "Dead", f.ob.Dead(f.ctx, ghost, "x"), errs.NotFound)
		if err := f.ob.Ack(f.ctx, c); err != nil {
			t.Errorf("Ack of the real claim: %v", err)
		}
	})

	bad := []struct {
		desc   string
		target outbox.Target
	}{
		{"no platform", outbox.Target{Chat: "1"}},
		{"no chat", outbox.Target{Platform: "telegram"}},
		{"nothing", outbox.Target{}},
	}
	for _, tc := range bad {
		t.Run("bad target: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			m := reply("c", "x")
			m.Target = tc.target
			_, _, err := f.ob.Enqueue(f.ctx, m)
			wantCode(t, "Enqueue", err, errs.Invalid)
			if p := f.pending(); len(p) != 0 {
				t.Errorf("Pending = %+v, want none", p)
			}
		})
	}
}
