package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func runLease(t *testing.T, b Backend) {
	// Two store handles on one place stand for two gateway processes.
	for _, stores := range []int{1, 2} {
		t.Run(fmt.Sprintf("one holder among concurrent claims on %d store(s)", stores), func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			views := []sessions.Store{f.ss}
			for range stores - 1 {
				st, _ := openStore(t, f.place, f.clk, f.lim)
				views = append(views, st.Sessions())
			}
			const rounds, claimers = 5, 16
			for r := range rounds {
				// The conversations of earlier rounds stay held, so the new
				// one is the only thing to claim.
				conv := convName("race", r)
				f.append(user(conv, "hello"))
				var won atomic.Int32
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range claimers {
					wg.Go(func() {
						<-start
						turn, err := views[i%len(views)].Claim(f.ctx, fmt.Sprintf("w%d", i), ttl)
						if err != nil {
							t.Errorf("round %d: Claim(w%d): %v", r, i, err)
							return
						}
						if turn != nil {
							won.Add(1)
							if turn.Lease.Conv != conv {
								t.Errorf("round %d: w%d claimed %q, want %q", r, i, turn.Lease.Conv, conv)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				if n := won.Load(); n != 1 {
					t.Errorf("round %d: %d of %d concurrent claims got the conversation, want 1", r, n, claimers)
				}
			}
		})
	}

	t.Run("one holder among concurrent takeovers of an expired lease", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []sessions.Store{f.ss, other.Sessions()}
		f.appendAll(user("c", "1"))
		old := f.mustClaim("w0")
		f.clk.Advance(ttl + time.Second)
		const claimers = 16
		turns := make([]*sessions.Turn, claimers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Go(func() {
				<-start
				turn, err := views[i%len(views)].Claim(f.ctx, fmt.Sprintf("w%d", i+1), ttl)
				if err != nil {
					t.Errorf("Claim(w%d): %v", i+1, err)
				}
				turns[i] = turn
			})
		}
		close(start)
		wg.Wait()
		var won []*sessions.Turn
		for _, turn := range turns {
			if turn != nil {
				won = append(won, turn)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d of %d concurrent takeovers got the conversation, want 1", len(won), claimers)
		}
		if won[0].Lease.Token <= old.Lease.Token || won[0].Entry.ID != old.Entry.ID || won[0].Entry.Deliveries != 2 {
			t.Errorf("takeover = token %d, entry %q with %d deliveries; want a token above %d, entry %q with 2",
				won[0].Lease.Token, won[0].Entry.ID, won[0].Entry.Deliveries, old.Lease.Token, old.Entry.ID)
		}
	})

	t.Run("a held conversation is not claimable", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		f.mustClaim("w1")
		f.clk.Advance(ttl - time.Second)
		f.noClaim("w2")
	})

	t.Run("expires when not renewed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		old := f.mustClaim("w1")
		f.clk.Advance(ttl + time.Second)
		taken := f.mustClaim("w2")
		if taken.Lease.Conv != "c" || taken.Lease.Worker != "w2" {
			t.Fatalf("takeover lease = %+v, want conversation c held by w2", taken.Lease)
		}
		if taken.Lease.Token <= old.Lease.Token {
			t.Errorf("takeover token = %d, want more than the expired lease's %d", taken.Lease.Token, old.Lease.Token)
		}
		checkStaleLease(f, old, taken)
	})

	t.Run("kept when renewed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		l := turn.Lease
		// Renewing every TTL/3 carries the lease three TTLs past its first
		// expiry while others keep trying.
		for i := range 9 {
			f.clk.Advance(ttl / 3)
			renewed, err := f.ss.Renew(f.ctx, l, ttl)
			if err != nil {
				t.Fatalf("Renew %d: %v", i, err)
			}
			want := sessions.Lease{Conv: "c", Worker: "w1", Token: l.Token, Expires: f.clk.Now().Add(ttl)}
			if d := cmp.Diff(want, renewed, timeOpts); d != "" {
				t.Errorf("Renew %d (-want +got):\n%s", i, d)
			}
			l = renewed
			f.noClaim("w2")
		}
		f.finish(l, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
	})

	t.Run("a dead worker's entry goes to the next holder before newer entries", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(synthetic("c", "unacked"))
		dead := f.mustClaim("w1")
		// A user entry would normally go first; the unacked one still does.
		f.appendAll(user("c", "newer"))
		f.clk.Advance(ttl + time.Second)
		turn := f.mustClaim("w2")
		if turn.Entry.ID != ids[0] || turn.Entry.Text != "unacked" || turn.Entry.Deliveries != 2 {
			t.Errorf("redelivered entry = %q %q with %d deliveries, want %q \"unacked\" with 2",
				turn.Entry.ID, turn.Entry.Text, turn.Entry.Deliveries, ids[0])
		}
		if turn.Lease.Token <= dead.Lease.Token {
			t.Errorf("takeover token = %d, want more than %d", turn.Lease.Token, dead.Lease.Token)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		e := f.next(turn.Lease)
		if e == nil || e.Text != "newer" || e.Deliveries != 1 {
			t.Errorf("Next = %+v, want \"newer\" with 1 delivery", e)
		}
	})

	t.Run("release without finishing hands the entry to the next holder", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user("c", "1"), user("c", "2"))
		first := f.mustClaim("w1")
		f.release(first.Lease)
		f.clk.Advance(tick)
		turn := f.mustClaim("w2")
		if turn.Entry.ID != ids[0] || turn.Entry.Deliveries != 2 {
			t.Errorf("Claim after Release = entry %q with %d deliveries, want %q with 2", turn.Entry.ID, turn.Entry.Deliveries, ids[0])
		}
		if turn.Lease.Token <= first.Lease.Token {
			t.Errorf("new token = %d, want more than %d", turn.Lease.Token, first.Lease.Token)
		}
	})

	t.Run("a released lease can do nothing more", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
		l := turn.Lease
		_, err := f.ss.Next(f.ctx, l)
		wantCode(t, "Next after Finish with Release", err, errs.LeaseLost)
		_, err = f.ss.Renew(f.ctx, l, ttl)
		wantCode(t, "Renew after Finish with Release", err, errs.LeaseLost)
		err = f.ss.AppendHistory(f.ctx, l, chat.Message{Role: "assistant", Content: "late"})
		wantCode(t, "AppendHistory after Finish with Release", err, errs.LeaseLost)
		err = f.ss.Release(f.ctx, l)
		wantCode(t, "Release after Finish with Release", err, errs.LeaseLost)
		err = f.ss.Finish(f.ctx, l, sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{{Role: "assistant", Content: "late"}}})
		wantCode(t, "Finish after Finish with Release", err, errs.LeaseLost)
		if h := f.history("c"); len(h) != 0 {
			t.Errorf("history = %+v, want none", h)
		}
		if e := f.mustClaim("w2").Entry; e.Text != "2" {
			t.Errorf("next holder got %q, want \"2\"", e.Text)
		}
	})

	t.Run("an expired lease on an empty conversation is not claimable", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		f.clk.Advance(ttl + time.Second)
		f.noClaim("w2")
		// It is forgotten for good only until the next append.
		f.appendAll(user("c", "2"))
		if e := f.mustClaim("w2").Entry; e.Text != "2" {
			t.Errorf("Claim after a new append = %q, want \"2\"", e.Text)
		}
	})
}

// checkStaleLease checks that every method taking the lease stale, which
// has expired and been taken over by current, gives LeaseLost and writes
// nothing: the entry stays with current, no history, no outbox message, and
// current keeps its lease.
func checkStaleLease(f *fixture, stale, current *sessions.Turn) {
	f.t.Helper()
	t, ctx, l := f.t, f.ctx, stale.Lease
	late := chat.Message{Role: "assistant", Content: "late reply"}
	calls := []struct {
		desc string
		call func() error
	}{
		{"Renew", func() error { _, err := f.ss.Renew(ctx, l, ttl); return err }},
		{"Next", func() error { _, err := f.ss.Next(ctx, l); return err }},
		{"AppendHistory", func() error { return f.ss.AppendHistory(ctx, l, late) }},
		{"Finish", func() error {
			return f.ss.Finish(ctx, l, sessions.Finish{
				EntryID: stale.Entry.ID,
				History: []chat.Message{late},
				Outbox:  []outbox.Message{reply(l.Conv, "late reply")},
				Release: true,
			})
		}},
		{"Finish with only the ack", func() error {
			return f.ss.Finish(ctx, l, sessions.Finish{EntryID: stale.Entry.ID})
		}},
		{"Release", func() error { return f.ss.Release(ctx, l) }},
	}
	for _, c := range calls {
		wantCode(t, c.desc+" with the stale lease", c.call(), errs.LeaseLost)
	}

	if h := f.history(l.Conv); len(h) != 0 {
		t.Errorf("history after the stale writes = %+v, want none", h)
	}
	if p := f.pending(); len(p) != 0 {
		t.Errorf("outbox after the stale writes = %+v, want nothing pending", p)
	}
	f.noClaim("w3")
	e := f.next(current.Lease)
	if e == nil || e.ID != current.Entry.ID {
		t.Errorf("current holder's Next = %+v, want its entry %q still there", e, current.Entry.ID)
	}
}
