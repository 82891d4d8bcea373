package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// runFencing checks DESIGN.md's first hard part: a worker that stalled past
// its TTL while another took over cannot commit anything when it wakes.
func runFencing(t *testing.T, b Backend) {
	// Each case starts with conversation c holding entries "1" and "2",
	// w1's lease on it expired while "1" was unacked, one history message
	// and one outbox message written earlier. takeOver moves things on and
	// returns the lease the stale worker's rival holds now, if any; the
	// stale writes must leave everything as takeOver left it.
	cases := []struct {
		desc     string
		takeOver func(f *fixture) *sessions.Turn
		// wantNext is the entry the next reader gets: the rival's Next, or
		// a fresh worker's Claim when no one holds the conversation.
		wantNext string
	}{
		{
			desc: "taken over and held",
			takeOver: func(f *fixture) *sessions.Turn {
				return f.mustClaim("w2")
			},
			wantNext: "1",
		},
		{
			desc: "taken over, entry acked and released",
			takeOver: func(f *fixture) *sessions.Turn {
				turn := f.mustClaim("w2")
				f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
				return nil
			},
			wantNext: "2",
		},
		{
			desc: "taken over by the same worker name",
			takeOver: func(f *fixture) *sessions.Turn {
				return f.mustClaim("w1")
			},
			wantNext: "1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendAll(user("c", "1"), user("c", "2"))
			stale := f.mustClaim("w1")
			earlier := chat.Message{Role: "user", Content: "1", At: f.clk.Now()}
			if err := f.ss.AppendHistory(f.ctx, stale.Lease, earlier); err != nil {
				t.Fatalf("AppendHistory: %v", err)
			}
			queued := f.enqueueAll(reply("c", "earlier"))
			kept := f.addNotes("telegram:42", "kept")[0]
			f.clk.Advance(ttl + time.Second)
			rival := tc.takeOver(f)
			historyBefore := f.history("c")
			pendingBefore := f.pending()

			l := stale.Lease
			late := chat.Message{Role: "assistant", Content: "late"}
			err := f.ss.Finish(f.ctx, l, sessions.Finish{
				EntryID: stale.Entry.ID,
				History: []chat.Message{late},
				Outbox:  []outbox.Message{reply("c", "late")},
				Release: true,
			})
			wantCode(t, "stale Finish", err, errs.LeaseLost)
			err = f.ss.Finish(f.ctx, l, sessions.Finish{EntryID: stale.Entry.ID})
			wantCode(t, "stale Finish with only the ack", err, errs.LeaseLost)
			// A memory note and a /new's clear are written with the
			// turn, under its token, or not at all.
			notesBefore := f.notes("telegram:42")
			err = f.ss.Finish(f.ctx, l, sessions.Finish{
				EntryID:     stale.Entry.ID,
				DropHistory: sessions.DropAllHistory,
				Writes: []sessions.Write{
					notes.Add{User: "telegram:42", ID: "n_late", Text: "late"},
					notes.Remove{User: "telegram:42", ID: kept.ID},
				},
			})
			wantCode(t, "stale Finish with notes and a clear", err, errs.LeaseLost)
			wantNotes(t, "notes after the stale Finish", f.notes("telegram:42"), notesBefore)
			err = f.ss.AppendHistory(f.ctx, l, late)
			wantCode(t, "stale AppendHistory", err, errs.LeaseLost)
			err = f.ss.Release(f.ctx, l)
			wantCode(t, "stale Release", err, errs.LeaseLost)

			if d := cmp.Diff(historyBefore, f.history("c"), timeOpts); d != "" {
				t.Errorf("history changed by the stale worker (-before +after):\n%s", d)
			}
			if d := cmp.Diff([]chat.Message{earlier}, historyBefore, timeOpts); d != "" {
				t.Errorf("history (-want +got):\n%s", d)
			}
			wantMessages(t, "outbox pending after the stale writes", f.pending(), pendingBefore)
			wantMessages(t, "outbox pending", pendingBefore, queued)

			var next *sessions.Entry
			if rival != nil {
				f.noClaim("w3")
				next = f.next(rival.Lease)
			} else if turn := f.claim("w3"); turn != nil {
				next = &turn.Entry
			}
			if next == nil || next.Text != tc.wantNext {
				t.Errorf("next entry = %+v, want %q", next, tc.wantNext)
			}
		})
	}
}
