package storetest

import (
	"testing"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runWorkersStart holds Start, the write of an orchestrator's workers:
// counted under the limit beside the conversation's other children as a
// dispatch is, running at once under the owner's claims, listed with
// the conversation's delegations, never handed out by Claim, and ending
// with their status but no completion and no tokens added to the
// conversation (its orchestrator's include them).
func runWorkersStart(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.dispatch(newDelegation("deleg_o", "c", "orchestrate"))
	_, oc := f.claimChildren("w1", 1)
	workers := newDelegation("deleg_w", "c", "one", "two")
	workers.Source, workers.Orchestrator = "orchestrator", oc[0].Name

	wantCode(t, "Start without an orchestrator", func() error {
		g := newDelegation("deleg_x", "c", "x")
		_, err := f.dlg().Start(f.ctx, delegation.Dispatch{Delegation: g}, "w1", ttl)
		return err
	}(), errs.Invalid)
	wantCode(t, "Create of an orchestrator's workers", f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: workers}), errs.Invalid)
	wantCode(t, "Start without an owner", func() error {
		_, err := f.dlg().Start(f.ctx, delegation.Dispatch{Delegation: workers}, "", ttl)
		return err
	}(), errs.Invalid)

	// Beside the orchestrator, two workers fit under 3, three do not.
	over := newDelegation("deleg_big", "c", "a", "b", "c")
	over.Orchestrator = oc[0].Name
	_, err := f.dlg().Start(f.ctx, delegation.Dispatch{Delegation: over, Limit: 3}, "w1", ttl)
	wantCode(t, "Start beyond the limit", err, errs.Conflict)
	if full, ok := delegation.FullOf(err); !ok || full.Running != 1 || full.Free() != 2 {
		t.Errorf("Start beyond the limit = %v, want a Full with 1 running and 2 free", err)
	}
	f.noDelegation(over.ID, over.Children...)

	at := f.clk.Now()
	claims, err := f.dlg().Start(f.ctx, delegation.Dispatch{Delegation: workers, Limit: 3}, "w1", ttl)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if len(claims) != 2 || claims[0].Name != workers.Children[0].ID || claims[1].Name != workers.Children[1].ID {
		t.Fatalf("Start claims = %+v, want one per worker in dispatch order", claims)
	}
	for _, c := range claims {
		if c.Owner != "w1" || c.Token <= oc[0].Token || !c.Expires.Equal(at.Add(ttl)) {
			t.Errorf("claim %+v, want owner w1, a token above %d, expiry %v", c, oc[0].Token, at.Add(ttl))
		}
		if got := f.child(c.Name); got.Status != delegation.StatusRunning || got.Owner != "w1" || got.Token != c.Token {
			t.Errorf("child %s = %s owned by %q under %d, want running under the claim", c.Name, got.Status, got.Owner, got.Token)
		}
	}
	if n := f.activeChildren("c"); n != 3 {
		t.Errorf("Active(c) = %d, want 3: the orchestrator and its workers", n)
	}
	err = f.dlg().Create(f.ctx, delegation.Dispatch{Delegation: newDelegation("deleg_more", "c", "more"), Limit: 3})
	if full, ok := delegation.FullOf(err); !ok || full.Running != 3 || full.Free() != 0 {
		t.Errorf("Create beside the workers = %v, want a Full with 3 running and none free", err)
	}
	if cs, _, err := f.dlg().Claim(f.ctx, "w2", 10, ttl); err != nil || len(cs) != 0 {
		t.Errorf("Claim after Start = %d children, %v; want none: the workers are running", len(cs), err)
	}
	listed := false
	for _, g := range f.listDelegations(delegation.Query{Conv: "c", Active: true}) {
		if g.ID == workers.ID {
			listed = g.Orchestrator == oc[0].Name && len(g.Children) == 2 && g.Source == "orchestrator"
		}
	}
	if !listed {
		t.Errorf("List(c, active) does not hold the workers as started")
	}
	renewed, err := f.dlg().Renew(f.ctx, claims, ttl, map[string]delegation.Progress{claims[1].Name: {APICalls: 1, InputTokens: 7, OutputTokens: 3, Model: "small"}})
	if err != nil || len(renewed) != 2 {
		t.Fatalf("Renew of the workers' claims = %d, %v; want both", len(renewed), err)
	}

	r := done("found it")
	r.Model, r.InputTokens, r.OutputTokens = "small", 40, 4
	if cmp := f.endChild(renewed[0], r); cmp != nil {
		t.Errorf("End of a worker made completion %s, want none", cmp.ID)
	}
	// The second's owner dies: reaped unknown, still no completion.
	f.clk.Advance(ttl + tick)
	if got := f.reap(10); len(got) != 2 {
		t.Fatalf("Reap = %d children, want 2 (the orchestrator and a worker)", len(got))
	}
	g := f.delegation(workers.ID)
	if g.Children[0].Status != delegation.StatusCompleted || g.Children[1].Status != delegation.StatusUnknown {
		t.Errorf("workers ended %s and %s, want completed and unknown", g.Children[0].Status, g.Children[1].Status)
	}
	if cmps := f.completionsOf(workers.ID); len(cmps) != 0 {
		t.Errorf("the workers' delegation has %d completions, want none", len(cmps))
	}
	if cmps := f.completionsOf("deleg_o"); len(cmps) != 1 {
		t.Errorf("the orchestrator's delegation has %d completions, want 1", len(cmps))
	}
	sp, sc := sessions.UsageKeys("small")
	if meta := f.meta("c"); meta[sp] != "" || meta[sc] != "" {
		t.Errorf("conversation c's totals on the workers' model = %q/%q, want none", meta[sp], meta[sc])
	}
	if n := f.activeChildren("c"); n != 0 {
		t.Errorf("Active(c) = %d after every end, want 0", n)
	}
}
