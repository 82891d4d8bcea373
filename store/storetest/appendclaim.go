package storetest

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// appendClaim calls AppendClaim and fails the case on an error.
func (f *fixture) appendClaim(in sessions.Inbound, worker string) (sessions.AppendResult, *sessions.Turn) {
	f.t.Helper()
	r, turn, err := f.ss.AppendClaim(f.ctx, in, worker, ttl)
	if err != nil {
		f.t.Fatalf("AppendClaim(%q, %q, %s): %v", in.Conv, in.Text, worker, err)
	}
	if r.Duplicate && turn != nil {
		f.t.Fatalf("AppendClaim(%q, %q, %s) claimed a turn for a duplicate: %+v", in.Conv, in.Text, worker, turn)
	}
	return r, turn
}

// mustAppendClaim calls AppendClaim and fails the case unless it started
// the new entry's turn.
func (f *fixture) mustAppendClaim(in sessions.Inbound, worker string) (sessions.AppendResult, *sessions.Turn) {
	f.t.Helper()
	r, turn := f.appendClaim(in, worker)
	if turn == nil {
		f.t.Fatalf("AppendClaim(%q, %q, %s) = %+v and no turn, want the entry's turn", in.Conv, in.Text, worker, r)
	}
	if turn.Lease.Conv != in.Conv || turn.Entry.ID != r.EntryID {
		f.t.Fatalf("AppendClaim(%q, %q, %s) started %q's entry %q, want the new entry %q", in.Conv, in.Text, worker, turn.Lease.Conv, turn.Entry.ID, r.EntryID)
	}
	return r, turn
}

// runAppendClaim checks AppendClaim: an Append that starts the new
// entry's turn when nothing stands before it, and is a plain Append
// otherwise.
func runAppendClaim(t *testing.T, b Backend) {
	t.Run("claims an idle conversation for the new entry", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// An earlier turn leaves history and a token behind it.
		f.appendAll(user("c", "0"))
		earlier := f.mustClaim("w0")
		hist := []chat.Message{{Role: "user", Content: "0", At: f.clk.Now()}, {Role: "assistant", Content: "zero", At: f.clk.Now()}}
		f.finish(earlier.Lease, sessions.Finish{EntryID: earlier.Entry.ID, History: hist, Release: true})
		// Another conversation waiting does not stand before c's entry.
		f.appendAll(user("other", "1"))

		in := sessions.Inbound{
			Conv: "c", Sender: "u-1", MessageID: "m1", Text: "1",
			Attachments: []sessions.Attachment{{Name: "a.png", MIME: "image/png", Size: 3}},
			Meta:        map[string]string{"reply_to": "9"},
		}
		now := f.clk.Now()
		r, turn := f.mustAppendClaim(in, "w1")
		if r.Duplicate || r.EntryID == "" {
			t.Errorf("AppendClaim = %+v, want a new entry", r)
		}
		wantLease := sessions.Lease{Conv: "c", Worker: "w1", Token: turn.Lease.Token, Expires: now.Add(ttl)}
		if d := cmp.Diff(wantLease, turn.Lease, timeOpts); d != "" {
			t.Errorf("lease (-want +got):\n%s", d)
		}
		if turn.Lease.Token <= earlier.Lease.Token {
			t.Errorf("lease token %d, want more than the earlier grant's %d", turn.Lease.Token, earlier.Lease.Token)
		}
		in.Kind = sessions.KindUser
		wantEntry := sessions.Entry{Inbound: in, ID: r.EntryID, EnqueuedAt: now, Deliveries: 1}
		if d := cmp.Diff(wantEntry, turn.Entry, timeOpts); d != "" {
			t.Errorf("entry (-want +got):\n%s", d)
		}
		if !turn.HistoryRead {
			t.Errorf("HistoryRead = false, want the history with the turn")
		}
		if d := cmp.Diff(hist, turn.History, timeOpts); d != "" {
			t.Errorf("history with the turn (-want +got):\n%s", d)
		}

		// c is held: another worker's claim gets only the other
		// conversation.
		if other := f.claim("w2"); other == nil || other.Lease.Conv != "other" {
			t.Errorf("Claim(w2) = %+v, want the other conversation", other)
		}
		f.noClaim("w3")

		// The turn commits like a claimed one, and c is idle after it.
		reply := []chat.Message{{Role: "assistant", Content: "one", At: f.clk.Now()}}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: reply, Release: true})
		f.noClaim("w3")
		if d := cmp.Diff(append(hist, reply...), f.history("c"), timeOpts); d != "" {
			t.Errorf("history after the finish (-want +got):\n%s", d)
		}
		_, again := f.mustAppendClaim(user("c", "2"), "w1")
		if again.Lease.Token <= turn.Lease.Token || again.Entry.Text != "2" {
			t.Errorf("AppendClaim after the finish = %+v, want entry \"2\" under a token above %d", again, turn.Lease.Token)
		}
	})

	t.Run("claims a conversation seen for the first time", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, turn := f.mustAppendClaim(user("new", "1"), "w1")
		if turn.Lease.Token <= 0 || turn.Entry.Deliveries != 1 || !turn.HistoryRead || len(turn.History) != 0 {
			t.Errorf("turn = %+v, want a positive token, the first delivery and the empty history read", turn)
		}
		f.noClaim("w2")
		if e := f.next(turn.Lease); e == nil || e.ID != turn.Entry.ID {
			t.Errorf("Next under the lease = %+v, want the unacked entry %q", e, turn.Entry.ID)
		}
	})

	// Each case leaves something before the new entry in conversation c;
	// AppendClaim must then queue the entry as Append does and lease
	// nothing, and the conversation goes on as it would have.
	waits := []struct {
		desc  string
		setup func(f *fixture) *sessions.Turn // the lease still held, if any
		// check runs after AppendClaim queued "new": held is setup's
		// lease, newID the new entry.
		check func(f *fixture, held *sessions.Turn, newID string)
	}{
		{
			desc: "another entry queued",
			setup: func(f *fixture) *sessions.Turn {
				f.appendAll(user("c", "queued"))
				return nil
			},
			check: func(f *fixture, _ *sessions.Turn, _ string) {
				if d := cmp.Diff([]string{"queued", "new"}, f.drain("w2", "c")); d != "" {
					f.t.Errorf("entries handed out (-want +got):\n%s", d)
				}
			},
		},
		{
			desc: "a live lease with its entry unacked",
			setup: func(f *fixture) *sessions.Turn {
				f.appendAll(user("c", "held"))
				return f.mustClaim("w1")
			},
			check: func(f *fixture, held *sessions.Turn, newID string) {
				f.noClaim("w2")
				f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID})
				if e := f.next(held.Lease); e == nil || e.ID != newID {
					f.t.Errorf("Next under the held lease = %+v, want the new entry", e)
				}
			},
		},
		{
			desc: "a live lease with nothing left to do",
			setup: func(f *fixture) *sessions.Turn {
				f.appendAll(user("c", "held"))
				held := f.mustClaim("w1")
				f.finish(held.Lease, sessions.Finish{EntryID: held.Entry.ID})
				return held
			},
			check: func(f *fixture, held *sessions.Turn, newID string) {
				f.noClaim("w2")
				if e := f.next(held.Lease); e == nil || e.ID != newID {
					f.t.Errorf("Next under the held lease = %+v, want the new entry", e)
				}
			},
		},
		{
			desc: "an expired lease's entry unacked",
			setup: func(f *fixture) *sessions.Turn {
				f.appendAll(user("c", "stale"))
				f.mustClaim("w1")
				f.clk.Advance(ttl + time.Second)
				return nil
			},
			check: func(f *fixture, _ *sessions.Turn, newID string) {
				turn := f.mustClaim("w3")
				if turn.Lease.Conv != "c" || turn.Entry.Text != "stale" || turn.Entry.Deliveries != 2 {
					f.t.Errorf("Claim = %s entry %q, deliveries %d; want c's stale entry for the second time", turn.Lease.Conv, turn.Entry.Text, turn.Entry.Deliveries)
				}
				f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
				if e := f.next(turn.Lease); e == nil || e.ID != newID {
					f.t.Errorf("Next = %+v, want the new entry", e)
				}
			},
		},
	}
	for _, tc := range waits {
		t.Run("no claim with "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			held := tc.setup(f)
			r, turn := f.appendClaim(user("c", "new"), "w2")
			if turn != nil {
				t.Fatalf("AppendClaim started a turn: %+v", turn)
			}
			if r.Duplicate || r.EntryID == "" {
				t.Fatalf("AppendClaim = %+v, want a new entry", r)
			}
			tc.check(f, held, r.EntryID)
		})
	}

	t.Run("no claim for a duplicate", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		first, turn := f.mustAppendClaim(withMessageID(user("c", "first"), "m1"), "w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
		f.clk.Advance(tick)
		r, dup := f.appendClaim(withMessageID(user("c", "again"), "m1"), "w2")
		if !r.Duplicate || r.EntryID != first.EntryID || r.Meta != nil || dup != nil {
			t.Errorf("AppendClaim of a seen message id = %+v, turn %+v; want a duplicate of %q, no metadata, no turn", r, dup, first.EntryID)
		}
		f.noClaim("w3")
		// Nothing was leased: the next entry starts its turn at once.
		_, next := f.mustAppendClaim(user("c", "next"), "w2")
		if next.Lease.Token <= turn.Lease.Token {
			t.Errorf("lease token %d after the duplicate, want more than %d", next.Lease.Token, turn.Lease.Token)
		}
	})

	t.Run("the lease expires like a claimed one", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, turn := f.mustAppendClaim(user("c", "1"), "w1")
		f.clk.Advance(ttl - time.Second)
		f.noClaim("w2")
		f.clk.Advance(2 * time.Second)
		taken := f.mustClaim("w2")
		if taken.Lease.Conv != "c" || taken.Lease.Token <= turn.Lease.Token || taken.Entry.Deliveries != 2 {
			t.Errorf("Claim after the expiry = %+v, want c's entry for the second time under a new token", taken)
		}
		if d := cmp.Diff(turn.Entry, taken.Entry, timeOpts, cmpopts.IgnoreFields(sessions.Entry{}, "Deliveries")); d != "" {
			t.Errorf("entry claimed after the expiry (-appended +claimed):\n%s", d)
		}
		err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
		wantCode(t, "Finish under the expired and taken lease", err, errs.LeaseLost)
		f.finish(taken.Lease, sessions.Finish{EntryID: taken.Entry.ID, Release: true})
		f.noClaim("w3")
	})

	t.Run("returns the metadata as Append does unless it started the turn", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		r, first := f.mustAppendClaim(user("c", "1"), "w1")
		if len(r.Meta) != 0 {
			t.Errorf("AppendClaim to a conversation without metadata: Meta = %v, want none", r.Meta)
		}
		if err := f.ss.SetMeta(f.ctx, "c", sessions.ConvMetaBusyInputMode, "steer"); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
		r, turn := f.appendClaim(user("c", "2"), "w2")
		if turn != nil {
			t.Errorf("AppendClaim while c is held started a turn: %+v", turn)
		}
		want := map[string]string{
			sessions.ConvMetaBusyInputMode: "steer",
			sessions.ConvMetaTurn:          sessions.TurnMark(first.Entry.ID, t0, user("c", "1")),
		}
		if d := cmp.Diff(want, r.Meta); d != "" {
			t.Errorf("AppendClaim: Meta (-want +got):\n%s", d)
		}
		if err := f.ss.SetMeta(f.ctx, "d", sessions.ConvMetaBusyInputMode, "queue"); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
		r, _ = f.mustAppendClaim(user("d", "1"), "w2")
		if r.Meta != nil {
			t.Errorf("AppendClaim that started the turn: Meta = %v, want nil", r.Meta)
		}
	})

	t.Run("says whether a live lease held the conversation", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		held := func(what string, r sessions.AppendResult, want bool) {
			t.Helper()
			if r.Held != want {
				t.Errorf("%s: Held = %v, want %v", what, r.Held, want)
			}
		}
		held("Append of a conversation's first entry", f.append(user("a", "1")), false)
		held("Append to a queued conversation no lease holds", f.append(user("a", "2")), false)

		r, turn := f.mustAppendClaim(user("c", "1"), "w1")
		held("AppendClaim that started the turn", r, false)
		held("Append while the lease lives", f.append(user("c", "2")), true)
		r, other := f.appendClaim(user("c", "3"), "w2")
		if other != nil {
			t.Fatalf("AppendClaim while c is held started a turn: %+v", other)
		}
		held("AppendClaim of another worker while the lease lives", r, true)
		dup, _ := f.appendClaim(withMessageID(user("c", "4"), "m4"), "w2")
		again, _ := f.appendClaim(withMessageID(user("c", "4 again"), "m4"), "w2")
		if !again.Duplicate || again.EntryID != dup.EntryID {
			t.Fatalf("AppendClaim of a seen message id = %+v, want a duplicate of %q", again, dup.EntryID)
		}
		held("a duplicate", again, false)

		// Released, the conversation is held no more, though entries wait.
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
		held("Append after the release", f.append(user("c", "5")), false)

		// An expired lease holds nothing either.
		f.mustAppendClaim(user("e", "1"), "w3")
		held("Append to e while its lease lives", f.append(user("e", "2")), true)
		f.clk.Advance(ttl + time.Second)
		held("Append after the lease expired", f.append(user("e", "3")), false)
	})

	t.Run("of concurrent appends to an idle conversation, one starts the turn", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// A second handle on the same place stands for another process.
		second, _ := openStore(t, f.place, f.clk, f.lim)
		views := []sessions.Store{f.ss, second.Sessions()}
		const n = 8
		var (
			wg       sync.WaitGroup
			turns    = make([]*sessions.Turn, n)
			callErrs = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				_, turns[i], callErrs[i] = views[i%len(views)].AppendClaim(f.ctx, user("c", strconv.Itoa(i)), "w"+strconv.Itoa(i), ttl)
			})
		}
		wg.Wait()
		var started []*sessions.Turn
		for i := range n {
			if callErrs[i] != nil {
				t.Fatalf("AppendClaim %d: %v", i, callErrs[i])
			}
			if turns[i] != nil {
				started = append(started, turns[i])
			}
		}
		if len(started) != 1 {
			t.Fatalf("%d AppendClaims started a turn, want exactly one", len(started))
		}
		f.noClaim("w-idle")
		// The one turn runs the conversation's whole queue, its own entry
		// first.
		l, got := started[0].Lease, []string{}
		for e := &started[0].Entry; e != nil; e = f.next(l) {
			got = append(got, e.Text)
			f.finish(l, sessions.Finish{EntryID: e.ID})
		}
		if len(got) != n || got[0] != started[0].Entry.Text {
			t.Errorf("entries run under the turn = %q, want all %d, the turn's own first", got, n)
		}
	})

	runRefusedEntries(t, b, "AppendClaim", func(f *fixture, in sessions.Inbound) (sessions.AppendResult, error) {
		r, turn, err := f.ss.AppendClaim(f.ctx, in, "w0", ttl)
		if err != nil && turn != nil {
			f.t.Errorf("AppendClaim started a turn along with the error %v: %+v", err, turn)
		}
		return r, err
	})
}
