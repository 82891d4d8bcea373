package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func runFinish(t *testing.T, b Backend) {
	t.Run("ack, history, outbox and release commit together", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		hist := []chat.Message{
			{Role: "user", Content: "1", At: f.clk.Now()},
			{Role: "assistant", Content: "one", At: f.clk.Now()},
		}
		out := []outbox.Message{reply("c", "one"), reply("c", "one, continued")}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: hist, Outbox: out, Release: true})

		if d := cmp.Diff(hist, f.history("c"), timeOpts); d != "" {
			t.Errorf("history (-want +got):\n%s", d)
		}
		pending := f.pending()
		if d := cmp.Diff([]string{"one", "one, continued"}, outTexts(pending)); d != "" {
			t.Errorf("outbox pending (-want +got):\n%s", d)
		}
		for _, m := range pending {
			if m.ID == "" || m.Conv != "c" || m.Target != out[0].Target || m.Kind != "reply" || m.Attempts != 0 {
				t.Errorf("outbox message = %+v, want an id, conversation c, the reply's target and kind, no attempts", m)
			}
		}
		// Released with an entry left: ready for anyone.
		next := f.mustClaim("w2")
		if next.Entry.Text != "2" || next.Entry.Deliveries != 1 {
			t.Errorf("next turn = %q with %d deliveries, want \"2\" with 1", next.Entry.Text, next.Entry.Deliveries)
		}
		// Delivery workers see the reply at once.
		if got := claimedTexts(f.claimOutbox("d1", []string{"telegram"}, 10)); len(got) != 2 {
			t.Errorf("outbox Claim = %q, want both replies", got)
		}
	})

	t.Run("finish writes metadata with the ack, or nothing when refused", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		for k, v := range map[string]string{"mark": `{"entry":"1"}`, "busy_input_mode": "queue", "keep": "me"} {
			if err := f.ss.SetMeta(f.ctx, "c", k, v); err != nil {
				t.Fatalf("SetMeta(%s): %v", k, err)
			}
		}
		turn := f.mustClaim("w1")
		change := map[string]string{"mark": "", "busy_input_mode": "steer", "new": "yes"}
		// Refused finishes write none of it.
		err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: "no-such-entry", Meta: change})
		wantCode(t, "Finish of an unknown entry", err, errs.NotFound)
		err = f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Meta: map[string]string{"": "x"}})
		wantCode(t, "Finish with an empty metadata key", err, errs.Invalid)
		err = f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Meta: map[string]string{"big": big(sessions.DefaultMaxEntryBytes)}})
		wantCode(t, "Finish with metadata over the limit", err, errs.TooLarge)
		before := map[string]string{"mark": `{"entry":"1"}`, "busy_input_mode": "queue", "keep": "me"}
		if d := cmp.Diff(before, f.meta("c")); d != "" {
			t.Fatalf("metadata after refused finishes (-want +got):\n%s", d)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Meta: change, Release: true})
		if d := cmp.Diff(map[string]string{"busy_input_mode": "steer", "new": "yes", "keep": "me"}, f.meta("c")); d != "" {
			t.Errorf("metadata after the finish (-want +got):\n%s", d)
		}
		// Under a lease that was lost, nothing is written either.
		next := f.mustClaim("w2")
		f.release(next.Lease)
		err = f.ss.Finish(f.ctx, next.Lease, sessions.Finish{EntryID: next.Entry.ID, Meta: map[string]string{"keep": ""}})
		wantCode(t, "Finish under a released lease", err, errs.LeaseLost)
		if got := f.meta("c")["keep"]; got != "me" {
			t.Errorf("keep = %q after a refused finish, want \"me\"", got)
		}
	})

	t.Run("finish without release keeps the lease", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{{Role: "assistant", Content: "one"}}})
		f.noClaim("w2")
		if e := f.next(turn.Lease); e == nil || e.Text != "2" {
			t.Errorf("Next = %+v, want \"2\"", e)
		}
		if h := f.history("c"); len(h) != 1 {
			t.Errorf("history = %+v, want one message", h)
		}
	})

	t.Run("finish with nothing but the ack", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		if e := f.next(turn.Lease); e != nil {
			t.Errorf("Next = %+v, want nil", e)
		}
		if h := f.history("c"); len(h) != 0 {
			t.Errorf("history = %+v, want none", h)
		}
		if p := f.pending(); len(p) != 0 {
			t.Errorf("outbox pending = %+v, want none", p)
		}
	})

	t.Run("finish honours outbox idempotency keys", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		keyed := reply("c", "the reply")
		keyed.IdempotencyKey = "c:1:reply"
		first := f.enqueueAll(keyed)
		turn := f.mustClaim("w1")
		again := keyed
		again.Text = "the reply, written again"
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{again, reply("c", "unkeyed")}})
		if d := cmp.Diff([]string{"the reply", "unkeyed"}, outTexts(f.pending())); d != "" {
			t.Errorf("outbox pending (-want +got):\n%s", d)
		}
		if p := f.pending(); len(p) > 0 && p[0].ID != first[0].ID {
			t.Errorf("keyed message id = %q, want the first one's %q", p[0].ID, first[0].ID)
		}
	})

	// Each case finishes with an entry id that names no unacked entry of
	// the held conversation; nothing of the Finish may be written. Entry
	// ids are opaque and may be unique only within a conversation, so
	// another conversation's id is no case here.
	unknown := []struct {
		desc    string
		entryID func(f *fixture, held *sessions.Turn) string
		// orCode is a second code the case accepts beside NotFound.
		orCode errs.Code
	}{
		{desc: "an id never issued", entryID: func(*fixture, *sessions.Turn) string { return "no-such-entry" }},
		{
			desc:    "an empty id",
			entryID: func(*fixture, *sessions.Turn) string { return "" },
			orCode:  errs.Invalid, // may be refused as malformed before it is looked up
		},
		{desc: "an entry already acked", entryID: func(f *fixture, held *sessions.Turn) string {
			f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID})
			return held.Entry.ID
		}},
	}
	for _, tc := range unknown {
		t.Run("unknown entry: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendAll(user("c", "1"), user("c", "2"))
			turn := f.mustClaim("w1")
			id := tc.entryID(f, turn)
			want := f.next(turn.Lease)

			err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{
				EntryID: id,
				History: []chat.Message{{Role: "assistant", Content: "reply"}},
				Outbox:  []outbox.Message{reply("c", "reply")},
				Release: true,
			})
			if tc.orCode == "" || !errs.Is(err, tc.orCode) {
				wantCode(t, "Finish", err, errs.NotFound)
			}
			if h := f.history("c"); len(h) != 0 {
				t.Errorf("history = %+v, want none", h)
			}
			if p := f.pending(); len(p) != 0 {
				t.Errorf("outbox pending = %+v, want none", p)
			}
			// Not released either: the lease still works and keeps others out.
			if e := f.next(turn.Lease); e == nil || want == nil || e.ID != want.ID {
				t.Errorf("Next after the failed Finish = %+v, want %+v", e, want)
			}
			f.noClaim("w2")
		})
	}
}

// runAbsorbed checks Finish.Absorbed: queued entries a turn took in (a
// steer) leave the queue in the same step as the ack, or not at all.
func runAbsorbed(t *testing.T, b Backend) {
	t.Run("absorbed entries leave with the ack; the rest stay in order", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(
			user("c", "1"),
			user("c", "steer a"),
			user("c", "3"),
			synthetic("c", "steer b"),
			withPriority(user("c", "steer c"), sessions.PriorityHigh),
			synthetic("c", "6"),
		)
		turn := f.mustClaim("w1")
		if turn.Entry.Text != "steer c" {
			t.Fatalf("first entry = %q, want the high-priority one", turn.Entry.Text)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		e := f.next(turn.Lease)
		if e == nil || e.Text != "1" {
			t.Fatalf("Next = %+v, want \"1\"", e)
		}
		hist := []chat.Message{{Role: "user", Content: "1"}, {Role: "user", Content: "steer a"}, {Role: "assistant", Content: "done"}}
		// Absorbed entries from two lanes, named out of order.
		f.finish(turn.Lease, sessions.Finish{
			EntryID:  e.ID,
			Absorbed: []string{ids[3], ids[1]},
			History:  hist,
			Outbox:   []outbox.Message{reply("c", "done")},
			Release:  true,
		})
		if d := cmp.Diff(hist, f.history("c"), timeOpts); d != "" {
			t.Errorf("history (-want +got):\n%s", d)
		}
		if got := outTexts(f.pending()); len(got) != 1 {
			t.Errorf("outbox pending = %q, want the one reply", got)
		}
		if d := cmp.Diff([]string{"3", "6"}, f.drain("w2", "c")); d != "" {
			t.Errorf("entries left (-want +got):\n%s", d)
		}
		f.noClaim("w3")
	})

	t.Run("nothing left: released, the conversation is not ready", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user("c", "1"), user("c", "2"), synthetic("c", "3"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Absorbed: ids[1:], Release: true})
		f.noClaim("w2")
		// It comes back with the next entry, and only that one.
		f.appendAll(user("c", "4"))
		if d := cmp.Diff([]string{"4"}, f.drain("w2", "c")); d != "" {
			t.Errorf("entries after a new append (-want +got):\n%s", d)
		}
		f.noClaim("w3")
	})

	t.Run("nothing left: kept, the lease holder finds nothing more", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Absorbed: ids[1:]})
		if e := f.next(turn.Lease); e != nil {
			t.Errorf("Next = %+v, want nil", e)
		}
		// Even once the lease runs out there is nothing to hand over.
		f.clk.Advance(ttl + time.Second)
		f.noClaim("w2")
		f.release(turn.Lease)
		f.noClaim("w2")
	})

	t.Run("an absorbed id named twice is one entry", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user("c", "1"), user("c", "2"), user("c", "3"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Absorbed: []string{ids[1], ids[1]}, Release: true})
		if d := cmp.Diff([]string{"3"}, f.drain("w2", "c")); d != "" {
			t.Errorf("entries left (-want +got):\n%s", d)
		}
	})

	// Each case names, beside a queued entry, one absorbed id that is not
	// a queued entry of the held conversation; nothing of the Finish may
	// be written, the queued entry included.
	missing := []struct {
		desc string
		id   func(f *fixture, held *sessions.Turn, ids []string) string
		// orCode is a second code the case accepts beside NotFound.
		orCode errs.Code
	}{
		{desc: "an id never issued", id: func(*fixture, *sessions.Turn, []string) string { return "no-such-entry" }},
		{desc: "an id of the right shape never issued", id: func(f *fixture, _ *sessions.Turn, _ []string) string {
			// Ids are opaque: take one the store issues later, from
			// another place that has gone further.
			g := newFixture(f.t, b, sessions.Limits{})
			var last string
			for i := range 10 {
				last = g.append(user("c", strconv.Itoa(i))).EntryID
			}
			return last
		}},
		{desc: "an empty id", id: func(*fixture, *sessions.Turn, []string) string { return "" }, orCode: errs.Invalid},
		{
			desc:   "the entry being acked",
			id:     func(_ *fixture, held *sessions.Turn, _ []string) string { return held.Entry.ID },
			orCode: errs.Invalid, // a malformed Finish rather than a missing entry
		},
		{desc: "an entry already acked", id: func(f *fixture, held *sessions.Turn, ids []string) string {
			// "0" is acked; "1" is delivered now and is the one to finish.
			f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID})
			e := f.next(held.Lease)
			*held = sessions.Turn{Lease: held.Lease, Entry: *e}
			return ids[0]
		}},
		{desc: "an entry absorbed before", id: func(f *fixture, held *sessions.Turn, ids []string) string {
			f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID, Absorbed: ids[1:2]})
			e := f.next(held.Lease)
			*held = sessions.Turn{Lease: held.Lease, Entry: *e}
			return ids[1]
		}},
	}
	for _, tc := range missing {
		t.Run("missing absorbed entry: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			ids := f.appendAll(user("c", "0"), user("c", "1"), user("c", "2"), user("c", "3"), user("c", "4"))
			turn := f.mustClaim("w1")
			held := *turn
			bad := tc.id(f, &held, ids)
			queued := ids[3]

			err := f.ss.Finish(f.ctx, held.Lease, sessions.Finish{
				EntryID:  held.Entry.ID,
				Absorbed: []string{queued, bad},
				History:  []chat.Message{{Role: "assistant", Content: "reply"}},
				Outbox:   []outbox.Message{reply("c", "reply")},
				Release:  true,
			})
			if tc.orCode == "" || !errs.Is(err, tc.orCode) {
				wantCode(t, "Finish", err, errs.NotFound)
			}
			if h := f.history("c"); len(h) != 0 {
				t.Errorf("history = %+v, want none", h)
			}
			if p := f.pending(); len(p) != 0 {
				t.Errorf("outbox pending = %+v, want none", p)
			}
			// Not acked, not released, and the queued entry still queued.
			if e := f.next(held.Lease); e == nil || e.ID != held.Entry.ID {
				t.Errorf("Next after the failed Finish = %+v, want the unacked entry %q", e, held.Entry.ID)
			}
			f.noClaim("w2")
			f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID, Release: true})
			got := f.drain("w2", "c")
			if !slices.Contains(got, "3") {
				t.Errorf("entries left = %q, want \"3\" among them", got)
			}
		})
	}

	t.Run("a lost lease absorbs nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user("c", "1"), user("c", "2"))
		stale := f.mustClaim("w1")
		f.clk.Advance(ttl + time.Second)
		taken := f.mustClaim("w2")
		err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{EntryID: stale.Entry.ID, Absorbed: ids[1:], Release: true})
		wantCode(t, "Finish under a lost lease", err, errs.LeaseLost)
		f.finish(taken.Lease, sessions.Finish{EntryID: taken.Entry.ID})
		if e := f.next(taken.Lease); e == nil || e.ID != ids[1] {
			t.Errorf("Next of the new holder = %+v, want the entry the stale Finish named, %q", e, ids[1])
		}
	})
}
