package delegation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/tools"
)

// scriptedClient is a model client of the scripted model server.
func scriptedClient(t *testing.T, m *testkit.ModelServer) llm.Client {
	t.Helper()
	c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: m.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runnerWith starts a runner named "here" of the spawner opts make, with
// set as the parent's tools, telling of each completion on the channel.
func runnerWith(t *testing.T, st delegation.Store, opts delegation.SpawnerOptions, set *tools.Set, ro delegation.RunnerOptions) (*delegation.Runner, chan struct{}) {
	t.Helper()
	runner, _, ended := newRunner(t, st, opts, set, ro)
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	return runner, ended
}

// newRunner is runnerWith's runner, not started, and its spawner.
func newRunner(t *testing.T, st delegation.Store, opts delegation.SpawnerOptions, set *tools.Set, ro delegation.RunnerOptions) (*delegation.Runner, *delegation.Spawner, chan struct{}) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	spawner := delegation.NewSpawner(opts)
	if set == nil {
		var err error
		if set, err = tools.NewRegistry().Set(nil); err != nil {
			t.Fatal(err)
		}
	}
	spawner.SetTools(set)
	ended := make(chan struct{}, 16)
	ro.Store, ro.Spawner, ro.Name, ro.Poll = st, spawner, "here", time.Hour
	ro.Ended = func() { ended <- struct{}{} }
	ro.Clock, ro.Logger = opts.Clock, slog.New(slog.DiscardHandler)
	runner, err := delegation.NewRunner(ro)
	if err != nil {
		t.Fatal(err)
	}
	return runner, spawner, ended
}

// completionText is the text the parent model reads for delegation id:
// its one completion, as the deliverer hands it over.
func completionText(t *testing.T, st delegation.Store, id string) string {
	t.Helper()
	cs, err := st.Completions(context.Background(), id)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Completions(%s) = %+v, %v; want one", id, cs, err)
	}
	return delegation.CompletionText(cs[0])
}

// TestCompletionSaysWhereTheChildsChangesAre: a child that commits in
// its own worktree ends with a completion that names the worktree's
// path, its branch, the commits on it and whether anything is left
// uncommitted, beside its status, exit reason, tokens and cost: what the
// parent needs to merge the work.
func TestCompletionSaysWhereTheChildsChangesAre(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores) {
		ctx := context.Background()
		repo := testkit.GitRepo(t)
		commit := func(_ context.Context, turn *tools.Turn, _ json.RawMessage) (tools.Result, error) {
			if err := os.WriteFile(filepath.Join(turn.Workspace, "fix.txt"), []byte("fixed\n"), 0o644); err != nil {
				return tools.Result{}, err
			}
			testkit.Git(t, turn.Workspace, "add", "fix.txt")
			testkit.Git(t, turn.Workspace, "commit", "-q", "-m", "fix")
			return tools.Result{Content: "{}"}, os.WriteFile(filepath.Join(turn.Workspace, "notes.txt"), []byte("wip\n"), 0o644)
		}
		reg := tools.NewRegistry()
		if err := reg.Register("test", tools.Tool{Name: "commit", Description: "commit", Handler: commit}); err != nil {
			t.Fatal(err)
		}
		set, err := reg.Set([]string{"test"})
		if err != nil {
			t.Fatal(err)
		}
		model := testkit.NewModelServer(t)
		model.Script(testkit.CallTools(testkit.ToolCall("commit", `{}`)), testkit.Reply("committed the fix"))
		runner, ended := runnerWith(t, st.dlg, delegation.SpawnerOptions{
			Client: scriptedClient(t, model), Model: "m", Workspace: repo, Worktrees: true,
			Price: func(string) (float64, float64, bool) { return 1, 2, true },
		}, set, delegation.RunnerOptions{})
		svc := &delegation.Service{Store: st.dlg, Signals: st.signals, Runner: runner}
		d, err := svc.Start(ctx, delegation.Request{Conv: "api:wt", Goal: "fix it"})
		if err != nil {
			t.Fatal(err)
		}
		<-ended
		text := completionText(t, st.dlg, d.ID)
		sub := d.Children[0].ID
		for _, want := range []string{
			"status: completed, exit: done",
			"worktree: " + filepath.Join(repo, ".worktrees", "subagent-"+sub),
			"1 commits on branch herald-subagent/" + sub,
			"uncommitted changes",
			"spent: 2 API calls",
			"output tokens on m, $0.",
			"committed the fix",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the completion's text lacks %q:\n%s", want, text)
			}
		}
	})
}

// TestCompletionSaysWhyTheChildTimedOut: a child its timeout stopped,
// on the fake clock, ends with a completion that says the limit, how
// long it ran and in which phase.
func TestCompletionSaysWhyTheChildTimedOut(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2031, 3, 4, 5, 0, 0, 0, time.UTC))
		model := testkit.NewModelServer(t)
		gate := testkit.NewGate()
		t.Cleanup(gate.Release)
		model.Script(testkit.Hang(gate))
		runner, ended := runnerWith(t, st.dlg, delegation.SpawnerOptions{
			Client: scriptedClient(t, model), Model: "m", Timeout: 90 * time.Second, Clock: clk,
		}, nil, delegation.RunnerOptions{})
		svc := &delegation.Service{Store: st.dlg, Signals: st.signals, Runner: runner, Clock: clk}
		d, err := svc.Start(ctx, delegation.Request{Conv: "api:slow", Goal: "take long"})
		if err != nil {
			t.Fatal(err)
		}
		model.WaitRequests(1)
		clk.Advance(90 * time.Second)
		<-ended
		text := completionText(t, st.dlg, d.ID)
		for _, want := range []string{
			"status: timed_out, exit: timeout",
			"timeout: stopped after 90 s; the limit is 90 s (delegation.child_timeout_seconds), before first llm call",
			"spent: 0 API calls",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the completion's text lacks %q:\n%s", want, text)
			}
		}
	})
}

// TestTranscriptsExistFromDispatch: a dispatch's live transcripts and
// manifest are there as soon as it is made, before any instance starts
// its children; the run then appends to them.
func TestTranscriptsExistFromDispatch(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	dir := t.TempDir()
	model := testkit.NewModelServer(t)
	model.Script(testkit.Reply("all done"))
	runner, _, ended := newRunner(t, db.Delegations(), delegation.SpawnerOptions{Client: scriptedClient(t, model), Model: "m"}, nil,
		delegation.RunnerOptions{Transcripts: &delegation.Transcripts{Dir: dir}})
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner}
	d, err := svc.Start(ctx, delegation.Request{Conv: "api:tr", Tasks: []delegation.Task{{Goal: "first"}, {Goal: "second"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The runner has not started: nothing has run yet.
	for i, c := range d.Children {
		log, err := os.ReadFile(filepath.Join(dir, d.ID, fmt.Sprintf("task-%d.log", i)))
		if err != nil || !strings.Contains(string(log), "dispatched "+c.ID) {
			t.Errorf("task %d's transcript at dispatch: %q (%v), want it there, saying it was dispatched", i, log, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, d.ID, "manifest.json")); err != nil {
		t.Errorf("no manifest at dispatch: %v", err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	<-ended
	log, err := os.ReadFile(filepath.Join(dir, d.ID, "task-0.log"))
	if err != nil || !strings.Contains(string(log), "dispatched ") || !strings.Contains(string(log), "started ") || !strings.Contains(string(log), "ended ") {
		t.Errorf("task 0's transcript after its run: %q (%v), want its dispatch, start and end", log, err)
	}
}
