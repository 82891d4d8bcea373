package redis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

func TestOldestFirst(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		order []int
		times [][]dispatched
		n     int
		want  []int
	}{
		{"none pending", []int{0, 1}, [][]dispatched{nil, nil}, 3, nil},
		{"merged by time", []int{0, 1, 2}, [][]dispatched{{{1, 0}, {4, 0}}, {{2, 0}, {3, 0}}, {{5, 0}}}, 10, []int{0, 1, 1, 0, 2}},
		{"bounded by n", []int{0, 1}, [][]dispatched{{{1, 0}, {2, 0}, {3, 0}}, {{1, 0}}}, 2, []int{0, 1}},
		{"one millisecond by sequence", []int{0, 1}, [][]dispatched{{{7, 2}}, {{7, 1}, {7, 3}}}, 3, []int{1, 0, 1}},
		{"a tie goes to the shard first in order", []int{1, 0}, [][]dispatched{{{7, 0}}, {{7, 0}}}, 1, []int{1}},
		{"a shard's own order is kept", []int{0, 1}, [][]dispatched{{{5, 0}, {1, 0}}, {{3, 0}}}, 3, []int{1, 0, 0}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if d := cmp.Diff(tc.want, oldestFirst(tc.order, tc.times, tc.n)); d != "" {
				t.Errorf("oldestFirst (-want +got):\n%s", d)
			}
		})
	}
}

func TestShardMemo(t *testing.T) {
	var m shardMemo
	m.put("first", 3)
	for i := range memoSize - 1 {
		m.put(fmt.Sprint("a", i), 1)
	}
	// A full generation moves to the old one, which still answers, and
	// an id read from it moves up to the new.
	m.put("b", 2)
	if i, ok := m.get("first"); !ok || i != 3 {
		t.Errorf("get(first) = %d, %v; want 3 from the older generation", i, ok)
	}
	for i := range memoSize - 1 {
		m.put(fmt.Sprint("c", i), 1)
	}
	if _, ok := m.get("a0"); ok {
		t.Errorf("get(a0) found an id two generations old")
	}
	if i, ok := m.get("first"); !ok || i != 3 {
		t.Errorf("get(first) = %d, %v; want 3, kept because it was read", i, ok)
	}
}

// TestDelegationShards checks, on four shards of one server, what the
// conformance suite sees only in part: a claim's tokens name the shards
// of their children and rise in the order it answers, oldest dispatch of
// every shard first; and a store that remembers no id finds each by
// asking every shard.
func TestDelegationShards(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	open := func() *DB {
		db, err := Open(ctx, Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk, Limits: sessions.Limits{}, Shards: 4})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	var want []string
	convs := []string{"c", "d", "other", "c1", "c2", "d"}
	for k, conv := range convs {
		g := delegation.Delegation{ID: fmt.Sprint("deleg_", k), Conv: conv, User: "u"}
		for j := range 2 {
			g.Children = append(g.Children, delegation.Child{ID: fmt.Sprintf("%s-c%d", g.ID, j), Delegation: g.ID, Index: j, Task: delegation.Task{Goal: "g"}})
			want = append(want, g.Children[j].ID)
		}
		if err := db.Delegations().Create(ctx, delegation.Dispatch{Delegation: g}); err != nil {
			t.Fatalf("Create(%s): %v", g.ID, err)
		}
		clk.Advance(time.Millisecond)
	}
	var got []string
	var claims []delegation.Claim
	for _, n := range []int{3, 4, 10} {
		cs, cl, err := db.Delegations().Claim(ctx, "w1", n, time.Minute)
		if err != nil {
			t.Fatalf("Claim(%d): %v", n, err)
		}
		for k, c := range cs {
			got = append(got, c.ID)
			if sh, conv := db.tokenShard(cl[k].Token), convs[slices.Index(want, c.ID)/2]; sh != db.shards.of(conv) {
				t.Errorf("claim of %s: token %d names shard %d, its conversation %s is in %d", c.ID, cl[k].Token, sh, conv, db.shards.of(conv))
			}
		}
		claims = append(claims, cl...)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("children claimed, oldest dispatch first (-want +got):\n%s", d)
	}
	for k := 1; k < len(claims); k++ {
		if claims[k].Token <= claims[k-1].Token {
			t.Errorf("claim %d's token %d is not above the one before, %d", k, claims[k].Token, claims[k-1].Token)
		}
	}

	// Another store remembers nothing: it finds the children by asking
	// every shard, and ends them by their tokens' shards.
	other := open().Delegations()
	if err := other.Steer(ctx, want[3], "look there"); err != nil {
		t.Errorf("Steer(%s) from a store that remembers nothing: %v", want[3], err)
	}
	for k, c := range claims {
		r := delegation.Result{Status: delegation.StatusCompleted, Summary: "ok"}
		if k == 3 {
			r.Steers = 1
		}
		if _, err := other.End(ctx, c, r); err != nil {
			t.Errorf("End(%s): %v", c.Name, err)
		}
		clk.Advance(time.Millisecond) // the completions are due in the order made
	}
	for k, conv := range convs {
		id := fmt.Sprint("deleg_", k)
		g, err := other.Delegation(ctx, id)
		if err != nil || g.Conv != conv || g.Status() != delegation.StatusCompleted {
			t.Errorf("Delegation(%s) = %s of %q, %v; want completed, of %q", id, g.Status(), g.Conv, err, conv)
		}
		if cmps, err := other.Completions(ctx, id); err != nil || len(cmps) != 1 {
			t.Errorf("Completions(%s) = %d, %v; want 1", id, len(cmps), err)
		}
	}
	// An orchestrator's workers run at once and are left in the pending
	// list; a claim that finds nothing else pending there drops them.
	workers := delegation.Delegation{ID: "deleg_w", Conv: "c", User: "u", Orchestrator: want[0], Source: "orchestrator",
		Children: []delegation.Child{{ID: "deleg_w-c0", Delegation: "deleg_w", Task: delegation.Task{Goal: "g"}}}}
	if _, err := db.Delegations().Start(ctx, delegation.Dispatch{Delegation: workers}, "w1", time.Minute); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if cs, _, err := other.Claim(ctx, "w2", 5, time.Minute); err != nil || len(cs) != 0 {
		t.Errorf("Claim beside the workers = %d, %v; want none", len(cs), err)
	}
	if n := db.client.LLen(ctx, dlgKey(db.convPfx("c"), "pending")).Val(); n != 0 {
		t.Errorf("the workers' shard's pending list holds %d after a claim, want 0", n)
	}

	cc, err := other.ClaimCompletions(ctx, "d1", 10, time.Minute)
	if err != nil || len(cc) != len(convs) {
		t.Fatalf("ClaimCompletions = %d, %v; want %d", len(cc), err, len(convs))
	}
	for k, c := range cc {
		if want := fmt.Sprint("cmp_deleg_", k); c.Completion.ID != want {
			t.Errorf("completion claim %d is %s, want %s (oldest first)", k, c.Completion.ID, want)
		}
		if err := db.Delegations().AckCompletion(ctx, c); err != nil {
			t.Errorf("AckCompletion(%s): %v", c.Completion.ID, err)
		}
	}
}
