package delegation_test

import (
	"context"
	"encoding/json"
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
	if err := runner.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	return runner, ended
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
