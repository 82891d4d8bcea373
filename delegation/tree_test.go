package delegation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
)

func TestPricesCost(t *testing.T) {
	prices := delegation.Prices(func(model string) (float64, float64, bool) { return 3, 15, model == "priced" })
	for _, tc := range []struct {
		desc   string
		prices delegation.Prices
		model  string
		want   *float64
	}{
		{desc: "a priced model", prices: prices, model: "priced", want: new((1000*3.0 + 200*15.0) / 1e6)},
		{desc: "a model without a price", prices: prices, model: "other"},
		{desc: "no prices", model: "priced"},
	} {
		if got := tc.prices.Cost(tc.model, 1000, 200); !cmp.Equal(got, tc.want) {
			t.Errorf("%s: cost %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// An orchestrator's workers whose delegation is not in the list are
// its progress's; a listed workers' delegation is under its
// orchestrator, not a tree of its own.
func TestForestWorkers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	orch := delegation.Child{ID: "sub_o", Delegation: "deleg_1", Status: delegation.StatusRunning, Task: delegation.Task{Goal: "plan", Role: delegation.RoleOrchestrator},
		Progress: delegation.Progress{CurrentTool: "delegate_task", Workers: []delegation.WorkerProgress{
			{ID: "sub_w1", Goal: "one", Status: delegation.StatusRunning, CurrentTool: "terminal", Tokens: 7},
			{ID: "sub_w2", Goal: "two", Status: delegation.StatusCompleted, Tokens: 9},
		}}}
	parent := delegation.Delegation{ID: "deleg_1", Conv: "api:x", CreatedAt: now, Children: []delegation.Child{orch}}
	workers := delegation.Delegation{ID: "deleg_2", Conv: "api:x", Orchestrator: "sub_o", CreatedAt: now.Add(time.Second), Children: []delegation.Child{
		{ID: "sub_w2", Delegation: "deleg_2", Status: delegation.StatusCompleted, Task: delegation.Task{Goal: "two"},
			Result: &delegation.Result{Status: delegation.StatusCompleted, Summary: "done", InputTokens: 4, OutputTokens: 5}},
	}}

	got := delegation.Forest([]delegation.Delegation{parent}, nil)
	if len(got) != 1 || len(got[0].Children) != 1 {
		t.Fatalf("forest %+v, want one tree of one child", got)
	}
	want := []delegation.Branch{
		{ID: "sub_w1", Goal: "one", Status: delegation.StatusRunning, CurrentTool: "terminal", Tokens: 7},
		{ID: "sub_w2", Goal: "two", Status: delegation.StatusCompleted, Tokens: 9},
	}
	if diff := cmp.Diff(want, got[0].Children[0].Workers); diff != "" {
		t.Errorf("workers from the progress (-want +got):\n%s", diff)
	}

	got = delegation.Forest([]delegation.Delegation{workers, parent}, nil)
	if len(got) != 1 || got[0].ID != "deleg_1" {
		t.Fatalf("forest %+v, want the workers under their orchestrator", got)
	}
	ws := got[0].Children[0].Workers
	if len(ws) != 2 || ws[0].ID != "sub_w2" || ws[0].Summary != "done" || ws[0].Delegation != "deleg_2" || ws[1].ID != "sub_w1" {
		t.Errorf("workers %+v, want sub_w2 as its delegation has it, then sub_w1 from the progress", ws)
	}

	got = delegation.Forest([]delegation.Delegation{workers}, nil)
	if len(got) != 1 || got[0].Orchestrator != "sub_o" {
		t.Errorf("forest %+v, want the workers a tree naming their orchestrator", got)
	}
	if got := delegation.Forest(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("no delegations: %#v, want an empty list", got)
	}
}

// A worker's transcript is its lines in its orchestrator's log; a child
// this instance keeps none of is NotFound.
func TestServiceTranscript(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	st := db.Delegations()
	tr := &delegation.Transcripts{Dir: t.TempDir()}
	svc := &delegation.Service{Store: st, Signals: db.Signals(), Transcripts: tr}
	now := time.Now()
	d := delegation.Delegation{ID: "deleg_o", Conv: "api:x", Source: "api", CreatedAt: now, Children: []delegation.Child{
		{ID: "sub_o", Delegation: "deleg_o", Task: delegation.Task{Goal: "plan", Role: delegation.RoleOrchestrator}},
	}}
	if err := st.Create(ctx, delegation.Dispatch{Delegation: d}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Claim(ctx, "here", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	w := delegation.Delegation{ID: "deleg_w", Conv: "api:x", Source: "orchestrator", Orchestrator: "sub_o", CreatedAt: now, Children: []delegation.Child{
		{ID: "sub_w", Delegation: "deleg_w", Task: delegation.Task{Goal: "look"}},
	}}
	if _, err := st.Start(ctx, delegation.Dispatch{Delegation: w}, "here", time.Minute); err != nil {
		t.Fatal(err)
	}
	log := tr.Open(d, d.Children[0], now)
	log.Message(now, chat.Message{Role: "assistant", Content: "the orchestrator's own"})
	wlog := log.Worker(now, "sub_w", "look")
	wlog.Message(now, chat.Message{Role: "assistant", Content: "first line\nsecond line"})
	log.Message(now, chat.Message{Role: "assistant", Content: "the orchestrator again"})
	wlog.End(now, delegation.Result{Status: delegation.StatusCompleted})
	log.End(now, delegation.Result{Status: delegation.StatusCompleted})

	got, err := svc.Transcript(ctx, w, "sub_w")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[worker sub_w] started: look", "first line\n    second line", "[worker sub_w] ended completed"} {
		if !strings.Contains(got.Text, want) {
			t.Errorf("the worker's transcript %q has no %q", got.Text, want)
		}
	}
	if strings.Contains(got.Text, "orchestrator") || got.Child != "sub_w" || got.Delegation != "deleg_w" {
		t.Errorf("the worker's transcript %+v, want only its own lines", got)
	}
	whole, err := svc.Transcript(ctx, d, "sub_o")
	if err != nil || !strings.Contains(whole.Text, "the orchestrator again") || !strings.Contains(whole.Text, "second line") {
		t.Errorf("the orchestrator's transcript %+v (%v), want its whole log", whole, err)
	}

	other := &delegation.Service{Store: st, Signals: db.Signals(), Transcripts: &delegation.Transcripts{Dir: t.TempDir()}}
	if _, err := other.Transcript(ctx, d, "sub_o"); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "on this instance") {
		t.Errorf("an instance that keeps none: %v, want NotFound saying so", err)
	}
	if _, err := svc.Transcript(ctx, d, "sub_nope"); !errs.Is(err, errs.NotFound) {
		t.Errorf("no such child: %v, want NotFound", err)
	}
}
