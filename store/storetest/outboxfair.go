package storetest

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// runOutboxFair holds that a claim never comes back empty while some
// target has a due message no live claim holds up, however many messages
// to another target wait behind another worker's claim.
func runOutboxFair(t *testing.T, b Backend) {
	const backlog = 1000
	// setup enqueues backlog messages to chat 100 ("0", "1", …), then one
	// to chat 200 ("other"), and has d1 claim the first of chat 100.
	setup := func(t *testing.T) (*fixture, []outbox.Claimed) {
		f := newFixture(t, b, sessions.Limits{})
		ms := make([]outbox.Message, 0, backlog+1)
		for i := range backlog {
			ms = append(ms, reply("c", strconv.Itoa(i)))
		}
		f.enqueueAll(append(ms, toChat("200", reply("d", "other")))...)
		first := f.claimOutbox("d1", telegram, 1)
		if d := cmp.Diff([]string{"0"}, claimedTexts(first)); d != "" {
			t.Fatalf("d1's Claim(1) (-want +got):\n%s", d)
		}
		return f, first
	}

	t.Run("another target's message goes past a backlog held up by another worker", func(t *testing.T) {
		f, first := setup(t)
		if d := cmp.Diff([]string{"other"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Fatalf("d2's Claim behind d1's backlog (-want +got):\n%s", d)
		}
		// d1 still takes the ones behind its own claim, in order.
		if d := cmp.Diff(numbered(1, 4), claimedTexts(f.claimOutbox("d1", telegram, 3))); d != "" {
			t.Errorf("d1's Claim behind its own (-want +got):\n%s", d)
		}
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("d2's Claim while d1 holds the backlog's head = %q, want nothing", claimedTexts(got))
		}
		if err := f.ob.Ack(f.ctx, first[0]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if got := f.claimOutbox("d2", telegram, 10); len(got) != 0 {
			t.Errorf("d2's Claim while d1 holds 1 to 3 = %q, want nothing", claimedTexts(got))
		}
	})

	t.Run("the backlog goes on, in order, once its head is delivered", func(t *testing.T) {
		f, first := setup(t)
		if d := cmp.Diff([]string{"other"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Fatalf("d2's Claim behind d1's backlog (-want +got):\n%s", d)
		}
		if err := f.ob.Ack(f.ctx, first[0]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if d := cmp.Diff(numbered(1, 6), claimedTexts(f.claimOutbox("d2", telegram, 5))); d != "" {
			t.Errorf("d2's Claim once the head is delivered (-want +got):\n%s", d)
		}
	})

	t.Run("a dead worker's backlog goes on with whoever takes its head", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const beat = 5 * time.Second
		beatAll(t, f, beat, "d1", "d2")
		ms := make([]outbox.Message, 0, backlog+1)
		for i := range backlog {
			ms = append(ms, reply("c", strconv.Itoa(i)))
		}
		f.enqueueAll(append(ms, toChat("200", reply("d", "other")))...)
		if got := f.claimOutbox("d1", telegram, 1); len(got) != 1 {
			t.Fatalf("d1's Claim(1) = %q, want one", claimedTexts(got))
		}
		if d := cmp.Diff([]string{"other"}, claimedTexts(f.claimOutbox("d2", telegram, 10))); d != "" {
			t.Fatalf("d2's Claim behind d1's backlog (-want +got):\n%s", d)
		}
		f.clk.Advance(beat + time.Second)
		beatAll(t, f, beat, "d2")
		if d := cmp.Diff(numbered(0, 5), claimedTexts(f.claimOutbox("d2", telegram, 5))); d != "" {
			t.Fatalf("d2's Claim once d1 is gone (-want +got):\n%s", d)
		}
		// Behind its own claims, d2 goes on where it left off.
		if d := cmp.Diff(numbered(5, 8), claimedTexts(f.claimOutbox("d2", telegram, 3))); d != "" {
			t.Errorf("d2's next Claim (-want +got):\n%s", d)
		}
	})
}

// numbered is the texts "from" … "to-1".
func numbered(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}
