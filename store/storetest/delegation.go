package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// runDelegations runs the conformance cases of delegation.Store.
func runDelegations(t *testing.T, b Backend) {
	t.Run("dispatch is readable", func(t *testing.T) { runDispatchReadable(t, b) })
	t.Run("a refused commit writes no delegation", func(t *testing.T) { runDispatchFenced(t, b) })
	t.Run("create of an existing id", func(t *testing.T) { runDispatchConflict(t, b) })
	t.Run("invalid dispatches", func(t *testing.T) { runDispatchInvalid(t, b) })
	t.Run("dispatch limit", func(t *testing.T) { runDispatchLimit(t, b) })
	t.Run("an orchestrator's workers", func(t *testing.T) { runWorkersStart(t, b) })
	t.Run("claim", func(t *testing.T) { runChildClaim(t, b) })
	t.Run("renew", func(t *testing.T) { runChildRenew(t, b) })
	t.Run("end", func(t *testing.T) { runChildEnd(t, b) })
	t.Run("stop pending", func(t *testing.T) { runStopPending(t, b) })
	t.Run("steer", func(t *testing.T) { runSteer(t, b) })
	t.Run("completion units", func(t *testing.T) { runCompletionUnits(t, b) })
	t.Run("reap", func(t *testing.T) { runReap(t, b) })
	t.Run("a child's tokens add to its parent's totals", func(t *testing.T) { runChildUsage(t, b) })
	t.Run("completion delivery", func(t *testing.T) { runCompletionDelivery(t, b) })
	t.Run("durability", func(t *testing.T) { runDelegationDurability(t, b) })
}

// dlg is the delegation store of the fixture's current store.
func (f *fixture) dlg() delegation.Store { return f.st.Delegations() }

var dlgOrigin = outbox.Target{Platform: "telegram", Chat: "100"}

// newDelegation is a delegation of conv with one child per goal, the
// children named <id>-c<index>.
func newDelegation(id, conv string, goals ...string) delegation.Delegation {
	g := delegation.Delegation{ID: id, Conv: conv, User: "u-1", Origin: dlgOrigin, Session: "s-1", Source: "tool"}
	for i, goal := range goals {
		g.Children = append(g.Children, delegation.Child{
			ID: fmt.Sprintf("%s-c%d", id, i), Delegation: id, Index: i, Task: delegation.Task{Goal: goal},
		})
	}
	return g
}

// stored is g as a store gives it back once dispatched at at: created
// then unless it says when, its children pending.
func stored(g delegation.Delegation, at time.Time) delegation.Delegation {
	if g.CreatedAt.IsZero() {
		g.CreatedAt = at
	}
	kids := make([]delegation.Child, len(g.Children))
	for i, c := range g.Children {
		kids[i] = delegation.Pending(c)
	}
	g.Children = kids
	return g
}

// dispatch creates g outside a turn and returns it as stored, the clock
// moving a tick after it.
func (f *fixture) dispatch(g delegation.Delegation) delegation.Delegation {
	f.t.Helper()
	at := f.clk.Now()
	if err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: g}); err != nil {
		f.t.Fatalf("Create(%s): %v", g.ID, err)
	}
	f.clk.Advance(tick)
	return stored(g, at)
}

// commitWrites runs one turn of conv whose commit carries ws.
func (f *fixture) commitWrites(conv string, ws ...sessions.Write) error {
	f.t.Helper()
	f.append(user(conv, "delegate this"))
	turn := f.mustClaim("w-turn")
	return f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Writes: ws, Release: true})
}

func (f *fixture) claimChildren(owner string, n int) ([]delegation.Child, []delegation.Claim) {
	f.t.Helper()
	cs, claims, err := f.dlg().Claim(f.ctx, owner, n, ttl)
	if err != nil {
		f.t.Fatalf("Claim(%s, %d): %v", owner, n, err)
	}
	if len(cs) != len(claims) {
		f.t.Fatalf("Claim(%s, %d) = %d children and %d claims", owner, n, len(cs), len(claims))
	}
	return cs, claims
}

func (f *fixture) endChild(c delegation.Claim, r delegation.Result) *delegation.Completion {
	f.t.Helper()
	cmp, err := f.dlg().End(f.ctx, c, r)
	if err != nil {
		f.t.Fatalf("End(%s): %v", c.Name, err)
	}
	return cmp
}

func (f *fixture) delegation(id string) delegation.Delegation {
	f.t.Helper()
	g, err := f.dlg().Delegation(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Delegation(%s): %v", id, err)
	}
	return g
}

func (f *fixture) child(id string) delegation.Child {
	f.t.Helper()
	c, err := f.dlg().Child(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Child(%s): %v", id, err)
	}
	return c
}

func (f *fixture) listDelegations(q delegation.Query) []delegation.Delegation {
	f.t.Helper()
	gs, err := f.dlg().List(f.ctx, q)
	if err != nil {
		f.t.Fatalf("List(%+v): %v", q, err)
	}
	return gs
}

func (f *fixture) completionsOf(id string) []delegation.Completion {
	f.t.Helper()
	cs, err := f.dlg().Completions(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Completions(%s): %v", id, err)
	}
	return cs
}

func (f *fixture) activeChildren(conv string) int {
	f.t.Helper()
	n, err := f.dlg().Active(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("Active(%s): %v", conv, err)
	}
	return n
}

func (f *fixture) reap(limit int) []delegation.Child {
	f.t.Helper()
	cs, err := f.dlg().Reap(f.ctx, limit)
	if err != nil {
		f.t.Fatalf("Reap(%d): %v", limit, err)
	}
	return cs
}

func (f *fixture) claimCompletions(worker string, n int) []delegation.CompletionClaim {
	f.t.Helper()
	cs, err := f.dlg().ClaimCompletions(f.ctx, worker, n, ttl)
	if err != nil {
		f.t.Fatalf("ClaimCompletions(%s, %d): %v", worker, n, err)
	}
	return cs
}

// noDelegation checks that id was never written, nor any of children.
func (f *fixture) noDelegation(id string, children ...delegation.Child) {
	f.t.Helper()
	if g, err := f.dlg().Delegation(f.ctx, id); !errs.Is(err, errs.NotFound) {
		f.t.Errorf("Delegation(%s) = %+v, %v; want NotFound", id, g, err)
	}
	for _, c := range children {
		if c.ID == "" {
			continue
		}
		if got, err := f.dlg().Child(f.ctx, c.ID); !errs.Is(err, errs.NotFound) {
			f.t.Errorf("Child(%s) = %+v, %v; want NotFound", c.ID, got, err)
		}
	}
}

// wantNothingWritten checks that no delegation, child or claimable
// child of conv exists.
func (f *fixture) wantNothingWritten(conv string) {
	f.t.Helper()
	if gs := f.listDelegations(delegation.Query{}); len(gs) != 0 {
		f.t.Errorf("List = %d delegations, want none", len(gs))
	}
	if n := f.activeChildren(conv); n != 0 {
		f.t.Errorf("Active(%s) = %d, want 0", conv, n)
	}
	if cs, _ := f.claimChildren("w-probe", 10); len(cs) != 0 {
		f.t.Errorf("Claim = %v, want no child", childIDs(cs))
	}
}

func childIDs(cs []delegation.Child) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func done(summary string) delegation.Result {
	return delegation.Result{Status: delegation.StatusCompleted, Summary: summary, APICalls: 2}
}

// running is c as a claim at at for owner with token leaves it.
func running(c delegation.Child, owner string, token int64, at time.Time) delegation.Child {
	c = delegation.Pending(c)
	c.Status, c.Owner, c.Token, c.OwnerExpires, c.StartedAt = delegation.StatusRunning, owner, token, at.Add(ttl), at
	return c
}

// ended is c (as it ran) as End with r at at leaves it.
func ended(c delegation.Child, r delegation.Result, at time.Time) delegation.Child {
	res := delegation.Ended(c, r)
	c.Status, c.Result, c.EndedAt, c.Owner, c.OwnerExpires = r.Status, &res, at, "", time.Time{}
	return c
}

// completionOf is the completion g's unit makes with results.
func completionOf(g delegation.Delegation, unit string, at time.Time, results ...delegation.Result) *delegation.Completion {
	id := "cmp_" + g.ID
	if unit != "" {
		id += ":" + unit
	}
	return &delegation.Completion{
		ID: id, Delegation: g.ID, Conv: g.Conv, User: g.User, Origin: g.Origin, Session: g.Session,
		Unit: unit, Results: results, Total: len(g.Children), CreatedAt: at,
	}
}

func runDispatchReadable(t *testing.T, b Backend) {
	cases := []struct {
		desc  string
		write func(f *fixture, g delegation.Delegation) error
		at    time.Time // the dispatch's own creation time, if any
	}{
		{
			desc: "committed with a turn",
			write: func(f *fixture, g delegation.Delegation) error {
				return f.commitWrites(g.Conv, delegation.Dispatch{Delegation: g})
			},
		},
		{
			desc: "created outside a turn",
			write: func(f *fixture, g delegation.Delegation) error {
				return f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: g})
			},
		},
		{
			desc: "committed with its own creation time",
			write: func(f *fixture, g delegation.Delegation) error {
				return f.commitWrites(g.Conv, delegation.Dispatch{Delegation: g})
			},
			at: t0.Add(-time.Hour),
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			g := newDelegation("deleg_1", "c", "find the bug", "write the test", "review")
			g.Independent = true
			g.Children[1].Group = "tests"
			g.Children[2].Context = "the diff is in the PR"
			g.Children[2].Role = delegation.RoleLeaf
			g.Children[2].OutputSchema = []byte(`{"type":"object"}`)
			g.Children[2].Toolsets = []string{"core", "mcp"}
			g.CreatedAt = tc.at
			at := f.clk.Now()
			if err := tc.write(f, g); err != nil {
				t.Fatalf("dispatch: %v", err)
			}
			want := stored(g, at)
			if d := cmp.Diff(want, f.delegation(g.ID), timeOpts); d != "" {
				t.Errorf("Delegation (-want +got):\n%s", d)
			}
			if d := cmp.Diff(want.Children[2], f.child(g.Children[2].ID), timeOpts); d != "" {
				t.Errorf("Child (-want +got):\n%s", d)
			}
			for _, q := range []delegation.Query{{Conv: "c"}, {}, {Conv: "c", Active: true}, {Active: true}} {
				if d := cmp.Diff([]delegation.Delegation{want}, f.listDelegations(q), timeOpts); d != "" {
					t.Errorf("List(%+v) (-want +got):\n%s", q, d)
				}
			}
			if gs := f.listDelegations(delegation.Query{Conv: "other"}); len(gs) != 0 {
				t.Errorf("List(other) = %d delegations, want none", len(gs))
			}
			if n := f.activeChildren("c"); n != 3 {
				t.Errorf("Active(c) = %d, want 3", n)
			}
			if n := f.activeChildren("other"); n != 0 {
				t.Errorf("Active(other) = %d, want 0", n)
			}
			if cs := f.completionsOf(g.ID); len(cs) != 0 {
				t.Errorf("Completions = %+v, want none", cs)
			}
		})
	}

	t.Run("list is newest first, bounded and by conversation", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g1 := f.dispatch(newDelegation("deleg_1", "c", "one"))
		g2 := f.dispatch(newDelegation("deleg_2", "other", "two"))
		g3 := f.dispatch(newDelegation("deleg_3", "c", "three", "four"))
		// g3 ends: it is listed, and no longer active.
		_, claims := f.claimChildren("w1", 10)
		for _, c := range claims {
			if c.Name == g3.Children[0].ID || c.Name == g3.Children[1].ID {
				f.endChild(c, done("ok"))
			}
		}
		names := func(gs []delegation.Delegation) []string {
			out := make([]string, len(gs))
			for i, g := range gs {
				out[i] = g.ID
			}
			return out
		}
		for _, tc := range []struct {
			q    delegation.Query
			want []string
		}{
			{delegation.Query{}, []string{g3.ID, g2.ID, g1.ID}},
			{delegation.Query{Limit: 2}, []string{g3.ID, g2.ID}},
			{delegation.Query{Conv: "c"}, []string{g3.ID, g1.ID}},
			{delegation.Query{Conv: "c", Limit: 1}, []string{g3.ID}},
			{delegation.Query{Active: true}, []string{g2.ID, g1.ID}},
			{delegation.Query{Conv: "c", Active: true}, []string{g1.ID}},
			{delegation.Query{Conv: "nobody"}, []string{}},
		} {
			if d := cmp.Diff(tc.want, names(f.listDelegations(tc.q)), timeOpts); d != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tc.q, d)
			}
		}
		if n := f.activeChildren("c"); n != 1 {
			t.Errorf("Active(c) = %d, want 1 (g1's child, still running)", n)
		}
	})

	t.Run("unknown ids", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.noDelegation("deleg_none", delegation.Child{ID: "sub_none"})
		if cs := f.completionsOf("deleg_none"); len(cs) != 0 {
			t.Errorf("Completions(deleg_none) = %+v, want none", cs)
		}
	})
}

// runDispatchFenced is the "a dispatch whose turn's commit fails leaves
// no orphan delegation" of the issue: a worker that lost its lease
// commits no delegation.
func runDispatchFenced(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.append(user("c", "delegate this"))
	stale := f.mustClaim("w1")
	f.clk.Advance(ttl + time.Second)
	rival := f.mustClaim("w2")
	g := newDelegation("deleg_1", "c", "one", "two")
	err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{
		EntryID: stale.Entry.ID,
		Writes:  []sessions.Write{delegation.Dispatch{Delegation: g}},
		Release: true,
	})
	wantCode(t, "stale Finish with a dispatch", err, errs.LeaseLost)
	f.noDelegation(g.ID, g.Children...)
	f.wantNothingWritten("c")

	// The rival's commit of the same dispatch is the one that counts.
	f.finish(rival.Lease, sessions.Finish{
		EntryID: rival.Entry.ID,
		Writes:  []sessions.Write{delegation.Dispatch{Delegation: g}},
		Release: true,
	})
	if n := f.activeChildren("c"); n != 2 {
		t.Errorf("Active(c) after the rival's commit = %d, want 2", n)
	}
}

func runDispatchConflict(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	g := f.dispatch(newDelegation("deleg_1", "c", "one", "two"))

	again := newDelegation("deleg_1", "c", "three")
	err := f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: again})
	wantCode(t, "Create of an existing delegation id", err, errs.Conflict)

	// A new delegation naming an existing child is refused whole.
	other := newDelegation("deleg_2", "c", "x", "y")
	other.Children[1].ID = g.Children[0].ID
	err = f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: other})
	wantCode(t, "Create naming an existing child", err, errs.Conflict)
	f.noDelegation(other.ID, other.Children[0])

	if d := cmp.Diff(g, f.delegation(g.ID), timeOpts); d != "" {
		t.Errorf("Delegation after the refused creates (-want +got):\n%s", d)
	}
	if n := f.activeChildren("c"); n != 2 {
		t.Errorf("Active(c) = %d, want 2", n)
	}
	if gs := f.listDelegations(delegation.Query{}); len(gs) != 1 {
		t.Errorf("List = %d delegations, want 1", len(gs))
	}
}

func runDispatchInvalid(t *testing.T, b Backend) {
	cases := []struct {
		desc string
		edit func(g *delegation.Delegation)
	}{
		{"no id", func(g *delegation.Delegation) { g.ID = "" }},
		{"no conversation", func(g *delegation.Delegation) { g.Conv = "" }},
		{"no children", func(g *delegation.Delegation) { g.Children = nil }},
		{"a child without an id", func(g *delegation.Delegation) { g.Children[1].ID = "" }},
		{"a child without a goal", func(g *delegation.Delegation) { g.Children[1].Goal = "" }},
		{"a child of another delegation", func(g *delegation.Delegation) { g.Children[1].Delegation = "deleg_other" }},
		{"a child named twice", func(g *delegation.Delegation) { g.Children[2].ID = g.Children[0].ID }},
		{"a child dispatched running", func(g *delegation.Delegation) { g.Children[0].Status = delegation.StatusRunning }},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			g := newDelegation("deleg_1", "c", "one", "two", "three")
			tc.edit(&g)
			disp := delegation.Dispatch{Delegation: g}
			wantCode(t, "Create", f.dlg().Create(f.ctx, disp), errs.Invalid)
			wantCode(t, "Finish carrying it", f.commitWrites("c", disp), errs.Invalid)
			if g.ID != "" {
				f.noDelegation(g.ID, g.Children...)
			}
			f.wantNothingWritten("c")
		})
	}
}

func runChildClaim(t *testing.T, b Backend) {
	t.Run("pending children oldest dispatch first, a fresh token each grant", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		if cs, _ := f.claimChildren("w1", 5); len(cs) != 0 {
			t.Errorf("Claim with nothing dispatched = %v, want none", childIDs(cs))
		}
		// A child claimed again after a crash runs with its toolsets.
		d1 := newDelegation("deleg_1", "c", "a", "b", "c")
		d1.Children[1].Toolsets = []string{"mcp"}
		g1 := f.dispatch(d1)
		g2 := f.dispatch(newDelegation("deleg_2", "d", "e", "f"))

		at := f.clk.Now()
		got1, claims1 := f.claimChildren("w1", 2)
		got2, claims2 := f.claimChildren("w2", 10)
		if cs, _ := f.claimChildren("w3", 10); len(cs) != 0 {
			t.Errorf("third Claim = %v, want none", childIDs(cs))
		}
		claims := append(claims1, claims2...)
		var want []delegation.Child
		for i, c := range append(append([]delegation.Child{}, g1.Children...), g2.Children...) {
			owner := "w1"
			if i >= 2 {
				owner = "w2"
			}
			want = append(want, running(c, owner, claims[i].Token, at))
		}
		if d := cmp.Diff(want, append(got1, got2...), timeOpts); d != "" {
			t.Errorf("claimed children (-want +got):\n%s", d)
		}
		for i, c := range claims {
			w := delegation.Claim{Name: want[i].ID, Owner: want[i].Owner, Token: c.Token, Expires: at.Add(ttl)}
			if d := cmp.Diff(w, c, timeOpts); d != "" {
				t.Errorf("claim %d (-want +got):\n%s", i, d)
			}
			if i > 0 && c.Token <= claims[i-1].Token {
				t.Errorf("claim %d token %d, not above the earlier grant's %d", i, c.Token, claims[i-1].Token)
			}
		}
		if d := cmp.Diff(want[3], f.child(want[3].ID), timeOpts); d != "" {
			t.Errorf("Child after the claim (-want +got):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 3 {
			t.Errorf("Active(c) = %d, want 3 (running children are active)", n)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.dispatch(newDelegation("deleg_1", "c", "a"))
		for _, tc := range []struct {
			desc  string
			owner string
			n     int
			ttl   time.Duration
		}{
			{"n 0", "w1", 0, ttl},
			{"no owner", "", 1, ttl},
			{"ttl 0", "w1", 1, 0},
		} {
			_, _, err := f.dlg().Claim(f.ctx, tc.owner, tc.n, tc.ttl)
			wantCode(t, "Claim with "+tc.desc, err, errs.Invalid)
		}
		if n := f.activeChildren("c"); n != 1 {
			t.Errorf("Active(c) = %d, want 1", n)
		}
		if c := f.child("deleg_1-c0"); c.Status != delegation.StatusPending {
			t.Errorf("child after the refused claims is %s, want pending", c.Status)
		}
	})

	t.Run("never the same child twice across concurrent claimers on two stores", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []delegation.Store{f.dlg(), other.Delegations()}
		var all []string
		for i := range 6 {
			g := f.dispatch(newDelegation(fmt.Sprintf("deleg_%d", i), "c", "a", "b", "c", "d"))
			all = append(all, childIDs(g.Children)...)
		}
		const claimers = 4
		var mu sync.Mutex
		by := map[string]string{}
		tokens := map[int64]string{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range claimers {
			wg.Go(func() {
				<-start
				owner := fmt.Sprintf("w%d", i)
				for {
					cs, claims, err := views[i%len(views)].Claim(f.ctx, owner, 2, ttl)
					if err != nil {
						t.Errorf("Claim(%s): %v", owner, err)
						return
					}
					if len(cs) == 0 {
						return
					}
					mu.Lock()
					for j, c := range cs {
						if prev, ok := by[c.ID]; ok {
							t.Errorf("child %s claimed by %s and by %s", c.ID, prev, owner)
						}
						by[c.ID] = owner
						if prev, ok := tokens[claims[j].Token]; ok {
							t.Errorf("token %d granted for %s and for %s", claims[j].Token, prev, c.ID)
						}
						tokens[claims[j].Token] = c.ID
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		var got []string
		for id := range by {
			got = append(got, id)
		}
		slices.Sort(got)
		slices.Sort(all)
		if d := cmp.Diff(all, got); d != "" {
			t.Errorf("children claimed (-want +got):\n%s", d)
		}
	})
}

func runChildRenew(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	g := f.dispatch(newDelegation("deleg_1", "c", "a", "b"))
	_, claims := f.claimChildren("w1", 2)
	c0, c1 := g.Children[0].ID, g.Children[1].ID

	f.clk.Advance(ttl / 2)
	// An orchestrator's progress carries its workers', which run inside
	// its run: they are seen through it.
	p := delegation.Progress{APICalls: 3, CurrentTool: "web_search", LastActivity: f.clk.Now(), InputTokens: 100, OutputTokens: 20,
		Workers: []delegation.WorkerProgress{{ID: "sub_w1", Goal: "look", Status: delegation.StatusRunning, APICalls: 1, CurrentTool: "read_file", Tokens: 7}}}
	held, err := f.dlg().Renew(f.ctx, claims, ttl, map[string]delegation.Progress{c0: p})
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	renewedAt := f.clk.Now()
	want := slices.Clone(claims)
	for i := range want {
		want[i].Expires = renewedAt.Add(ttl)
	}
	if d := cmp.Diff(want, held, timeOpts); d != "" {
		t.Errorf("Renew (-want +got):\n%s", d)
	}
	got := f.child(c0)
	if d := cmp.Diff(p, got.Progress, timeOpts); d != "" {
		t.Errorf("progress after Renew (-want +got):\n%s", d)
	}
	if !got.OwnerExpires.Equal(renewedAt.Add(ttl)) || got.Status != delegation.StatusRunning {
		t.Errorf("child after Renew: %s, owner expires %v; want running until %v", got.Status, got.OwnerExpires, renewedAt.Add(ttl))
	}
	if got := f.child(c1); !cmp.Equal(got.Progress, delegation.Progress{}) {
		t.Errorf("progress of the child Renew was given none for = %+v, want none", got.Progress)
	}

	// Past the first expiry, not the renewed one: nothing to reap.
	f.clk.Advance(ttl/2 + tick)
	if cs := f.reap(10); len(cs) != 0 {
		t.Errorf("Reap of renewed claims = %v, want none", childIDs(cs))
	}
	// Only c1 is renewed again; once c0's claim runs out, it is reaped
	// and its claim is not renewed any more, while c1's is.
	if _, err := f.dlg().Renew(f.ctx, claims[1:], ttl, nil); err != nil {
		t.Fatalf("Renew(c1): %v", err)
	}
	f.clk.Advance(ttl / 2)
	if cs := f.reap(10); !slices.Equal(childIDs(cs), []string{c0}) {
		t.Errorf("Reap = %v, want %v", childIDs(cs), []string{c0})
	}
	held, err = f.dlg().Renew(f.ctx, claims, ttl, map[string]delegation.Progress{c0: p, c1: p})
	if err != nil {
		t.Fatalf("Renew after the reap: %v", err)
	}
	if len(held) != 1 || held[0].Name != c1 {
		t.Errorf("Renew after the reap = %+v, want c1's claim only", held)
	}
	if got := f.child(c0); got.Status != delegation.StatusUnknown || !got.Progress.LastActivity.Equal(p.LastActivity) || got.Progress.APICalls != p.APICalls {
		t.Errorf("reaped child after Renew: %s, progress %+v; want unknown, its progress as renewed before (%+v)", got.Status, got.Progress, p)
	}

	_, err = f.dlg().Renew(f.ctx, claims[1:], 0, nil)
	wantCode(t, "Renew with ttl 0", err, errs.Invalid)
	if held, err := f.dlg().Renew(f.ctx, nil, ttl, nil); err != nil || len(held) != 0 {
		t.Errorf("Renew of no claims = %+v, %v; want none", held, err)
	}
}

func runChildEnd(t *testing.T, b Backend) {
	t.Run("a stale claim writes nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b"))
		cs, claims := f.claimChildren("w1", 1)
		before := f.delegation(g.ID)

		stale := claims[0]
		stale.Token--
		_, err := f.dlg().End(f.ctx, stale, done("late"))
		wantCode(t, "End with an earlier token", err, errs.LeaseLost)
		other := claims[0]
		other.Name = g.Children[1].ID // pending, never claimed
		_, err = f.dlg().End(f.ctx, other, done("late"))
		wantCode(t, "End of a child the claim is not for", err, errs.LeaseLost)
		unknown := claims[0]
		unknown.Name = "sub_none"
		_, err = f.dlg().End(f.ctx, unknown, done("late"))
		wantCode(t, "End of an unknown child", err, errs.LeaseLost)
		_, err = f.dlg().End(f.ctx, claims[0], delegation.Result{Status: delegation.StatusRunning})
		wantCode(t, "End with a status that is not terminal", err, errs.Invalid)

		if d := cmp.Diff(before, f.delegation(g.ID), timeOpts); d != "" {
			t.Errorf("delegation changed by the refused ends (-before +after):\n%s", d)
		}
		if cmps := f.completionsOf(g.ID); len(cmps) != 0 {
			t.Errorf("Completions = %+v, want none", cmps)
		}

		// Its claim runs out and the child is reaped: the owner that wakes
		// up late cannot end it any more.
		f.clk.Advance(ttl + tick)
		if got := f.reap(10); !slices.Equal(childIDs(got), childIDs(cs)) {
			t.Fatalf("Reap = %v, want %v", childIDs(got), childIDs(cs))
		}
		reaped := f.child(cs[0].ID)
		_, err = f.dlg().End(f.ctx, claims[0], done("late"))
		wantCode(t, "End after the child was reaped", err, errs.LeaseLost)
		if d := cmp.Diff(reaped, f.child(cs[0].ID), timeOpts); d != "" {
			t.Errorf("reaped child changed by the late End (-before +after):\n%s", d)
		}
	})

	t.Run("the last child's end makes the one completion, results by task index", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b", "c"))
		cs, claims := f.claimChildren("w1", 3)
		f.clk.Advance(time.Second)

		results := []delegation.Result{
			{Status: delegation.StatusFailed, Error: "boom", APICalls: 1, DurationSeconds: 1.5},
			done("b is done"),
			{Status: delegation.StatusCompleted, Summary: "c is done", Truncated: true, SchemaValid: new(true),
				Worktree: &delegation.Worktree{Path: "/tmp/wt", Branch: "sub", Commits: 2}},
		}
		for _, i := range []int{1, 0} {
			if cmp := f.endChild(claims[i], results[i]); cmp != nil {
				t.Errorf("End of child %d = %+v, want no completion while a child runs", i, cmp)
			}
		}
		if n := f.activeChildren("c"); n != 1 {
			t.Errorf("Active(c) with one child left = %d, want 1", n)
		}
		at := f.clk.Now()
		last := f.endChild(claims[2], results[2])
		var ends []delegation.Child
		var rs []delegation.Result
		for i, c := range cs {
			e := ended(c, results[i], at)
			ends = append(ends, e)
			rs = append(rs, *e.Result)
		}
		want := completionOf(g, "", at, rs...)
		if d := cmp.Diff(want, last, timeOpts); d != "" {
			t.Errorf("last End's completion (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]delegation.Completion{*want}, f.completionsOf(g.ID), timeOpts); d != "" {
			t.Errorf("Completions (-want +got):\n%s", d)
		}
		got := f.delegation(g.ID)
		if d := cmp.Diff(ends, got.Children, timeOpts); d != "" {
			t.Errorf("children after their ends (-want +got):\n%s", d)
		}
		// The store made what the domain's rule makes.
		rule := delegation.CompletionFor(got, got.Children[2])
		if rule != nil {
			rule.CreatedAt = at
		}
		if d := cmp.Diff(rule, last, timeOpts); d != "" {
			t.Errorf("completion against delegation.CompletionFor (-rule +store):\n%s", d)
		}
		if got.Status() != delegation.StatusCompleted {
			t.Errorf("delegation status %s, want completed", got.Status())
		}
		if n := f.activeChildren("c"); n != 0 {
			t.Errorf("Active(c) after the last end = %d, want 0", n)
		}
		if gs := f.listDelegations(delegation.Query{Active: true}); len(gs) != 0 {
			t.Errorf("List(active) = %d delegations, want none", len(gs))
		}
		if gs := f.listDelegations(delegation.Query{Conv: "c", Active: true}); len(gs) != 0 {
			t.Errorf("List(c, active) = %d delegations, want none", len(gs))
		}
	})
}

func (f *fixture) stopPending(id string, r delegation.Result) (bool, *delegation.Completion) {
	f.t.Helper()
	ok, cmp, err := f.dlg().StopPending(f.ctx, id, r)
	if err != nil {
		f.t.Fatalf("StopPending(%s): %v", id, err)
	}
	return ok, cmp
}

// stopped is what a stop of a pending child gives.
func stopped(why string) delegation.Result {
	return delegation.Result{Status: delegation.StatusInterrupted, Error: why}
}

func runStopPending(t *testing.T, b Backend) {
	t.Run("a pending child ends interrupted and is never claimed", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b", "c"))
		at := f.clk.Now()
		r := stopped("stopped by the user")
		ok, made := f.stopPending(g.Children[1].ID, r)
		if !ok || made != nil {
			t.Errorf("StopPending = %v, %+v; want true and no completion while others are pending", ok, made)
		}
		want := ended(g.Children[1], r, at)
		if d := cmp.Diff(want, f.child(want.ID), timeOpts); d != "" {
			t.Errorf("stopped child (-want +got):\n%s", d)
		}
		if want.Result.Goal != "b" || want.Result.ChildID != want.ID || want.Result.TaskIndex != 1 {
			t.Errorf("stopped child's result %+v does not name its task", want.Result)
		}
		if n := f.activeChildren("c"); n != 2 {
			t.Errorf("Active(c) after the stop = %d, want 2", n)
		}
		cs, _ := f.claimChildren("w1", 10)
		if got, wantIDs := childIDs(cs), []string{g.Children[0].ID, g.Children[2].ID}; !slices.Equal(got, wantIDs) {
			t.Errorf("Claim after the stop = %v, want %v", got, wantIDs)
		}
		if cs, _ := f.claimChildren("w2", 10); len(cs) != 0 {
			t.Errorf("second Claim = %v, want none", childIDs(cs))
		}
		if d := cmp.Diff(want, f.child(want.ID), timeOpts); d != "" {
			t.Errorf("stopped child after the claims (-want +got):\n%s", d)
		}
		if gs := f.listDelegations(delegation.Query{Conv: "c", Active: true}); len(gs) != 1 {
			t.Errorf("List(c, active) = %d delegations, want 1 (two children run)", len(gs))
		}
		if cmps := f.completionsOf(g.ID); len(cmps) != 0 {
			t.Errorf("Completions = %+v, want none", cmps)
		}
	})

	t.Run("the last child stopped makes the one completion, results by task index", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b", "c"))
		cs, claims := f.claimChildren("w1", 2)
		f.clk.Advance(time.Second)
		results := []delegation.Result{done("a is done"), {Status: delegation.StatusFailed, Error: "boom", APICalls: 1}}
		at := f.clk.Now()
		for _, i := range []int{1, 0} {
			if cmp := f.endChild(claims[i], results[i]); cmp != nil {
				t.Errorf("End of child %d = %+v, want no completion while a child is pending", i, cmp)
			}
		}
		r := stopped("the conversation was reset")
		r.Goal = "its own goal"
		ok, last := f.stopPending(g.Children[2].ID, r)
		if !ok {
			t.Fatalf("StopPending of the last pending child = false, want true")
		}
		ends := []delegation.Child{ended(cs[0], results[0], at), ended(cs[1], results[1], at), ended(g.Children[2], r, at)}
		var rs []delegation.Result
		for _, e := range ends {
			rs = append(rs, *e.Result)
		}
		want := completionOf(g, "", at, rs...)
		if d := cmp.Diff(want, last, timeOpts); d != "" {
			t.Errorf("StopPending's completion (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]delegation.Completion{*want}, f.completionsOf(g.ID), timeOpts); d != "" {
			t.Errorf("Completions (-want +got):\n%s", d)
		}
		got := f.delegation(g.ID)
		if d := cmp.Diff(ends, got.Children, timeOpts); d != "" {
			t.Errorf("children after their ends (-want +got):\n%s", d)
		}
		rule := delegation.CompletionFor(got, got.Children[2])
		if rule != nil {
			rule.CreatedAt = at
		}
		if d := cmp.Diff(rule, last, timeOpts); d != "" {
			t.Errorf("completion against delegation.CompletionFor (-rule +store):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 0 {
			t.Errorf("Active(c) = %d, want 0", n)
		}
		if gs := f.listDelegations(delegation.Query{Active: true}); len(gs) != 0 {
			t.Errorf("List(active) = %d delegations, want none", len(gs))
		}
		if gs := f.listDelegations(delegation.Query{Conv: "c", Active: true}); len(gs) != 0 {
			t.Errorf("List(c, active) = %d delegations, want none", len(gs))
		}
		if ok, cmp := f.stopPending(g.Children[2].ID, r); ok || cmp != nil {
			t.Errorf("StopPending again = %v, %+v; want false and no completion", ok, cmp)
		}
		if cmps := f.completionsOf(g.ID); len(cmps) != 1 {
			t.Errorf("Completions after a second stop = %d, want 1", len(cmps))
		}
	})

	t.Run("a running or ended child is left as it is", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b"))
		_, claims := f.claimChildren("w1", 2)
		f.endChild(claims[1], done("b"))
		before := f.delegation(g.ID)
		for _, c := range before.Children {
			if ok, cmp := f.stopPending(c.ID, stopped("stop")); ok || cmp != nil {
				t.Errorf("StopPending of the %s child = %v, %+v; want false and no completion", c.Status, ok, cmp)
			}
		}
		if d := cmp.Diff(before, f.delegation(g.ID), timeOpts); d != "" {
			t.Errorf("delegation after the stops (-before +after):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 1 {
			t.Errorf("Active(c) = %d, want 1", n)
		}
		// The running child's claim still holds and ends it.
		if cmp := f.endChild(claims[0], done("a")); cmp == nil || len(cmp.Results) != 2 {
			t.Errorf("End of the running child = %+v, want a completion of 2", cmp)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a"))
		_, _, err := f.dlg().StopPending(f.ctx, "sub_none", stopped("stop"))
		wantCode(t, "StopPending of an unknown child", err, errs.NotFound)
		_, _, err = f.dlg().StopPending(f.ctx, g.Children[0].ID, delegation.Result{Status: delegation.StatusRunning})
		wantCode(t, "StopPending with a status that is not terminal", err, errs.Invalid)
		_, _, err = f.dlg().StopPending(f.ctx, g.Children[0].ID, delegation.Result{})
		wantCode(t, "StopPending without a status", err, errs.Invalid)
		if d := cmp.Diff(g, f.delegation(g.ID), timeOpts); d != "" {
			t.Errorf("delegation after the refused stops (-want +got):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 1 {
			t.Errorf("Active(c) = %d, want 1", n)
		}
	})

	t.Run("two concurrent stops on two stores: one stops", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []delegation.Store{f.dlg(), other.Delegations()}
		for round := range 20 {
			g := f.dispatch(newDelegation(fmt.Sprintf("deleg_%d", round), "c", "a"))
			id := g.Children[0].ID
			var oks, cmps [2]bool
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range views {
				wg.Go(func() {
					<-start
					ok, cmp, err := views[i].StopPending(f.ctx, id, stopped(fmt.Sprintf("stop %d", i)))
					if err != nil {
						t.Errorf("round %d: StopPending on store %d: %v", round, i, err)
					}
					oks[i], cmps[i] = ok, cmp != nil
				})
			}
			close(start)
			wg.Wait()
			if oks[0] == oks[1] || cmps != oks {
				t.Errorf("round %d: stopped %v, completions %v; want one stop, with its completion", round, oks, cmps)
			}
			c := f.child(id)
			if c.Status != delegation.StatusInterrupted || c.Result == nil {
				t.Errorf("round %d: child %s, result %+v; want interrupted", round, c.Status, c.Result)
			} else if winner := slices.Index(oks[:], true); winner >= 0 && c.Result.Error != fmt.Sprintf("stop %d", winner) {
				t.Errorf("round %d: result error %q, want the winner's (store %d)", round, c.Result.Error, winner)
			}
			if got := f.completionsOf(g.ID); len(got) != 1 {
				t.Errorf("round %d: %d completions, want 1", round, len(got))
			}
		}
		if n := f.activeChildren("c"); n != 0 {
			t.Errorf("Active(c) = %d, want 0", n)
		}
	})

	t.Run("a stop racing a claim: claimed or stopped, never both", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []delegation.Store{f.dlg(), other.Delegations()}
		var claimedN, stoppedN int
		for round := range 50 {
			g := f.dispatch(newDelegation(fmt.Sprintf("deleg_%d", round), "c", "a"))
			id := g.Children[0].ID
			var claimed []delegation.Child
			var stop bool
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Go(func() {
				<-start
				cs, _, err := views[round%2].Claim(f.ctx, "w1", 1, ttl)
				if err != nil {
					t.Errorf("round %d: Claim: %v", round, err)
				}
				claimed = cs
			})
			wg.Go(func() {
				<-start
				ok, _, err := views[(round+1)%2].StopPending(f.ctx, id, stopped("stop"))
				if err != nil {
					t.Errorf("round %d: StopPending: %v", round, err)
				}
				stop = ok
			})
			close(start)
			wg.Wait()
			took := slices.Equal(childIDs(claimed), []string{id})
			if took == stop || (!took && len(claimed) != 0) {
				t.Fatalf("round %d: claimed %v, stopped %v; want the child claimed or stopped", round, childIDs(claimed), stop)
			}
			want := delegation.StatusRunning
			if stop {
				want = delegation.StatusInterrupted
				stoppedN++
			} else {
				claimedN++
			}
			if c := f.child(id); c.Status != want {
				t.Errorf("round %d: child %s, want %s", round, c.Status, want)
			}
			if cs, _ := f.claimChildren("w2", 10); len(cs) != 0 {
				t.Errorf("round %d: Claim after the race = %v, want none", round, childIDs(cs))
			}
		}
		t.Logf("of 50 races, %d claimed, %d stopped", claimedN, stoppedN)
		if n := f.activeChildren("c"); n != claimedN {
			t.Errorf("Active(c) = %d, want %d (the claimed ones run)", n, claimedN)
		}
	})
}

func runCompletionUnits(t *testing.T, b Backend) {
	// Children a, b of group "x", c and d ungrouped, e of group "y"; they
	// end in the order given, each end making the completion named (by
	// unit, with the results' task indexes) or none ("-").
	cases := []struct {
		desc        string
		independent bool
		order       []int
		want        []string
	}{
		{
			desc:        "independent: one per group, one per ungrouped task",
			independent: true,
			order:       []int{1, 2, 4, 0, 3},
			want:        []string{"-", "task:2 [2]", "group:y [4]", "group:x [0 1]", "task:3 [3]"},
		},
		{
			desc:        "not independent: groups do not count, one for all",
			independent: false,
			order:       []int{4, 0, 3, 2, 1},
			want:        []string{"-", "-", "-", "-", " [0 1 2 3 4]"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			g := newDelegation("deleg_1", "c", "a", "b", "c", "d", "e")
			g.Independent = tc.independent
			g.Children[0].Group, g.Children[1].Group, g.Children[4].Group = "x", "x", "y"
			g = f.dispatch(g)
			_, claims := f.claimChildren("w1", 5)
			var made []string
			for i, idx := range tc.order {
				c := f.endChild(claims[idx], done(fmt.Sprintf("task %d", idx)))
				got := "-"
				if c != nil {
					var tasks []int
					for _, r := range c.Results {
						tasks = append(tasks, r.TaskIndex)
					}
					got = fmt.Sprintf("%s %v", c.Unit, tasks)
					wantID := "cmp_" + g.ID
					if c.Unit != "" {
						wantID += ":" + c.Unit
					}
					if c.ID != wantID || c.Total != 5 {
						t.Errorf("end %d: completion id %q total %d, want %q and 5", i, c.ID, c.Total, wantID)
					}
					made = append(made, c.ID)
				}
				if got != tc.want[i] {
					t.Errorf("end %d (task %d): completion %q, want %q", i, idx, got, tc.want[i])
				}
			}
			var listed []string
			for _, c := range f.completionsOf(g.ID) {
				listed = append(listed, c.ID)
			}
			if d := cmp.Diff(made, listed); d != "" {
				t.Errorf("Completions, in the order made (-want +got):\n%s", d)
			}
		})
	}
}

func runReap(t *testing.T, b Backend) {
	t.Run("a claim run out ends its child unknown and completes", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b", "c"))
		cs, _ := f.claimChildren("w1", 2)
		if got := f.reap(10); len(got) != 0 {
			t.Errorf("Reap before any claim ran out = %v, want none", childIDs(got))
		}
		f.clk.Advance(ttl + tick)
		at := f.clk.Now()
		reaped := f.reap(10)
		var want []delegation.Child
		var rs []delegation.Result
		for _, c := range cs {
			e := ended(c, delegation.Reaped(c, at), at)
			want = append(want, e)
			rs = append(rs, *e.Result)
		}
		if d := cmp.Diff(want, reaped, timeOpts); d != "" {
			t.Errorf("Reap (-want +got):\n%s", d)
		}
		for _, c := range reaped {
			if c.Result == nil || c.Result.Error != delegation.UnknownError || c.Status != delegation.StatusUnknown {
				t.Errorf("reaped child %s: %s, result %+v; want unknown with %q", c.ID, c.Status, c.Result, delegation.UnknownError)
			}
		}
		if got := f.reap(10); len(got) != 0 {
			t.Errorf("second Reap = %v, want none", childIDs(got))
		}
		// The pending child was never claimed, so nothing ran out: the
		// delegation completes once it ends.
		if cmps := f.completionsOf(g.ID); len(cmps) != 0 {
			t.Errorf("Completions with a child pending = %+v, want none", cmps)
		}
		_, claims := f.claimChildren("w2", 1)
		last := f.endChild(claims[0], done("c"))
		third := ended(running(g.Children[2], "w2", claims[0].Token, at), done("c"), at)
		wantCmp := completionOf(g, "", at, append(rs, *third.Result)...)
		if d := cmp.Diff(wantCmp, last, timeOpts); d != "" {
			t.Errorf("completion (-want +got):\n%s", d)
		}
	})

	t.Run("the last child reaped makes the completion", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b"))
		cs, claims := f.claimChildren("w1", 2)
		f.endChild(claims[0], done("a"))
		f.clk.Advance(ttl + tick)
		at := f.clk.Now()
		if got := f.reap(10); !slices.Equal(childIDs(got), []string{cs[1].ID}) {
			t.Fatalf("Reap = %v, want %v", childIDs(got), []string{cs[1].ID})
		}
		want := completionOf(g, "", at,
			delegation.Ended(cs[0], done("a")), delegation.Reaped(cs[1], at))
		if d := cmp.Diff([]delegation.Completion{*want}, f.completionsOf(g.ID), timeOpts); d != "" {
			t.Errorf("Completions (-want +got):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 0 {
			t.Errorf("Active(c) = %d, want 0", n)
		}
	})

	t.Run("two concurrent reapers end each child once", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		views := []delegation.Store{f.dlg(), other.Delegations()}
		goals := make([]string, 12)
		for i := range goals {
			goals[i] = fmt.Sprintf("task %d", i)
		}
		g := f.dispatch(newDelegation("deleg_1", "c", goals...))
		f.claimChildren("w1", len(goals))
		f.clk.Advance(ttl + tick)

		var mu sync.Mutex
		count := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 4 {
			wg.Go(func() {
				<-start
				for {
					cs, err := views[i%len(views)].Reap(f.ctx, 2)
					if err != nil {
						t.Errorf("Reap: %v", err)
						return
					}
					if len(cs) == 0 {
						return
					}
					mu.Lock()
					for _, c := range cs {
						count[c.ID]++
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		want := map[string]int{}
		for _, c := range g.Children {
			want[c.ID] = 1
		}
		if d := cmp.Diff(want, count); d != "" {
			t.Errorf("children ended per reaper call (-want +got):\n%s", d)
		}
		cmps := f.completionsOf(g.ID)
		if len(cmps) != 1 || len(cmps[0].Results) != len(goals) {
			t.Errorf("Completions = %+v, want one with %d results", cmps, len(goals))
		}
	})
}

func runCompletionDelivery(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	// Two completions, a tick apart.
	var made []*delegation.Completion
	for i := range 2 {
		f.dispatch(newDelegation(fmt.Sprintf("deleg_%d", i), "c", "a"))
		_, claims := f.claimChildren("w1", 1)
		made = append(made, f.endChild(claims[0], done("a")))
		f.clk.Advance(tick)
	}
	first, second := made[0], made[1]

	got := f.claimCompletions("d1", 1)
	if len(got) != 1 || got[0].Completion.ID != first.ID {
		t.Fatalf("ClaimCompletions(1) = %+v, want the older, %s", got, first.ID)
	}
	c1 := got[0]
	if d := cmp.Diff(*first, c1.Completion, timeOpts); d != "" {
		t.Errorf("claimed completion (-want +got):\n%s", d)
	}
	if c1.Worker != "d1" || !c1.Expires.Equal(f.clk.Now().Add(ttl)) {
		t.Errorf("claim: worker %q, expires %v; want d1 and %v", c1.Worker, c1.Expires, f.clk.Now().Add(ttl))
	}
	if got := f.claimCompletions("d2", 10); len(got) != 1 || got[0].Completion.ID != second.ID {
		t.Fatalf("ClaimCompletions while the first is claimed = %+v, want only %s", got, second.ID)
	}
	if got := f.claimCompletions("d2", 10); len(got) != 0 {
		t.Errorf("ClaimCompletions with both claimed = %+v, want none", got)
	}

	// d1's claim runs out; d2 takes the first over with a new token.
	f.clk.Advance(ttl + tick)
	got = f.claimCompletions("d2", 1)
	if len(got) != 1 || got[0].Completion.ID != first.ID {
		t.Fatalf("ClaimCompletions after the claim ran out = %+v, want %s", got, first.ID)
	}
	c2 := got[0]
	if c2.Token == c1.Token {
		t.Errorf("the new claim's token %d is the old one's", c2.Token)
	}
	wantCode(t, "AckCompletion of the lapsed claim", f.dlg().AckCompletion(f.ctx, c1), errs.LeaseLost)
	wantCode(t, "RetryCompletion of the lapsed claim", f.dlg().RetryCompletion(f.ctx, c1, time.Second, "late"), errs.LeaseLost)

	// Retry: due after the delay, attempts counted, the reason kept.
	if err := f.dlg().RetryCompletion(f.ctx, c2, time.Minute, "queue busy"); err != nil {
		t.Fatalf("RetryCompletion: %v", err)
	}
	wantCode(t, "AckCompletion of a claim given back", f.dlg().AckCompletion(f.ctx, c2), errs.LeaseLost)
	f.clk.Advance(time.Minute - tick)
	for _, c := range f.claimCompletions("d3", 10) {
		if c.Completion.ID == first.ID {
			t.Errorf("ClaimCompletions before the retry delay passed took %s", first.ID)
		}
	}
	f.clk.Advance(tick)
	got = f.claimCompletions("d3", 10)
	var c3 *delegation.CompletionClaim
	for i := range got {
		if got[i].Completion.ID == first.ID {
			c3 = &got[i]
		}
	}
	if c3 == nil {
		t.Fatalf("ClaimCompletions after the retry delay = %+v, want %s among them", got, first.ID)
	}
	if c3.Completion.Attempts != 1 || c3.Completion.LastError != "queue busy" {
		t.Errorf("retried completion: attempts %d, last error %q; want 1, %q", c3.Completion.Attempts, c3.Completion.LastError, "queue busy")
	}

	// Ack: delivered, and never claimed again.
	at := f.clk.Now()
	if err := f.dlg().AckCompletion(f.ctx, *c3); err != nil {
		t.Fatalf("AckCompletion: %v", err)
	}
	wantCode(t, "AckCompletion again", f.dlg().AckCompletion(f.ctx, *c3), errs.LeaseLost)
	wantCode(t, "RetryCompletion after the ack", f.dlg().RetryCompletion(f.ctx, *c3, 0, "x"), errs.LeaseLost)
	want := *first
	want.Delivered, want.DeliveredAt, want.Attempts, want.LastError = true, at, 1, "queue busy"
	if d := cmp.Diff([]delegation.Completion{want}, f.completionsOf(first.Delegation), timeOpts); d != "" {
		t.Errorf("Completions after the ack (-want +got):\n%s", d)
	}
	f.clk.Advance(10 * ttl)
	for _, c := range f.claimCompletions("d4", 10) {
		if c.Completion.ID == first.ID {
			t.Errorf("ClaimCompletions took the delivered %s", first.ID)
		}
	}
	_, err := f.dlg().ClaimCompletions(f.ctx, "", 1, ttl)
	wantCode(t, "ClaimCompletions without a worker", err, errs.Invalid)
}

func runDelegationDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		g := f.dispatch(newDelegation("deleg_1", "c", "a", "b", "c"))
		done1 := f.dispatch(newDelegation("deleg_2", "c", "x"))
		// deleg_1's children are claimed first: a ends, b and c keep
		// running; deleg_2's only child ends and its completion is
		// claimed for delivery.
		_, claims := f.claimChildren("w1", 3)
		f.endChild(claims[0], done("a"))
		if claims[2].Name != g.Children[2].ID {
			t.Fatalf("third claim is %s, want %s", claims[2].Name, g.Children[2].ID)
		}
		_, more := f.claimChildren("w1", 1)
		cmp2 := f.endChild(more[0], done("x"))
		cc := f.claimCompletions("d1", 1)
		if len(cc) != 1 || cmp2 == nil {
			t.Fatalf("completion of %s: %+v, claims %+v", done1.ID, cmp2, cc)
		}
		before := []delegation.Delegation{f.delegation(g.ID), f.delegation(done1.ID)}
		cmpsBefore := f.completionsOf(done1.ID)
		lastToken := more[0].Token

		f.reopen(restart)

		after := []delegation.Delegation{f.delegation(g.ID), f.delegation(done1.ID)}
		if d := cmp.Diff(before, after, timeOpts); d != "" {
			t.Errorf("delegations after reopening (-before +after):\n%s", d)
		}
		if d := cmp.Diff(cmpsBefore, f.completionsOf(done1.ID), timeOpts); d != "" {
			t.Errorf("completions after reopening (-before +after):\n%s", d)
		}
		if n := f.activeChildren("c"); n != 2 {
			t.Errorf("Active(c) after reopening = %d, want 2", n)
		}
		// The claims made before still hold, and the completion claim too.
		held, err := f.dlg().Renew(f.ctx, claims[1:3], ttl, nil)
		if err != nil || len(held) != 2 {
			t.Errorf("Renew after reopening = %+v, %v; want both claims", held, err)
		}
		if err := f.dlg().AckCompletion(f.ctx, cc[0]); err != nil {
			t.Errorf("AckCompletion after reopening: %v", err)
		}
		f.endChild(claims[1], done("b"))
		if cmp := f.endChild(claims[2], done("c")); cmp == nil || len(cmp.Results) != 3 {
			t.Errorf("last End after reopening = %+v, want a completion of 3", cmp)
		}
		// A later grant's token is above every earlier one.
		f.dispatch(newDelegation("deleg_3", "c", "z"))
		_, late := f.claimChildren("w2", 1)
		if len(late) != 1 || late[0].Token <= lastToken {
			t.Errorf("claim after reopening = %+v, want a token above %d", late, lastToken)
		}
	})
}
