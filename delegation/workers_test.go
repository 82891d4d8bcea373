package delegation_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/store/sqlite"
	"github.com/heraldgw/herald/tools"
)

// TestOrchestratorsWorkersCountUnderTheProcessCap: an orchestrator's
// workers run on its instance and take places under
// delegation.process_max_children as any child does: with one place
// left beside the orchestrator, two workers start none, and the
// orchestrator is told why; one worker runs.
func TestOrchestratorsWorkersCountUnderTheProcessCap(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	dir := t.TempDir()
	model := testkit.NewModelServer(t)
	model.Script(
		testkit.CallTools(testkit.ToolCall(delegation.ToolName, `{"tasks":[{"goal":"worker a"},{"goal":"worker b"}]}`)),
		testkit.CallTools(testkit.ToolCall(delegation.ToolName, `{"goal":"worker c"}`)),
		testkit.Reply("worker c did it"),
		testkit.Reply("orchestrated"),
	)
	runner, ended := orchestrating(t, db, model, delegation.RunnerOptions{Max: 2, Transcripts: &delegation.Transcripts{Dir: dir}}, 0)
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner}
	d, err := svc.Start(ctx, delegation.Request{Conv: "api:orch", Goal: "lead", Role: delegation.RoleOrchestrator})
	if err != nil {
		t.Fatal(err)
	}
	<-ended
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4 (the orchestrator's three, worker c's one)", len(reqs))
	}
	refused := reqs[1].Messages[len(reqs[1].Messages)-1].Content
	if !strings.Contains(refused, `"status":"rejected"`) || !strings.Contains(refused, "process_max_children is 2): 1 free for 2 workers") {
		t.Errorf("two workers beside the orchestrator under a cap of 2 answered %s, want rejected with the places", refused)
	}
	ran := reqs[3].Messages[len(reqs[3].Messages)-1].Content
	if !strings.Contains(ran, "worker c did it") {
		t.Errorf("one worker answered %s, want its result", ran)
	}
	// The worker's work is in its orchestrator's transcript, marked.
	log, err := os.ReadFile(filepath.Join(dir, d.ID, "task-0.log"))
	for _, want := range []string{"started: worker c", "worker c did it", "ended completed"} {
		if err != nil || !strings.Contains(string(log), "[worker sub_") || !strings.Contains(string(log), want) {
			t.Errorf("the orchestrator's transcript %q (%v) lacks its worker's %q", log, err, want)
		}
	}
}

// TestOrchestratorsWorkersAreStoredAndCounted: an orchestrator's workers
// are written to the store as they start: under
// delegation.max_concurrent_children of 3, the orchestrator and its two
// workers fill the conversation, so a further dispatch is refused with
// no place free; the store lists them running, then ended with their
// status, as the orchestrator's workers, making no completion of their
// own.
func TestOrchestratorsWorkersAreStoredAndCounted(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	model := testkit.NewModelServer(t)
	gate := testkit.NewGate()
	model.Script(
		testkit.CallTools(testkit.ToolCall(delegation.ToolName, `{"tasks":[{"goal":"worker a"},{"goal":"worker b"}]}`)),
		testkit.Reply("a worker's part").Until(gate),
		testkit.Reply("a worker's part").Until(gate),
		testkit.Reply("orchestrated"),
	)
	runner, ended := orchestrating(t, db, model, delegation.RunnerOptions{Max: 4}, 3)
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner, MaxChildren: 3}
	d, err := svc.Start(ctx, delegation.Request{Conv: "api:orch", Goal: "lead", Role: delegation.RoleOrchestrator})
	if err != nil {
		t.Fatal(err)
	}
	model.WaitRequests(3) // both workers are in their model calls

	workers := func() delegation.Delegation {
		t.Helper()
		ds, err := db.Delegations().List(ctx, delegation.Query{Conv: "api:orch"})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range ds {
			if g.Orchestrator == d.Children[0].ID {
				return g
			}
		}
		t.Fatalf("the store lists no workers of %s among %d delegations", d.Children[0].ID, len(ds))
		return delegation.Delegation{}
	}
	if g := workers(); len(g.Children) != 2 || g.Status() != delegation.StatusRunning {
		t.Errorf("the workers as listed while they run: %d, %s; want 2, running", len(g.Children), g.Status())
	}
	if n, err := db.Delegations().Active(ctx, "api:orch"); err != nil || n != 3 {
		t.Errorf("Active = %d, %v; want 3, the orchestrator and its workers", n, err)
	}
	_, err = svc.Start(ctx, delegation.Request{Conv: "api:orch", Goal: "one more"})
	if full, ok := delegation.FullOf(err); !ok || full.Free() != 0 || full.Running != 3 {
		t.Errorf("a further dispatch = %v, want refused with 3 running and no place free", err)
	}

	gate.Release()
	<-ended
	g := workers()
	for _, c := range g.Children {
		if c.Status != delegation.StatusCompleted || c.Result == nil || c.Result.Summary != "a worker's part" {
			t.Errorf("worker %s ended %s with %+v, want completed with its part", c.ID, c.Status, c.Result)
		}
	}
	if cmps, err := db.Delegations().Completions(ctx, g.ID); err != nil || len(cmps) != 0 {
		t.Errorf("the workers' completions = %d, %v; want none: their results went to the orchestrator", len(cmps), err)
	}
	if n, err := db.Delegations().Active(ctx, "api:orch"); err != nil || n != 0 {
		t.Errorf("Active after the end = %d, %v; want 0", n, err)
	}
}

// orchestrating is a started runner whose children may orchestrate (a
// depth of 2) on model, with delegate_task under maxChildren per
// conversation (0: its default), and the channel its completions are
// told on.
func orchestrating(t *testing.T, db *sqlite.DB, model *testkit.ModelServer, ro delegation.RunnerOptions, maxChildren int) (*delegation.Runner, chan struct{}) {
	t.Helper()
	runner, spawner, ended := newRunner(t, db.Delegations(), delegation.SpawnerOptions{
		Client: scriptedClient(t, model), Model: "m", OrchestratorEnabled: true, MaxDepth: 2,
	}, nil, ro)
	reg := tools.NewRegistry()
	if err := reg.Register(delegation.Toolset, delegation.Tool(delegation.ToolOptions{
		Store: db.Delegations(), Signals: db.Signals(), Spawner: spawner, Runner: runner, MaxChildren: maxChildren,
	})); err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{delegation.Toolset})
	if err != nil {
		t.Fatal(err)
	}
	spawner.SetTools(set)
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	return runner, ended
}
