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

// finishAndClaim calls FinishAndClaim and fails the case on an error.
func (f *fixture) finishAndClaim(l sessions.Lease, fin sessions.Finish, worker string) *sessions.Turn {
	f.t.Helper()
	turn, err := f.ss.FinishAndClaim(f.ctx, l, fin, worker, ttl)
	if err != nil {
		f.t.Fatalf("FinishAndClaim(%s, %s, %s): %v", l.Conv, fin.EntryID, worker, err)
	}
	return turn
}

// runFinishAndClaim checks FinishAndClaim: a Finish and a Claim in one
// step, the claim only when the finish committed.
func runFinishAndClaim(t *testing.T, b Backend) {
	t.Run("commits the finish and claims the conversation ready longest", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("held", "1"), user("held", "2"), user("first", "1"), user("second", "1"))
		turn := f.mustClaim("w1")
		if turn.Lease.Conv != "held" {
			t.Fatalf("Claim took %q, want \"held\"", turn.Lease.Conv)
		}
		hist := []chat.Message{{Role: "assistant", Content: "one", At: f.clk.Now()}}
		next := f.finishAndClaim(turn.Lease, sessions.Finish{
			EntryID: turn.Entry.ID,
			History: hist,
			Outbox:  []outbox.Message{reply("held", "one")},
			Release: true,
		}, "w1")
		if next == nil || next.Lease.Conv != "first" || next.Entry.Text != "1" {
			t.Fatalf("FinishAndClaim = %+v, want first's entry \"1\"", next)
		}
		if next.Lease.Worker != "w1" || next.Lease.Token <= 0 || !next.Lease.Expires.Equal(f.clk.Now().Add(ttl)) || next.Entry.Deliveries != 1 {
			t.Errorf("claimed lease %+v, deliveries %d; want w1's fresh lease until now+ttl, first delivery", next.Lease, next.Entry.Deliveries)
		}
		if d := cmp.Diff(hist, f.history("held"), timeOpts); d != "" {
			t.Errorf("history (-want +got):\n%s", d)
		}
		if got := outTexts(f.pending()); len(got) != 1 || got[0] != "one" {
			t.Errorf("outbox pending = %q, want the reply", got)
		}
		// Released with an entry left, "held" waits behind "second".
		var got []string
		for _, w := range []string{"w2", "w3"} {
			turn := f.mustClaim(w)
			got = append(got, turn.Lease.Conv+"/"+turn.Entry.Text)
		}
		if d := cmp.Diff([]string{"second/1", "held/2"}, got); d != "" {
			t.Errorf("claims after FinishAndClaim (-want +got):\n%s", d)
		}
		f.noClaim("w4")
		// The claimed turn is held like any other: it commits.
		f.finish(next.Lease, sessions.Finish{EntryID: next.Entry.ID, Release: true})
	})

	t.Run("nothing ready: the finish commits and nothing is claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{{Role: "assistant", Content: "one"}}, Release: true}, "w1")
		if next != nil {
			t.Fatalf("FinishAndClaim = %+v, want nil", next)
		}
		if h := f.history("c"); len(h) != 1 {
			t.Errorf("history = %+v, want the one message", h)
		}
		f.noClaim("w2")
		// Acked and released: the next entry is a new turn for anyone.
		f.appendAll(user("c", "2"))
		if d := cmp.Diff([]string{"2"}, f.drain("w2", "c")); d != "" {
			t.Errorf("entries after a new append (-want +got):\n%s", d)
		}
	})

	t.Run("the finished conversation's next entry when it alone is ready", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		f.clk.Advance(tick)
		next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, "w1")
		if next == nil || next.Lease.Conv != "c" || next.Entry.Text != "2" || next.Lease.Token <= turn.Lease.Token {
			t.Fatalf("FinishAndClaim = %+v, want c's entry \"2\" under a new token", next)
		}
		// The old lease ended with the release.
		_, err := f.ss.Next(f.ctx, turn.Lease)
		wantCode(t, "Next under the released lease", err, errs.LeaseLost)
	})

	t.Run("without release the lease is kept and another conversation claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("held", "1"), user("held", "2"), user("other", "1"))
		turn := f.mustClaim("w1")
		next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}, "w1")
		if next == nil || next.Lease.Conv != "other" {
			t.Fatalf("FinishAndClaim = %+v, want other's turn", next)
		}
		f.noClaim("w2")
		if e := f.next(turn.Lease); e == nil || e.Text != "2" {
			t.Errorf("Next under the kept lease = %+v, want \"2\"", e)
		}
	})

	t.Run("claim if left: nothing left, another conversation ready, nothing claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("other", "1"))
		turn := f.mustClaim("w1")
		if turn.Lease.Conv != "c" {
			t.Fatalf("Claim took %q, want \"c\"", turn.Lease.Conv)
		}
		next := f.finishAndClaim(turn.Lease, sessions.Finish{
			EntryID:     turn.Entry.ID,
			History:     []chat.Message{{Role: "assistant", Content: "one"}},
			Release:     true,
			ClaimIfLeft: true,
		}, "w1")
		if next != nil {
			t.Fatalf("FinishAndClaim = %+v, want nil: c has nothing left", next)
		}
		if h := f.history("c"); len(h) != 1 {
			t.Errorf("history = %+v, want the one message", h)
		}
		// The finish committed, and "other" waits for a claim of its own.
		if d := cmp.Diff([]string{"1"}, f.drain("w2", "other")); d != "" {
			t.Errorf("other's entries (-want +got):\n%s", d)
		}
		f.noClaim("w3")
	})

	t.Run("claim if left: entries left, the conversation ready longest is claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("other", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, ClaimIfLeft: true}, "w1")
		// Released with "2" left, c waits behind "other", which the claim takes.
		if next == nil || next.Lease.Conv != "other" || next.Lease.Worker != "w1" {
			t.Fatalf("FinishAndClaim = %+v, want other's turn for w1", next)
		}
		if d := cmp.Diff([]string{"2"}, f.drain("w2", "c")); d != "" {
			t.Errorf("c's entries (-want +got):\n%s", d)
		}
	})

	// Each case makes a FinishAndClaim that must fail, with a conversation
	// ready that it must not have claimed.
	for _, tc := range refusedFinishes {
		t.Run("refused, nothing claimed: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendAll(user("c", "1"))
			held := f.mustClaim("w1")
			l, fin := tc.setup(f, held)
			f.appendAll(user("waiting", "1"))
			fin.History = append(fin.History, chat.Message{Role: "assistant", Content: "late"})
			next, err := f.ss.FinishAndClaim(f.ctx, l, fin, "w1", ttl)
			wantCode(t, "FinishAndClaim", err, tc.code)
			if next != nil {
				t.Errorf("FinishAndClaim claimed %+v along with an error", next)
			}
			if h := f.history("c"); len(h) != 0 {
				t.Errorf("history = %+v, want none", h)
			}
			if p := f.pending(); len(p) != 0 {
				t.Errorf("outbox pending = %+v, want none", p)
			}
			if turn := f.claim("w3"); turn == nil || turn.Lease.Conv != "waiting" {
				t.Errorf("Claim after the refused call = %+v, want the waiting conversation", turn)
			}
		})
	}
}

// refusedFinishes are finishes a store must refuse, each with the code it
// refuses with. setup gets the turn that w1 holds on a conversation "c"
// and returns the lease and the finish to commit; a case adds what it
// checks is not written.
var refusedFinishes = []struct {
	desc  string
	setup func(f *fixture, held *sessions.Turn) (sessions.Lease, sessions.Finish)
	code  errs.Code
}{
	{
		desc: "a lost lease",
		setup: func(f *fixture, held *sessions.Turn) (sessions.Lease, sessions.Finish) {
			f.clk.Advance(ttl + time.Second)
			taken := f.mustClaim("w2")
			if taken.Lease.Conv != held.Lease.Conv {
				f.t.Fatalf("takeover claimed %q, want %q", taken.Lease.Conv, held.Lease.Conv)
			}
			return held.Lease, sessions.Finish{EntryID: held.Entry.ID, Release: true}
		},
		code: errs.LeaseLost,
	},
	{
		desc: "an entry not delivered",
		setup: func(f *fixture, held *sessions.Turn) (sessions.Lease, sessions.Finish) {
			return held.Lease, sessions.Finish{EntryID: "no-such-entry", Release: true}
		},
		code: errs.NotFound,
	},
	{
		desc: "an outbox message over the limit",
		setup: func(f *fixture, held *sessions.Turn) (sessions.Lease, sessions.Finish) {
			return held.Lease, sessions.Finish{EntryID: held.Entry.ID, Outbox: []outbox.Message{reply("c", big(sessions.DefaultMaxEntryBytes+1))}, Release: true}
		},
		code: errs.TooLarge,
	},
}
