package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
)

// treesJSON is GET /api/v1/delegations's answer.
type treesJSON struct {
	Delegations []delegation.Tree `json:"delegations"`
}

func (f *delegationFixture) list(t *testing.T, query string) []delegation.Tree {
	t.Helper()
	code, b := f.do(t, "GET", "/api/v1/delegations"+query, "")
	if code != http.StatusOK {
		t.Fatalf("list %s: %d %s", query, code, b)
	}
	var got treesJSON
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("list %s: %s: %v", query, b, err)
	}
	return got.Delegations
}

// claimOf is the claim among claims of child id.
func claimOf(t *testing.T, claims []delegation.Claim, id string) delegation.Claim {
	t.Helper()
	for _, c := range claims {
		if c.Name == id {
			return c
		}
	}
	t.Fatalf("no claim of %s among %v", id, claims)
	return delegation.Claim{}
}

// branchOf is the branch of child id in trees, workers included.
func branchOf(trees []delegation.Tree, id string) *delegation.Branch {
	var find func(bs []delegation.Branch) *delegation.Branch
	find = func(bs []delegation.Branch) *delegation.Branch {
		for i := range bs {
			if bs[i].ID == id {
				return &bs[i]
			}
			if b := find(bs[i].Workers); b != nil {
				return b
			}
		}
		return nil
	}
	for _, tr := range trees {
		if b := find(tr.Children); b != nil {
			return b
		}
	}
	return nil
}

// The list is the delegations newest first, each child with its
// current tool, tokens and cost while it runs and its result's once it
// ended, an orchestrator's workers under it; it narrows to a
// conversation (key or API id), to the active ones, and to a limit.
func TestDelegationList(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := newDelegationFixture(t, func(o *api.Options) { o.Clock = clk })
	ctx := context.Background()
	first := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "read the logs"}, {"goal": "plan", "role": "orchestrator"}]}`)
	claims := f.claim(t)
	reader, planner := first.Children[0].ID, first.Children[1].ID
	if _, err := f.store.End(ctx, claimOf(t, claims, reader), delegation.Result{
		Status: delegation.StatusCompleted, Summary: "the logs are clean", APICalls: 2, InputTokens: 100, OutputTokens: 50, Model: "priced",
	}); err != nil {
		t.Fatal(err)
	}
	// The orchestrator's worker, started in its run.
	worker := delegation.Child{ID: "sub_w1", Delegation: "deleg_w1", Task: delegation.Task{Goal: "look closer", Role: delegation.RoleLeaf}}
	wclaims, err := f.store.Start(ctx, delegation.Dispatch{Delegation: delegation.Delegation{
		ID: "deleg_w1", Conv: "api:demo", Source: "orchestrator", Orchestrator: planner, CreatedAt: time.Now(),
		Children: []delegation.Child{worker},
	}}, "elsewhere", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Renew(ctx, []delegation.Claim{claimOf(t, claims, planner), wclaims[0]}, time.Minute, map[string]delegation.Progress{
		planner:  {APICalls: 3, CurrentTool: "delegate_task", InputTokens: 1000, OutputTokens: 500, Model: "priced"},
		"sub_w1": {APICalls: 1, CurrentTool: "terminal", InputTokens: 10, OutputTokens: 5, Model: "unpriced"},
	}); err != nil {
		t.Fatal(err)
	}
	other := f.start(t, `{"conversation": "other", "goal": "count"}`)

	all := f.list(t, "")
	var ids []string
	for _, tr := range all {
		ids = append(ids, tr.ID)
	}
	if len(all) != 2 || all[0].ID != other.ID || all[1].ID != first.ID {
		t.Fatalf("list %v, want %s then %s (the workers under their orchestrator)", ids, other.ID, first.ID)
	}
	tr := all[1]
	if tr.Status != delegation.StatusRunning || tr.Conv != "api:demo" || tr.Done != 1 || tr.Total != 2 || len(tr.Children) != 2 {
		t.Errorf("tree %+v, want api:demo running, 1 of 2 done", tr)
	}
	ended := branchOf(all, reader)
	if ended == nil || ended.Status != delegation.StatusCompleted || ended.Summary != "the logs are clean" || ended.Tokens != 150 ||
		ended.APICalls != 2 || ended.CostUSD == nil || *ended.CostUSD != (100*2+50*10)/1e6 || ended.EndedAt.IsZero() {
		t.Errorf("the ended child %+v, want its result, tokens and cost", ended)
	}
	running := branchOf(all, planner)
	if running == nil || running.Status != delegation.StatusRunning || running.CurrentTool != "delegate_task" || running.Owner != "elsewhere" ||
		running.Tokens != 1500 || running.CostUSD == nil || *running.CostUSD != (1000*2+500*10)/1e6 || running.StartedAt.IsZero() {
		t.Errorf("the running child %+v, want its current tool, tokens and cost so far", running)
	}
	if running == nil || len(running.Workers) != 1 || running.Workers[0].ID != "sub_w1" {
		t.Fatalf("the orchestrator's workers %+v, want sub_w1 under it", running)
	}
	if w := running.Workers[0]; w.Status != delegation.StatusRunning || w.CurrentTool != "terminal" || w.Tokens != 15 || w.CostUSD != nil || w.Delegation != "deleg_w1" {
		t.Errorf("the worker %+v, want running in terminal, 15 tokens, no price for its model", w)
	}

	if got := f.list(t, "?conversation=other"); len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("?conversation=other: %+v, want only its delegation", got)
	}
	if got := f.list(t, "?conversation=api:demo&limit=1"); len(got) != 1 || got[0].Orchestrator != planner {
		t.Errorf("?conversation=api:demo&limit=1: %+v, want the newest, the workers, naming their orchestrator", got)
	}
	f.end(t, claimOf(t, claims, planner), "planned")
	f.end(t, wclaims[0], "looked")
	if got := f.list(t, "?active=1"); len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("?active=1: %+v, want only the delegation still running", got)
	}
	if got := f.list(t, "?conversation=nobody"); got == nil || len(got) != 0 {
		t.Errorf("a conversation without delegations: %+v, want []", got)
	}

	for _, q := range []string{"?limit=0", "?limit=x", "?active=maybe", "?conversation=a/b"} {
		code, b := f.do(t, "GET", "/api/v1/delegations"+q, "")
		if code != http.StatusBadRequest || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("GET %s: %d %s, want 400", q, code, b)
		}
	}
}

// The list is live: a stream sends it again when a child's progress
// changes, read on the API's clock.
func TestDelegationListIsLive(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := newDelegationFixture(t, func(o *api.Options) { o.Clock = clk })
	ctx := context.Background()
	started := f.start(t, `{"conversation": "demo", "goal": "work"}`)
	claims := f.claim(t)

	next := f.stream(t, "/api/v1/delegations?conversation=demo")
	if ev := next(); !strings.Contains(ev, started.ID) || strings.Contains(ev, "current_tool") {
		t.Fatalf("first event %s, want the delegation with no tool running", ev)
	}
	waitArmed(t, clk, 2)
	if _, err := f.store.Renew(ctx, claims, time.Minute, map[string]delegation.Progress{
		claims[0].Name: {APICalls: 1, CurrentTool: "terminal"},
	}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(500 * time.Millisecond)
	if ev := next(); !strings.Contains(ev, `"current_tool":"terminal"`) {
		t.Fatalf("after the progress: %s, want the child in terminal", ev)
	}
}

// A child is stopped on its own: the stop goes to it alone and it ends
// cancelled; one that has ended, or is not the delegation's, is not.
func TestDelegationChildStop(t *testing.T) {
	f := newDelegationFixture(t, nil)
	ctx := context.Background()
	started := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "a"}, {"goal": "b"}]}`)
	claims := f.claim(t) // both run elsewhere
	a, b := started.Children[0].ID, started.Children[1].ID
	_, from, err := f.db.Signals().SignalsAfter(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}

	path := "/api/v1/delegations/" + started.ID + "/children/"
	code, body := f.do(t, "POST", path+a+"/stop", "")
	if got := decodeDelegation(t, body); code != http.StatusOK || len(got.Stopping) != 1 || got.Stopping[0] != a {
		t.Fatalf("stop %s: %d %s, want it stopping", a, code, body)
	}
	sigs, _, err := f.db.Signals().SignalsAfter(ctx, from, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0].Kind != delegation.SignalCancel || sigs[0].Target != a || sigs[0].Conv != "api:demo" {
		t.Errorf("signals %+v, want one delegation.cancel to %s", sigs, a)
	}

	f.end(t, claimOf(t, claims, b), "done")
	code, body = f.do(t, "POST", path+b+"/stop", "")
	if got := decodeDelegation(t, body); code != http.StatusOK || len(got.Stopping) != 0 {
		t.Errorf("stop of an ended child: %d %s, want 200 stopping none", code, body)
	}
	code, body = f.do(t, "POST", path+"sub_nope/stop", "")
	if code != http.StatusNotFound || !strings.Contains(string(body), "sub_nope") {
		t.Errorf("stop of another's child: %d %s, want 404 naming it", code, body)
	}
	code, body = f.do(t, "POST", path+a+"/stop?conversation=other", "")
	if code != http.StatusNotFound {
		t.Errorf("stop scoped to another conversation: %d %s, want 404", code, body)
	}

	// A child no instance has started yet ends at once, cancelled.
	pending := f.start(t, `{"conversation": "demo", "goal": "later"}`)
	id := pending.Children[0].ID
	code, body = f.do(t, "POST", "/api/v1/delegations/"+pending.ID+"/children/"+id+"/stop", "")
	if code != http.StatusOK {
		t.Fatalf("stop of a pending child: %d %s", code, body)
	}
	if c, err := f.store.Child(ctx, id); err != nil || c.Status != delegation.StatusCancelled {
		t.Errorf("the pending child after its stop: %s (%v), want cancelled", c.Status, err)
	}
}

// A child's transcript is the log this instance keeps of it; a
// worker's, its lines in its orchestrator's log; none kept is a 404
// that says so.
func TestDelegationChildTranscript(t *testing.T) {
	clk := clock.NewFake(epoch)
	f := newDelegationFixture(t, func(o *api.Options) { o.Clock = clk })
	ctx := context.Background()
	started := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "plan", "role": "orchestrator"}, {"goal": "b"}]}`)
	d, err := f.store.Delegation(ctx, started.ID)
	if err != nil {
		t.Fatal(err)
	}
	planner, other := d.Children[0], d.Children[1]
	f.transcripts.Dispatched(delegation.Delegation{ID: d.ID, Conv: d.Conv, Children: []delegation.Child{planner}}, epoch)
	f.transcripts.Open(d, planner, epoch).End(epoch.Add(time.Second), delegation.Result{Status: delegation.StatusCompleted})

	path := "/api/v1/delegations/" + started.ID + "/children/"
	code, body := f.do(t, "GET", path+planner.ID+"/transcript", "")
	var got delegation.ChildLog
	if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil {
		t.Fatalf("transcript: %d %s (%v)", code, body, err)
	}
	if got.Child != planner.ID || got.Delegation != started.ID || !strings.Contains(got.Text, "dispatched "+planner.ID) || !strings.Contains(got.Text, "ended completed") {
		t.Errorf("transcript %+v, want the child's log from its dispatch to its end", got)
	}

	code, body = f.do(t, "GET", path+other.ID+"/transcript", "")
	if code != http.StatusNotFound || !strings.Contains(string(body), "no transcript of "+other.ID) {
		t.Errorf("a child with no transcript here: %d %s, want 404 saying so", code, body)
	}
	code, body = f.do(t, "GET", path+"sub_nope/transcript", "")
	if code != http.StatusNotFound || !strings.Contains(string(body), "sub_nope") {
		t.Errorf("another's child: %d %s, want 404 naming it", code, body)
	}
	code, _ = f.do(t, "GET", path+planner.ID+"/transcript?conversation=other", "")
	if code != http.StatusNotFound {
		t.Errorf("a transcript scoped to another conversation: %d, want 404", code)
	}
}
