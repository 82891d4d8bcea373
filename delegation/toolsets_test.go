package delegation_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/store/sqlite"
	"github.com/heraldgw/herald/tools"
)

// toolsetsParent is a started runner and delegate_task over a parent
// whose tools are "look" (toolset files), the live toolset mcp holding
// mcp_lookup, and delegation; children may orchestrate.
func toolsetsParent(t *testing.T, model *testkit.ModelServer) (*tools.Set, *delegation.Runner, *sqlite.DB, chan struct{}) {
	t.Helper()
	db := openStore(t)
	runner, spawner, ended := newRunner(t, db.Delegations(), delegation.SpawnerOptions{
		Client: scriptedClient(t, model), Model: "m", OrchestratorEnabled: true, MaxDepth: 2,
	}, nil, delegation.RunnerOptions{})
	reg := tools.NewRegistry()
	answer := func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
		return tools.Result{Content: "ok"}, nil
	}
	if err := reg.Register("files", tools.Tool{Name: "look", Description: "look", Handler: answer}); err != nil {
		t.Fatal(err)
	}
	live, err := reg.RegisterLive("mcp")
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(delegation.Toolset, delegation.Tool(delegation.ToolOptions{
		Store: db.Delegations(), Signals: db.Signals(), Spawner: spawner, Runner: runner,
	})); err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{"files", "mcp", delegation.Toolset})
	if err != nil {
		t.Fatal(err)
	}
	spawner.SetTools(set)
	// The MCP server's tools arrive after the sets were made, as they do.
	if err := live.Replace(tools.Tool{Name: "mcp_lookup", Description: "an MCP server's", Handler: answer}); err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	return set, runner, db, ended
}

// offered are the tool names of the model request whose task message
// has goal.
func offered(t *testing.T, reqs []testkit.RecordedRequest, goal string) []string {
	t.Helper()
	for _, r := range reqs {
		if len(r.Messages) > 1 && strings.Contains(r.Messages[1].Content, "Goal: "+goal) {
			var names []string
			for _, tl := range r.Tools {
				names = append(names, tl.Name)
			}
			return names
		}
	}
	t.Fatalf("no model request for goal %q among %d", goal, len(reqs))
	return nil
}

// TestChildToolsets: delegate_task's toolsets limit a child to some of
// its parent's toolsets, the live MCP one among them: the dispatch is
// stored with them, and each child is offered its toolsets' tools only;
// a toolset the parent lacks is refused, naming those it has.
func TestChildToolsets(t *testing.T) {
	ctx := context.Background()
	model := testkit.NewModelServer(t)
	parent, runner, db, ended := toolsetsParent(t, model)

	refused := &tools.Turn{Conv: "api:c"}
	res := parent.Call(ctx, refused, chat.ToolCall{ID: "1", Name: delegation.ToolName, Arguments: `{"goal":"x","toolsets":["mcp","web"]}`})
	if !res.IsError || !strings.Contains(res.Content, `web\" is not one the parent has (it has files, mcp, delegation)`) {
		t.Errorf("a toolset the parent lacks: %s", res.Content)
	}
	if len(refused.Writes()) != 0 {
		t.Errorf("a refused call dispatched %v", refused.Writes())
	}

	turn := &tools.Turn{Conv: "api:c"}
	res = parent.Call(ctx, turn, chat.ToolCall{ID: "2", Name: delegation.ToolName, Arguments: `{"tasks":[
		{"goal":"mcp only","toolsets":["mcp"]},
		{"goal":"files only","toolsets":["files"]},
		{"goal":"all of them"}]}`})
	if res.IsError || len(turn.Writes()) != 1 {
		t.Fatalf("dispatch: %s, %d writes", res.Content, len(turn.Writes()))
	}
	// What the turn's commit does with the dispatch.
	disp := turn.Writes()[0].(delegation.Dispatch)
	if err := db.Delegations().Create(ctx, disp); err != nil {
		t.Fatal(err)
	}
	runner.Dispatched(disp.Delegation)
	runner.Wake()
	<-ended // the three children's one completion
	d, err := db.Delegations().Delegation(ctx, disp.Delegation.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Children[0].Toolsets; !slices.Equal(got, []string{"mcp"}) {
		t.Errorf("the stored child's toolsets = %v, want [mcp]", got)
	}
	list := parent.Call(ctx, &tools.Turn{Conv: "api:c"}, chat.ToolCall{ID: "3", Name: delegation.ToolName, Arguments: `{"action":"list"}`})
	if !strings.Contains(list.Content, `"goal":"mcp only","status":"completed","accepting_steer":false,"toolsets":["mcp"]`) {
		t.Errorf("list does not show the child's toolsets: %s", list.Content)
	}
	reqs := model.Requests()
	for goal, want := range map[string][]string{
		"mcp only":    {"mcp_lookup"},
		"files only":  {"look"},
		"all of them": {"look", "mcp_lookup"},
	} {
		if got := offered(t, reqs, goal); !slices.Equal(got, want) {
			t.Errorf("the child %q was offered %v, want %v", goal, got, want)
		}
	}
}

// TestWorkerToolsetsWithinOrchestrators: an orchestrator's worker never
// has more than its orchestrator: without toolsets it has the
// orchestrator's, and asking for one the orchestrator was not given is
// refused.
func TestWorkerToolsetsWithinOrchestrators(t *testing.T) {
	ctx := context.Background()
	model := testkit.NewModelServer(t)
	model.Script(
		testkit.CallTools(testkit.ToolCall(delegation.ToolName, `{"goal":"more","toolsets":["files"]}`)),
		testkit.CallTools(testkit.ToolCall(delegation.ToolName, `{"goal":"worker"}`)),
		testkit.Reply("the worker's part"),
		testkit.Reply("orchestrated"),
	)
	_, runner, db, ended := toolsetsParent(t, model)
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner}
	if _, err := svc.Start(ctx, delegation.Request{Conv: "api:o", Tasks: []delegation.Task{{Goal: "x", Toolsets: []string{"web"}}}}); err == nil ||
		!strings.Contains(err.Error(), `toolset "web" is not one the parent has`) {
		t.Errorf("Start with a toolset the parent lacks = %v", err)
	}
	if _, err := svc.Start(ctx, delegation.Request{Conv: "api:o", Tasks: []delegation.Task{
		{Goal: "lead", Role: delegation.RoleOrchestrator, Toolsets: []string{"mcp", delegation.Toolset}},
	}}); err != nil {
		t.Fatal(err)
	}
	<-ended
	reqs := model.WaitRequests(4)
	if got := offered(t, reqs, "lead"); !slices.Equal(got, []string{delegation.ToolName, "mcp_lookup"}) {
		t.Errorf("the orchestrator was offered %v", got)
	}
	// Its first call asked for files: refused, naming what it has.
	var refusal string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			refusal = m.Content
		}
	}
	if !strings.Contains(refusal, `files\" is not one the parent has (it has mcp, delegation)`) {
		t.Errorf("the orchestrator's call for files was answered %q", refusal)
	}
	if got := offered(t, reqs, "worker"); !slices.Equal(got, []string{"mcp_lookup"}) {
		t.Errorf("the worker was offered %v, want its orchestrator's mcp tools only", got)
	}
}
