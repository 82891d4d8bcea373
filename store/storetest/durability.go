package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func runDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})

		// "held" has an entry delivered to w1 and not acked, with w1's
		// lease still alive across the reopen; "queued" is never claimed.
		heldIDs := f.appendAll(withMessageID(user("held", "h1"), "m-h1"), user("held", "h2"))
		held := f.mustClaim("w1")
		queuedIDs := f.appendAll(
			withMessageID(user("queued", "q1"), "m-q1"),
			synthetic("queued", "q2"),
		)
		at := f.clk.Now()
		hist := []chat.Message{
			{Role: "user", Content: "h1", At: at},
			{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Oslo"}`}}, At: at},
			{Role: "tool", ToolCallID: "call_1", Name: "weather", Content: "-3", At: at},
		}
		if err := f.ss.AppendHistory(f.ctx, held.Lease, hist...); err != nil {
			t.Fatalf("AppendHistory: %v", err)
		}
		if err := f.ss.SetMeta(f.ctx, "held", "busy_input", "queue"); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}

		keyed := reply("held", "keyed")
		keyed.IdempotencyKey = "k1"
		msgs := f.enqueueAll(keyed, reply("held", "claimed"), reply("held", "released"), reply("held", "dead"))
		cs := f.claimOutbox("d1", telegram, 10)
		if len(cs) != 4 {
			t.Fatalf("outbox Claim = %q, want all four", claimedTexts(cs))
		}
		if err := f.ob.Postpone(f.ctx, cs[0], f.clk.Now()); err != nil {
			t.Fatalf("Postpone: %v", err)
		}
		next := f.clk.Now().Add(time.Minute)
		if err := f.ob.Release(f.ctx, cs[2], next, "502 bad gateway"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := f.ob.Dead(f.ctx, cs[3], "chat not found"); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		pendingBefore, deadBefore := f.pending(), f.deadLetters()

		f.reopen(restart)

		if d := cmp.Diff(hist, f.history("held"), timeOpts); d != "" {
			t.Errorf("history after reopening (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[string]string{"busy_input": "queue"}, f.meta("held")); d != "" {
			t.Errorf("meta after reopening (-want +got):\n%s", d)
		}
		wantMessages(t, "outbox pending after reopening", f.pending(), pendingBefore)
		wantMessages(t, "dead letters after reopening", f.deadLetters(), deadBefore)
		released := msgs[2]
		released.Attempts, released.LastError = 1, "502 bad gateway"
		wantMessages(t, "outbox pending before reopening", pendingBefore, []outbox.Message{msgs[0], msgs[1], released})
		if len(deadBefore) != 1 || deadBefore[0].LastError != "chat not found" {
			t.Errorf("dead letters = %+v, want %q with its reason", deadBefore, "dead")
		}

		// Dedupe memory survived.
		if r := f.append(withMessageID(user("queued", "again"), "m-q1")); !r.Duplicate || r.EntryID != queuedIDs[0] {
			t.Errorf("Append of a seen message id after reopening = %+v, want a duplicate of %q", r, queuedIDs[0])
		}
		if r := f.append(withMessageID(user("held", "again"), "m-h1")); !r.Duplicate || r.EntryID != heldIDs[0] {
			t.Errorf("Append of a delivered message id after reopening = %+v, want a duplicate of %q", r, heldIDs[0])
		}
		if id, dup, err := f.ob.Enqueue(f.ctx, keyed); err != nil || !dup || id != msgs[0].ID {
			t.Errorf("Enqueue with a seen key after reopening = %q, %v, %v; want %q, true, nil", id, dup, err, msgs[0].ID)
		}

		// w1's lease outlived the reopen: "held" is still its own.
		turn := f.mustClaim("w2")
		if turn.Lease.Conv != "queued" || turn.Entry.ID != queuedIDs[0] {
			t.Errorf("Claim after reopening = %q %q, want the queued conversation's first entry", turn.Lease.Conv, turn.Entry.Text)
		}
		f.noClaim("w2")
		if e := f.next(held.Lease); e == nil || e.ID != heldIDs[0] {
			t.Errorf("w1's Next after reopening = %+v, want its unacked entry %q", e, heldIDs[0])
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		if e := f.next(turn.Lease); e == nil || e.ID != queuedIDs[1] {
			t.Errorf("second queued entry = %+v, want %q", e, queuedIDs[1])
		}

		// Once w1's lease runs out, its unacked entry goes to the next
		// holder as a second delivery.
		f.clk.Advance(ttl + time.Second)
		taken := f.mustClaim("w3")
		if taken.Lease.Conv != "held" || taken.Entry.ID != heldIDs[0] || taken.Entry.Deliveries < 2 {
			t.Errorf("Claim after w1's lease ran out = %q %q with %d deliveries, want held's h1 with 2 or more",
				taken.Lease.Conv, taken.Entry.Text, taken.Entry.Deliveries)
		}

		// Every pending outbox message is claimable once due.
		f.clk.Advance(time.Minute)
		if got := claimedTexts(f.claimOutbox("d2", telegram, 10)); len(got) != 3 {
			t.Errorf("outbox Claim after reopening = %q, want keyed, claimed and released", got)
		}
	})
}
