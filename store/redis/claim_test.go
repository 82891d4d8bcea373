package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// openShards opens a store of n shards on its own server, on a fake
// clock.
func openShards(t *testing.T, n int) (*DB, *clock.Fake) {
	t.Helper()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(epoch)
	db, err := Open(context.Background(), Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk, Shards: n})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk
}

// convsApart returns n conversations of n different shards.
func convsApart(t *testing.T, db *DB, n int) []string {
	t.Helper()
	var out []string
	seen := map[int]bool{}
	for i := 0; len(out) < n && i < 10000; i++ {
		c := "c" + strconv.Itoa(i)
		if s := db.shards.of(c); !seen[s] {
			seen[s] = true
			out = append(out, c)
		}
	}
	if len(out) < n {
		t.Fatalf("found %d conversations of different shards, want %d", len(out), n)
	}
	return out
}

// A commit that claims the next turn takes the conversation ready
// longest whichever shard it is in: another shard's (the script answers
// ELSEWHERE and the store claims there), its own when that one is older,
// and its own when another claim took the other's meanwhile.
func TestFinishAndClaimAcrossShards(t *testing.T) {
	ctx := context.Background()
	db, clk := openShards(t, 4)
	ss := db.Sessions()
	c := convsApart(t, db, 3)
	a, b, other := c[0], c[1], c[2]
	const ttl = time.Minute
	tick := func() { clk.Advance(time.Millisecond) }

	mustAppend(t, ss, sessions.Inbound{Conv: a, Text: "a1"})
	tick()
	mustAppend(t, ss, sessions.Inbound{Conv: b, Text: "b1"})
	tick()
	mustAppend(t, ss, sessions.Inbound{Conv: a, Text: "a2"})
	tick()
	turn := mustClaim(t, ss, "w", ttl)
	if turn.Lease.Conv != a {
		t.Fatalf("Claim took %s, want %s, ready longest", turn.Lease.Conv, a)
	}
	// a is ready again at now, behind b.
	next, err := ss.FinishAndClaim(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, "w", ttl)
	if err != nil || next == nil || next.Lease.Conv != b {
		t.Fatalf("FinishAndClaim = %+v, %v; want b's turn, of another shard and ready longer", next, err)
	}
	tick()
	// b's shard has nothing left; a's (another shard) is claimed.
	next2, err := ss.FinishAndClaim(ctx, next.Lease, sessions.Finish{EntryID: next.Entry.ID, Release: true}, "w", ttl)
	if err != nil || next2 == nil || next2.Lease.Conv != a || next2.Entry.Text != "a2" {
		t.Fatalf("FinishAndClaim = %+v, %v; want a's second entry", next2, err)
	}
	tick()

	// A conversation of its own shard, ready before the other shard's,
	// is claimed by the commit itself.
	d := ""
	for i := 0; d == ""; i++ {
		if n := "d" + strconv.Itoa(i); db.shards.of(n) == db.shards.of(a) {
			d = n
		}
	}
	mustAppend(t, ss, sessions.Inbound{Conv: d, Text: "d1"})
	tick()
	mustAppend(t, ss, sessions.Inbound{Conv: other, Text: "o1"})
	tick()
	next3, err := ss.FinishAndClaim(ctx, next2.Lease, sessions.Finish{EntryID: next2.Entry.ID, Release: true}, "w", ttl)
	if err != nil || next3 == nil || next3.Lease.Conv != d {
		t.Fatalf("FinishAndClaim = %+v, %v; want d's turn, ready before the other shard's", next3, err)
	}

	// The other shard's conversation was taken after the commit was
	// told of it: the commit's own shard is asked last.
	heads, err := db.peekReady(ctx, "test", 1, db.shards.of(a))
	if err != nil || len(heads) != 1 {
		t.Fatalf("peekReady = %+v, %v; want the other shard's head", heads, err)
	}
	mustAppend(t, ss, sessions.Inbound{Conv: a, Text: "a3"})
	tick()
	if t2 := mustClaim(t, ss, "w2", ttl); t2.Lease.Conv != other {
		t.Fatalf("Claim took %s, want %s", t2.Lease.Conv, other)
	}
	got, err := ss.(*sessionStore).claimHeads(ctx, "test", append(heads, readyHead{shard: db.shards.of(a), score: 1 << 62}), "w", 1, ttl)
	if err != nil || len(got) != 1 || got[0].Lease.Conv != a {
		t.Fatalf("claimHeads = %+v, %v; want a's turn, from the shard asked last", got, err)
	}
}

// ClaimMany fills n from every shard, ready longest first, and
// QueueDepth counts every shard's entries up to its limit.
func TestClaimManyAndDepthAcrossShards(t *testing.T) {
	ctx := context.Background()
	db, clk := openShards(t, 4)
	ss := db.Sessions()
	c := convsApart(t, db, 4)
	var want []string
	for round := range 2 {
		for _, conv := range c {
			mustAppend(t, ss, sessions.Inbound{Conv: conv, Text: conv + "/" + strconv.Itoa(round)})
			clk.Advance(time.Millisecond)
			if round == 0 {
				want = append(want, conv)
			}
		}
	}
	for limit, depth := range map[int]int{1: 1, 5: 5, 8: 8, 100: 8} {
		if n, err := ss.QueueDepth(ctx, limit); err != nil || n != depth {
			t.Errorf("QueueDepth(%d) = %d, %v; want %d", limit, n, err, depth)
		}
	}
	turns, err := ss.ClaimMany(ctx, "w", 3, time.Minute)
	if err != nil || len(turns) != 3 {
		t.Fatalf("ClaimMany(3) = %d turns, %v; want 3", len(turns), err)
	}
	for i, turn := range turns {
		if turn.Lease.Conv != want[i] {
			t.Errorf("turn %d is %s's, want %s's (ready longest first)", i, turn.Lease.Conv, want[i])
		}
	}
	more, err := ss.ClaimMany(ctx, "w", 5, time.Minute)
	if err != nil || len(more) != 1 || more[0].Lease.Conv != want[3] {
		t.Fatalf("ClaimMany(5) = %d turns, %v; want the one conversation not held, %s", len(more), err, want[3])
	}
}

// On the server's clock a claim reads the store's time with the heads
// (TIME) and finds what is due by it.
func TestClaimAcrossShardsOnTheServersClock(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	db, err := Open(ctx, Options{URL: r.URL(), Prefix: r.Prefix(), Shards: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	ss := db.Sessions()
	c := convsApart(t, db, 2)
	mustAppend(t, ss, sessions.Inbound{Conv: c[0], Text: "1"})
	time.Sleep(2 * time.Millisecond)
	mustAppend(t, ss, sessions.Inbound{Conv: c[1], Text: "1"})
	turn := mustClaim(t, ss, "w", time.Minute)
	if turn.Lease.Conv != c[0] {
		t.Fatalf("Claim took %s, want %s", turn.Lease.Conv, c[0])
	}
	next, err := ss.FinishAndClaim(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, "w", time.Minute)
	if err != nil || next == nil || next.Lease.Conv != c[1] {
		t.Fatalf("FinishAndClaim = %+v, %v; want %s's turn", next, err, c[1])
	}
	if more, err := ss.Claim(ctx, "w", time.Minute); err != nil || more != nil {
		t.Fatalf("Claim with nothing ready = %+v, %v; want nil", more, err)
	}
}
