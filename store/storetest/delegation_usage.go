package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/sessions"
)

// runChildUsage holds a child's tokens rolling up into its parent
// conversation's totals (delegation.ParentUsage) in the step that
// records its end, End's or Reap's, on the child's model, beside the
// conversation's own turns' tokens.
func runChildUsage(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	if err := f.commitWrites("c", sessions.Usage{Conv: "c", Model: "main", Prompt: 100, Completion: 10}); err != nil {
		t.Fatal(err)
	}
	g := f.dispatch(newDelegation("deleg_1", "c", "one", "two", "three"))
	_, claims := f.claimChildren("w1", 3)
	r := done("ok")
	r.Model, r.InputTokens, r.OutputTokens = "small", 40, 4
	f.endChild(claims[0], r)
	r.InputTokens, r.OutputTokens = 2, 1
	f.endChild(claims[1], r)
	// The third's owner dies after reporting its progress.
	p := delegation.Progress{APICalls: 1, InputTokens: 7, OutputTokens: 3, Model: "small"}
	if _, err := f.dlg().Renew(f.ctx, claims[2:], ttl, map[string]delegation.Progress{g.Children[2].ID: p}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(ttl + tick)
	if got := f.reap(10); len(got) != 1 {
		t.Fatalf("Reap = %d children, want 1", len(got))
	}
	mp, mc := sessions.UsageKeys("main")
	sp, sc := sessions.UsageKeys("small")
	meta := f.meta("c")
	got := map[string]string{mp: meta[mp], mc: meta[mc], sp: meta[sp], sc: meta[sc]}
	want := map[string]string{mp: "100", mc: "10", sp: "49", sc: "8"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("conversation c's token totals (-want +got):\n%s", d)
	}
	if other := f.meta("d"); len(other) != 0 {
		t.Errorf("another conversation's metadata %v, want none", other)
	}
}
