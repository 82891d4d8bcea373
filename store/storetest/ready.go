package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runReady checks the ready index: a conversation with work is found
// without being named, and none is forgotten or starved.
func runReady(t *testing.T, b Backend) {
	t.Run("claim on an empty store returns nil", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		turn, err := f.ss.Claim(f.ctx, "w1", ttl)
		if turn != nil || err != nil {
			t.Errorf("Claim = %+v, %v; want nil, nil", turn, err)
		}
	})

	t.Run("claim many takes up to n, ready longest first, each a lease of its own", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("a", "1"), user("b", "1"), user("a", "2"), user("c", "1"))
		claimedAt := f.clk.Now()
		turns := f.claimMany("w1", 2)
		if d := cmp.Diff([]string{"a/1", "b/1"}, convTexts(turns)); d != "" {
			t.Fatalf("ClaimMany(2) (-want +got):\n%s", d)
		}
		for _, turn := range turns {
			if turn.Lease.Worker != "w1" || turn.Lease.Token <= 0 || !turn.Lease.Expires.Equal(claimedAt.Add(ttl)) ||
				turn.Entry.Deliveries != 1 || !turn.HistoryRead {
				t.Errorf("%s's turn: lease %+v, deliveries %d, history read %v; want w1's until now+ttl, first delivery, history read",
					turn.Lease.Conv, turn.Lease, turn.Entry.Deliveries, turn.HistoryRead)
			}
		}
		// a and b are held: only c is left.
		f.clk.Advance(tick)
		if d := cmp.Diff([]string{"c/1"}, convTexts(f.claimMany("w2", 5))); d != "" {
			t.Errorf("ClaimMany(5) with one ready (-want +got):\n%s", d)
		}
		if more := f.claimMany("w3", 5); len(more) != 0 {
			t.Errorf("ClaimMany with nothing ready = %q, want none", convTexts(more))
		}
		if none := f.claimMany("w3", 0); len(none) != 0 {
			t.Errorf("ClaimMany(0) = %q, want none", convTexts(none))
		}
		// b's holder finishes with a release and b gets a new entry, then
		// the leases of a and c run out: b is ready first, then a and c
		// in the order their leases ran out.
		f.finish(turns[1].Lease, sessions.Finish{EntryID: turns[1].Entry.ID, Release: true})
		f.append(user("b", "2"))
		f.clk.Advance(ttl + time.Second)
		again := f.claimMany("w4", 5)
		if d := cmp.Diff([]string{"b/2", "a/1", "c/1"}, convTexts(again)); d != "" {
			t.Fatalf("ClaimMany after a release and two expiries (-want +got):\n%s", d)
		}
		if again[1].Entry.Deliveries != 2 || again[1].Lease.Token <= turns[0].Lease.Token {
			t.Errorf("a taken over: deliveries %d, token %d after %d; want the second delivery under a new token",
				again[1].Entry.Deliveries, again[1].Lease.Token, turns[0].Lease.Token)
		}
		_, err := f.ss.Next(f.ctx, turns[0].Lease)
		wantCode(t, "Next under the expired lease", err, errs.LeaseLost)
	})

	t.Run("append makes an unleased conversation claimable", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "hello"))
		turn := f.mustClaim("w1")
		if turn.Lease.Conv != "c" || turn.Entry.Text != "hello" {
			t.Errorf("Claim = %q %q, want c \"hello\"", turn.Lease.Conv, turn.Entry.Text)
		}
		f.noClaim("w2")
	})

	t.Run("append to a held conversation goes to its holder", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.appendAll(user("c", "2"))
		f.noClaim("w2")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		if e := f.next(turn.Lease); e == nil || e.Text != "2" {
			t.Errorf("holder's Next = %+v, want \"2\"", e)
		}
	})

	t.Run("next on an empty held conversation returns nil", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		e, err := f.ss.Next(f.ctx, turn.Lease)
		if e != nil || err != nil {
			t.Errorf("Next = %+v, %v; want nil, nil", e, err)
		}
	})

	t.Run("finish with release and nothing left leaves nothing ready", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
		f.noClaim("w2")
	})

	t.Run("release with entries left is ready behind the waiting", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c-first", "1"), user("c-first", "2"), user("b-waiting", "1"))
		turn := f.mustClaim("w1")
		if turn.Lease.Conv != "c-first" {
			t.Fatalf("Claim took %q, want the conversation ready longest, \"c-first\"", turn.Lease.Conv)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		f.clk.Advance(tick)
		f.release(turn.Lease)
		f.clk.Advance(tick)
		var got []string
		for _, w := range []string{"w2", "w3"} {
			turn := f.mustClaim(w)
			got = append(got, turn.Lease.Conv+"/"+turn.Entry.Text)
		}
		if d := cmp.Diff([]string{"b-waiting/1", "c-first/2"}, got); d != "" {
			t.Errorf("claims after the release (-want +got):\n%s", d)
		}
	})

	// The holder releasing while an entry is being appended is the moment
	// a ready index forgets a conversation: the release sees nothing left,
	// the append sees a holder. Whichever wins, the entry must be claimable.
	t.Run("an append racing a release is not forgotten", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		appender := other.Sessions()
		for round := range 30 {
			conv := convName("race", round)
			f.appendAll(user(conv, "first"))
			turn := f.mustClaim("w1")
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				<-start
				if _, err := appender.Append(f.ctx, user(conv, "second")); err != nil {
					t.Errorf("round %d: Append: %v", round, err)
				}
			})
			wg.Go(func() {
				<-start
				if err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					t.Errorf("round %d: Finish: %v", round, err)
				}
			})
			close(start)
			wg.Wait()
			f.clk.Advance(tick)
			next := f.claim("w2")
			if next == nil || next.Lease.Conv != conv || next.Entry.Text != "second" {
				t.Fatalf("round %d: Claim after the race = %+v, want %s \"second\"", round, next, conv)
			}
			f.finish(next.Lease, sessions.Finish{EntryID: next.Entry.ID, Release: true})
		}
	})

	// A whole process dying leaves many leases to expire at once, most on
	// conversations with nothing left to do. The one with work must still
	// be found by the first Claim, however many empty ones expired first.
	t.Run("an expired conversation with work behind many drained ones", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const drained = 100
		for i := range drained {
			conv := convName("drained", i)
			f.appendAll(user(conv, "1"))
			turn := f.mustClaim("w-dead")
			if turn.Lease.Conv != conv {
				t.Fatalf("Claim took %q, want %q", turn.Lease.Conv, conv)
			}
			f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		}
		f.appendAll(user("unfinished", "1"))
		dead := f.mustClaim("w-dead")
		f.clk.Advance(ttl + time.Second)
		turn := f.claim("w2")
		if turn == nil || turn.Lease.Conv != "unfinished" || turn.Entry.ID != dead.Entry.ID || turn.Entry.Deliveries != 2 {
			t.Fatalf("Claim = %+v, want the unfinished conversation's entry %q, second delivery", turn, dead.Entry.ID)
		}
		f.noClaim("w3")
	})

	t.Run("no starvation", func(t *testing.T) {
		// The names run against the expected order, so a backend that
		// breaks ties by key instead of by readiness shows.
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("zeta", "1"), user("zeta", "2"), user("zeta", "3"), user("zeta", "4"))
		f.appendAll(user("mu", "1"), user("mu", "2"))
		f.appendAll(user("alpha", "1"), user("alpha", "2"))
		var got []string
		for {
			turn := f.claim("w1")
			if turn == nil {
				break
			}
			got = append(got, turn.Lease.Conv+"/"+turn.Entry.Text)
			if len(got) > 20 {
				t.Fatalf("more turns than entries: %q", got)
			}
			f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
			f.clk.Advance(tick)
		}
		want := []string{"zeta/1", "mu/1", "alpha/1", "zeta/2", "mu/2", "alpha/2", "zeta/3", "zeta/4"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("turns (-want +got):\n%s", d)
		}
	})

	t.Run("claim takes the conversation ready longest", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c3", "1"), user("c1", "1"), user("c2", "1"), user("c3", "2"))
		var got []string
		for range 3 {
			got = append(got, f.mustClaim("w1").Lease.Conv)
		}
		if d := cmp.Diff([]string{"c3", "c1", "c2"}, got); d != "" {
			t.Errorf("claim order (-want +got):\n%s", d)
		}
		f.noClaim("w1")
	})
}
