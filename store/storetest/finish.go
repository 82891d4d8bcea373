package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func runFinish(t *testing.T, b Backend) {
	t.Run("ack, history, outbox and release commit together", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		hist := []sessions.Message{
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

	t.Run("finish without release keeps the lease", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: []sessions.Message{{Role: "assistant", Content: "one"}}})
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
				History: []sessions.Message{{Role: "assistant", Content: "reply"}},
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
