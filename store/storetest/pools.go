package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
)

// runPools runs the conformance cases of llm.PoolStore.
func runPools(t *testing.T, b Backend) {
	t.Run("uses, marks and the store's clock", func(t *testing.T) { runPoolStates(t, b) })
	t.Run("a mark only lengthens; a revival clears it", func(t *testing.T) { runPoolMarkLengthens(t, b) })
	t.Run("two processes share a pool's cooling", func(t *testing.T) { runPoolShared(t, b) })
	t.Run("a conversation's key", func(t *testing.T) { runPoolSticky(t, b) })
	t.Run("two processes keep a conversation on one key", func(t *testing.T) { runPoolStickyShared(t, b) })
	t.Run("one key with nowhere to go is tried again", func(t *testing.T) { runPoolOfOneKey(t, b) })
	t.Run("durability", func(t *testing.T) { runPoolDurability(t, b) })
	t.Run("a count of uses", func(t *testing.T) { runPoolCountUses(t, b) })
	t.Run("invalid arguments", func(t *testing.T) { runPoolInvalid(t, b) })
}

func (f *fixture) pools() llm.PoolStore { return f.st.Pools() }

// keyStates reads pool's states by id, checking the clock read with them.
func (f *fixture) keyStates(pool string) map[string]llm.KeyState {
	f.t.Helper()
	out := map[string]llm.KeyState{}
	for _, s := range f.readPool(pool, "").Keys {
		out[s.ID] = s
	}
	return out
}

// readPool reads pool for conv, checking the clock read with it.
func (f *fixture) readPool(pool, conv string) llm.PoolRead {
	f.t.Helper()
	r, err := f.pools().ReadPool(f.ctx, pool, conv)
	if err != nil {
		f.t.Fatalf("ReadPool(%s, %s): %v", pool, conv, err)
	}
	if d := r.Now.Sub(f.clk.Now()); d < -time.Millisecond || d > time.Millisecond {
		f.t.Errorf("ReadPool's clock = %v, want the store's %v", r.Now, f.clk.Now())
	}
	return r
}

func (f *fixture) useKey(pool, id string) { f.useKeyFor(pool, id, "") }

func (f *fixture) useKeyFor(pool, id, conv string) {
	f.t.Helper()
	if err := f.pools().UseKey(f.ctx, pool, id, conv); err != nil {
		f.t.Fatalf("UseKey(%s, %s, %s): %v", pool, id, conv, err)
	}
}

func (f *fixture) markKey(pool string, s llm.KeyState) {
	f.t.Helper()
	if err := f.pools().MarkKey(f.ctx, pool, s); err != nil {
		f.t.Fatalf("MarkKey(%s, %+v): %v", pool, s, err)
	}
}

func runPoolStates(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	if got := f.keyStates("p"); len(got) != 0 {
		t.Errorf("a new pool has states %v", got)
	}
	now, err := f.pools().Now(f.ctx)
	if err != nil || now.Sub(t0).Abs() > time.Millisecond {
		t.Errorf("Now = %v, %v; want %v", now, err, t0)
	}
	f.useKey("p", "k_a")
	f.useKey("p", "k_a")
	f.useKey("p", "k_b")
	f.useKey("other", "k_a")
	until := t0.Add(time.Hour)
	f.markKey("p", llm.KeyState{ID: "k_a", CoolingUntil: until, Reason: llm.ClassPayment})
	f.markKey("p", llm.KeyState{ID: "k_c", Reason: llm.ClassAuth, DeadFor: "gen1"})
	got := f.keyStates("p")
	if a, b := got["k_a"], got["k_b"]; a.Uses != 2 || b.Uses != 1 || a.LastUse >= b.LastUse {
		t.Errorf("uses: a %+v, b %+v; want 2 and 1, b used last", a, b)
	}
	want := map[string]llm.KeyState{
		"k_a": {ID: "k_a", CoolingUntil: until, Reason: llm.ClassPayment, Uses: 2},
		"k_b": {ID: "k_b", Uses: 1},
		"k_c": {ID: "k_c", Reason: llm.ClassAuth, DeadFor: "gen1"},
	}
	ignoreSeq := cmpopts.IgnoreFields(llm.KeyState{}, "LastUse")
	if diff := cmp.Diff(want, got, timeOpts, ignoreSeq); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	// A revival clears the marks, and keeps the uses.
	if err := f.pools().ReviveKey(f.ctx, "p", "k_a"); err != nil {
		t.Fatal(err)
	}
	if a := f.keyStates("p")["k_a"]; !a.CoolingUntil.IsZero() || a.Reason != "" || a.Uses != 2 {
		t.Errorf("k_a after reviving = %+v", a)
	}
	if o := f.keyStates("other"); len(o) != 1 || o["k_a"].Uses != 1 {
		t.Errorf("the other pool = %+v, want its own single use", o)
	}
}

// runPoolMarkLengthens: requests in flight on one key mark it after one
// of them declared it dead or cooled it long; a later, shorter mark
// leaves the longer, in one store step, and a dead mark stays until
// revived.
func runPoolMarkLengthens(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.useKey("p", "k_a")
	f.markKey("p", llm.KeyState{ID: "k_a", Reason: llm.ClassAuth, DeadFor: "gen1"})
	f.markKey("p", llm.KeyState{ID: "k_a", CoolingUntil: t0.Add(30 * time.Second), Reason: llm.ClassRateLimited})
	f.markKey("p", llm.KeyState{ID: "k_b", CoolingUntil: t0.Add(time.Hour), Reason: llm.ClassPayment})
	f.markKey("p", llm.KeyState{ID: "k_b", CoolingUntil: t0.Add(30 * time.Second), Reason: llm.ClassRateLimited})
	ignoreSeq := cmpopts.IgnoreFields(llm.KeyState{}, "LastUse")
	want := map[string]llm.KeyState{
		"k_a": {ID: "k_a", CoolingUntil: t0.Add(30 * time.Second), Reason: llm.ClassAuth, DeadFor: "gen1", Uses: 1},
		"k_b": {ID: "k_b", CoolingUntil: t0.Add(time.Hour), Reason: llm.ClassPayment},
	}
	if diff := cmp.Diff(want, f.keyStates("p"), timeOpts, ignoreSeq); diff != "" {
		t.Errorf("after shorter marks (-want +got):\n%s", diff)
	}
	// A longer cooling, then a dead mark, do lengthen it.
	f.markKey("p", llm.KeyState{ID: "k_b", CoolingUntil: t0.Add(2 * time.Hour), Reason: llm.ClassRateLimited})
	if got := f.keyStates("p")["k_b"]; got.Reason != llm.ClassRateLimited || got.CoolingUntil.Sub(t0.Add(2*time.Hour)).Abs() > time.Millisecond {
		t.Errorf("k_b after a longer cooling = %+v", got)
	}
	f.markKey("p", llm.KeyState{ID: "k_b", Reason: llm.ClassAuth, DeadFor: "gen2"})
	f.markKey("p", llm.KeyState{ID: "k_b", CoolingUntil: t0.Add(time.Minute), Reason: llm.ClassAuth})
	if got := f.keyStates("p")["k_b"]; got.Reason != llm.ClassAuth || got.DeadFor != "gen2" || got.CoolingUntil.Sub(t0.Add(2*time.Hour)).Abs() > time.Millisecond {
		t.Errorf("k_b after a dead mark = %+v", got)
	}
	for _, id := range []string{"k_a", "k_b"} {
		if err := f.pools().ReviveKey(f.ctx, "p", id); err != nil {
			t.Fatalf("ReviveKey(%s): %v", id, err)
		}
	}
	want = map[string]llm.KeyState{"k_a": {ID: "k_a", Uses: 1}, "k_b": {ID: "k_b"}}
	if diff := cmp.Diff(want, f.keyStates("p"), timeOpts, ignoreSeq); diff != "" {
		t.Errorf("after reviving (-want +got):\n%s", diff)
	}
	f.markKey("p", llm.KeyState{ID: "k_a", CoolingUntil: t0.Add(time.Minute), Reason: llm.ClassRateLimited})
	if got := f.keyStates("p")["k_a"]; got.Reason != llm.ClassRateLimited || got.DeadFor != "" {
		t.Errorf("k_a marked after reviving = %+v", got)
	}
}

// runPoolShared: two processes, each a store of its own on the place and
// a client through a pool over it, share the model's keys. A key one
// found out of credit is left alone by the other, which calls no server
// with it, until the cooling ends on the store's clock.
func runPoolShared(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	other, _ := openStore(t, f.place, f.clk, f.lim)
	ms := testkit.NewModelServer(t)
	ms.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if r.APIKey() == "sk-first-key-0001" && r.Seq == 1 {
			return testkit.Fail(402, "Payment required")
		}
		return testkit.Reply("from " + r.APIKey())
	})
	client := func(st Store) llm.Client {
		pool, err := llm.NewPool(llm.PoolOptions{Name: "main", Store: st.Pools(),
			Credentials: []llm.Credential{{Key: "sk-first-key-0001"}, {Key: "sk-second-key-0002"}}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: "m", MaxRetries: -1, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b2 := client(f.st), client(other)
	req := llm.Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}}
	ask := func(c llm.Client) string {
		t.Helper()
		resp, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		return resp.Message.Content
	}
	if got := ask(a); got != "from sk-second-key-0002" {
		t.Errorf("first process: %q, want the second key's reply", got)
	}
	if got := ask(b2); got != "from sk-second-key-0002" {
		t.Errorf("second process: %q, want the second key's reply", got)
	}
	if ms.Count() != 3 {
		t.Errorf("%d calls, want 3: the second process never sent the cooling key", ms.Count())
	}
	f.clk.Advance(llm.DefaultBillingCooldown)
	if got := ask(b2); got != "from sk-first-key-0001" {
		t.Errorf("after the cooling: %q, want the first key again", got)
	}
}

// runPoolOfOneKey: a pool of one key and no fallback leaves no mark for
// a refusal of its key, so each request, with no time passed on the
// store's clock, tries the key again; with a fallback after it, the
// same refusal marks the key dead for every pool on the store, and the
// pool of one still tries it.
func runPoolOfOneKey(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	const key = "sk-only-key-00001"
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Fail(401, "Incorrect API key provided"), testkit.Fail(402, "Payment required"), testkit.Reply("back"),
		testkit.Fail(401, "Incorrect API key provided"), testkit.Reply("still tried"))
	client := func(fallback bool) llm.Client {
		pool, err := llm.NewPool(llm.PoolOptions{Name: "one", Store: f.pools(), Credentials: []llm.Credential{{Key: key}}, Fallback: fallback})
		if err != nil {
			t.Fatal(err)
		}
		c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: "m", MaxRetries: -1, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alone, withFallback := client(false), client(true)
	req := llm.Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}}
	var got []string
	for _, c := range []llm.Client{alone, alone, alone, withFallback, alone} {
		resp, err := c.Complete(f.ctx, req)
		switch {
		case err != nil:
			got = append(got, string(llm.ClassOf(err)))
		default:
			got = append(got, resp.Message.Content)
		}
		if len(got) == 3 {
			if st, ok := f.keyStates("one")[llm.KeyID(key)]; ok && (st.DeadFor != "" || !st.CoolingUntil.IsZero()) {
				t.Errorf("the only key after a 401 and a 402 = %+v, want no mark", st)
			}
		}
	}
	if want := []string{"auth", "payment", "back", "auth", "still tried"}; !cmp.Equal(got, want) {
		t.Errorf("answers = %q, want %q", got, want)
	}
	if st := f.keyStates("one")[llm.KeyID(key)]; st.DeadFor == "" {
		t.Errorf("the key after a revoking 401 in a pool with a fallback = %+v, want dead", st)
	}
}

// runPoolSticky: a use for a conversation makes the key its key, read
// with the pool's states, per pool, until StickyTTL on the store's clock.
func runPoolSticky(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	sticky := func(pool, conv string) string { t.Helper(); return f.readPool(pool, conv).Sticky }
	f.useKeyFor("p", "k_a", "x")
	f.useKeyFor("p", "k_b", "y")
	f.useKey("p", "k_c")
	if got := []string{sticky("p", "x"), sticky("p", "y"), sticky("p", "z"), sticky("p", ""), sticky("q", "x")}; !cmp.Equal(got, []string{"k_a", "k_b", "", "", ""}) {
		t.Errorf("sticky keys of x, y, z, none, x on another pool = %q", got)
	}
	if r := f.readPool("p", "x"); len(r.Keys) != 3 {
		t.Errorf("the read for x has %d keys, want the pool's 3", len(r.Keys))
	}
	// A rotation moves it; the count of uses is the pool's as ever.
	f.useKeyFor("p", "k_c", "x")
	if got := sticky("p", "x"); got != "k_c" {
		t.Errorf("x after moving = %q, want k_c", got)
	}
	if c := f.keyStates("p")["k_c"]; c.Uses != 2 {
		t.Errorf("k_c = %+v, want 2 uses", c)
	}
	// Silent past StickyTTL, a conversation chooses again.
	f.clk.Advance(llm.StickyTTL - time.Second)
	f.useKeyFor("p", "k_b", "y")
	f.clk.Advance(time.Second)
	if got, gotY := sticky("p", "x"), sticky("p", "y"); got != "" || gotY != "k_b" {
		t.Errorf("after StickyTTL: x %q, y %q; want x forgotten, y (used since) kept", got, gotY)
	}
}

// runPoolStickyShared: two processes, each a pool over a store of its
// own on one place, keep a conversation on the key it began on, where
// their round robin alone would move it.
func runPoolStickyShared(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	other, _ := openStore(t, f.place, f.clk, f.lim)
	pool := func(st Store) *llm.Pool {
		p, err := llm.NewPool(llm.PoolOptions{Name: "main", Store: st.Pools(), Strategy: llm.RoundRobin,
			Credentials: []llm.Credential{{Key: "sk-first-key-0001"}, {Key: "sk-second-key-0002"}, {Key: "sk-third-key-0003"}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b2 := pool(f.st), pool(other)
	choose := func(p *llm.Pool, conv string) string {
		t.Helper()
		id, err := p.Choose(f.ctx, conv)
		if err != nil {
			t.Fatalf("Choose(%s): %v", conv, err)
		}
		return id
	}
	first := choose(a, "conv-x")
	var got, others []string
	for i := range 4 {
		// Requests of no conversation move the round robin on.
		others = append(others, choose([]*llm.Pool{a, b2}[i%2], ""), choose([]*llm.Pool{b2, a}[i%2], ""))
		got = append(got, choose([]*llm.Pool{b2, a}[i%2], "conv-x"))
	}
	if want := []string{first, first, first, first}; !cmp.Equal(got, want) {
		t.Errorf("conv-x's keys on the two processes = %q, want %q throughout", got, first)
	}
	if slices.Sort(others); len(slices.Compact(others)) < 2 {
		t.Errorf("the other requests took %q: want the round robin moving on", others)
	}
	if z := choose(b2, "conv-z"); z == first {
		t.Errorf("a new conversation took %q, conv-x's: its round robin would not have moved conv-x", z)
	}
}

func runPoolDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		f.useKeyFor("p", "k_a", "x")
		f.markKey("p", llm.KeyState{ID: "k_a", CoolingUntil: t0.Add(time.Minute), Reason: llm.ClassRateLimited})
		f.reopen(restart)
		a := f.keyStates("p")["k_a"]
		if a.Uses != 1 || a.Reason != llm.ClassRateLimited || a.CoolingUntil.Sub(t0.Add(time.Minute)).Abs() > time.Millisecond {
			t.Errorf("k_a after reopening = %+v", a)
		}
		if got := f.readPool("p", "x").Sticky; got != "k_a" {
			t.Errorf("x's key after reopening = %q, want k_a", got)
		}
	})
}

func runPoolInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	wantCode(t, "UseKey without an id", f.pools().UseKey(f.ctx, "p", "", "x"), errs.Invalid)
	wantCode(t, "UseKey without a pool", f.pools().UseKey(f.ctx, "", "k", "x"), errs.Invalid)
	wantCode(t, "MarkKey without an id", f.pools().MarkKey(f.ctx, "p", llm.KeyState{}), errs.Invalid)
	wantCode(t, "ReviveKey without an id", f.pools().ReviveKey(f.ctx, "p", ""), errs.Invalid)
	wantCode(t, "CountUses without a pool", f.pools().CountUses(f.ctx, "", []llm.KeyUses{{ID: "k", N: 1}}), errs.Invalid)
	wantCode(t, "CountUses without an id", f.pools().CountUses(f.ctx, "p", []llm.KeyUses{{N: 1}}), errs.Invalid)
	wantCode(t, "CountUses of no use", f.pools().CountUses(f.ctx, "p", []llm.KeyUses{{ID: "k", N: 0}}), errs.Invalid)
	if got := f.keyStates("p"); len(got) != 0 {
		t.Errorf("refused calls left %v", got)
	}
}

// runPoolCountUses: the uses a pool counted come in one call, in order:
// each key's count added, the pool's use number moved on by each count,
// the last key of the call the pool's most recently used, beside the
// uses counted one by one.
func runPoolCountUses(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.useKey("p", "k_a")
	if err := f.pools().CountUses(f.ctx, "p", []llm.KeyUses{{ID: "k_b", N: 3}, {ID: "k_a", N: 2}}); err != nil {
		t.Fatal(err)
	}
	got := f.keyStates("p")
	a, b2 := got["k_a"], got["k_b"]
	if a.Uses != 3 || b2.Uses != 3 || a.LastUse != 6 || b2.LastUse != 4 {
		t.Errorf("after one use of a and a count of b 3, a 2: a %+v, b %+v; want 3 uses each, last uses 6 and 4", a, b2)
	}
	f.useKey("p", "k_b")
	if got := f.keyStates("p")["k_b"]; got.Uses != 4 || got.LastUse != 7 {
		t.Errorf("b after one more use = %+v, want 4 uses, last use 7", got)
	}
	if err := f.pools().CountUses(f.ctx, "p", nil); err != nil {
		t.Errorf("an empty count: %v", err)
	}
}
