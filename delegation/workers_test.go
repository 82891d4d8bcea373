package delegation_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/testkit"
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
	runner, spawner, ended := newRunner(t, db.Delegations(), delegation.SpawnerOptions{
		Client: scriptedClient(t, model), Model: "m", OrchestratorEnabled: true, MaxDepth: 2,
	}, nil, delegation.RunnerOptions{Max: 2, Transcripts: &delegation.Transcripts{Dir: dir}})
	reg := tools.NewRegistry()
	if err := reg.Register(delegation.Toolset, delegation.Tool(delegation.ToolOptions{
		Store: db.Delegations(), Signals: db.Sessions(), Spawner: spawner, Runner: runner,
	})); err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{delegation.Toolset})
	if err != nil {
		t.Fatal(err)
	}
	spawner.SetTools(set)
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Sessions(), Runner: runner}
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
