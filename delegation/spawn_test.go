package delegation

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/tools"
)

// fakeModel answers each call with the next of its replies; a reply
// func may block.
type fakeModel struct {
	mu      sync.Mutex
	replies []func(ctx context.Context, req llm.Request) (*llm.Response, error)
	calls   []llm.Request
}

func (m *fakeModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.calls = append(m.calls, req)
	var f func(ctx context.Context, req llm.Request) (*llm.Response, error)
	if len(m.replies) > 0 {
		f, m.replies = m.replies[0], m.replies[1:]
	}
	m.mu.Unlock()
	if f == nil {
		return say("nothing more"), nil
	}
	return f(ctx, req)
}

func (m *fakeModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.calls...)
}

func say(text string) *llm.Response {
	return &llm.Response{Message: chat.Message{Role: "assistant", Content: text}, Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 5}}
}

func reply(text string) func(context.Context, llm.Request) (*llm.Response, error) {
	return func(context.Context, llm.Request) (*llm.Response, error) { return say(text), nil }
}

func callTool(name, args string) func(context.Context, llm.Request) (*llm.Response, error) {
	return func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Message: chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: name, Arguments: args}}}}, nil
	}
}

// blockUntilCancel waits for the call's context to end, as an HTTP call
// does; started is closed when the call began.
func blockUntilCancel(started chan struct{}) func(context.Context, llm.Request) (*llm.Response, error) {
	return func(ctx context.Context, _ llm.Request) (*llm.Response, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

// echoTools is a tool set with one tool, "look", that answers at once,
// and the tools a child must not have.
func echoTools(t *testing.T, look tools.Handler) *tools.Set {
	t.Helper()
	r := tools.NewRegistry()
	if look == nil {
		look = func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
			return tools.Result{Content: `{"seen":true}`}, nil
		}
	}
	if err := r.Register("test", tools.Tool{Name: "look", Description: "look", Handler: look}); err != nil {
		t.Fatal(err)
	}
	if err := tools.RegisterCore(r, tools.CoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Toolset, Tool(ToolOptions{})); err != nil {
		t.Fatal(err)
	}
	set, err := r.Set([]string{"test", tools.Core, Toolset})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

var t0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

func TestSpawnerResults(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	tests := []struct {
		desc     string
		child    Child
		opts     func(*SpawnerOptions)
		replies  []func(context.Context, llm.Request) (*llm.Response, error)
		check    func(t *testing.T, r Result, m *fakeModel)
		wantCall int
	}{
		{
			desc:    "a child that answers completes with its answer as the summary",
			child:   Child{ID: "sub_1", Task: Task{Goal: "find it", Context: "it is blue"}},
			replies: []func(context.Context, llm.Request) (*llm.Response, error){callTool("look", `{}`), reply("## What I found\nblue")},
			check: func(t *testing.T, r Result, m *fakeModel) {
				if r.Status != StatusCompleted || r.Summary != "## What I found\nblue" || r.APICalls != 2 || r.InputTokens != 10 {
					t.Errorf("result %+v", r)
				}
				first := m.requests()[0]
				if len(first.Messages) != 2 || !strings.Contains(first.Messages[0].Content, "You are a sub-agent") ||
					!strings.Contains(first.Messages[1].Content, "Goal: find it") || !strings.Contains(first.Messages[1].Content, "it is blue") {
					t.Errorf("the first request's messages %+v: want the child's prompt and its task alone", first.Messages)
				}
				for _, spec := range first.Tools {
					for _, b := range Blocked {
						if spec.Name == b {
							t.Errorf("the child was offered %s", b)
						}
					}
				}
			},
		},
		{
			desc:  "max_iterations truncates",
			child: Child{ID: "sub_2", Task: Task{Goal: "loop"}},
			opts:  func(o *SpawnerOptions) { o.MaxIterations = 2 },
			replies: []func(context.Context, llm.Request) (*llm.Response, error){
				callTool("look", `{}`), callTool("look", `{}`), callTool("look", `{}`),
			},
			check: func(t *testing.T, r Result, _ *fakeModel) {
				if r.Status != StatusCompleted || r.ExitReason != "max_iterations" || !r.Truncated {
					t.Errorf("result %+v: want completed, max_iterations, truncated", r)
				}
			},
		},
		{
			desc:    "an orchestrator the depth does not allow runs as a leaf and says so",
			child:   Child{ID: "sub_3", Task: Task{Goal: "plan", Role: RoleOrchestrator}},
			replies: []func(context.Context, llm.Request) (*llm.Response, error){reply("done")},
			check: func(t *testing.T, r Result, m *fakeModel) {
				if r.RoleNote == "" || !strings.Contains(r.Summary, "ran as a leaf") {
					t.Errorf("result %+v: want the role note", r)
				}
				for _, spec := range m.requests()[0].Tools {
					if spec.Name == ToolName {
						t.Errorf("a downgraded orchestrator was offered %s", ToolName)
					}
				}
			},
		},
		{
			desc:    "an orchestrator the depth allows keeps delegate_task",
			child:   Child{ID: "sub_4", Task: Task{Goal: "plan", Role: RoleOrchestrator}},
			opts:    func(o *SpawnerOptions) { o.MaxDepth, o.OrchestratorEnabled = 2, true },
			replies: []func(context.Context, llm.Request) (*llm.Response, error){reply("done")},
			check: func(t *testing.T, r Result, m *fakeModel) {
				found := false
				for _, spec := range m.requests()[0].Tools {
					found = found || spec.Name == ToolName
				}
				if !found || r.RoleNote != "" {
					t.Errorf("orchestrator: offered delegate_task %t, role note %q", found, r.RoleNote)
				}
			},
		},
		{
			desc:    "an answer that meets the output schema is valid",
			child:   Child{ID: "sub_5", Task: Task{Goal: "count", OutputSchema: schema}},
			replies: []func(context.Context, llm.Request) (*llm.Response, error){reply(`{"n": 3}`)},
			check: func(t *testing.T, r Result, m *fakeModel) {
				if r.SchemaValid == nil || !*r.SchemaValid || len(m.requests()) != 1 {
					t.Errorf("result %+v after %d calls: want valid at once", r, len(m.requests()))
				}
			},
		},
		{
			desc:    "an answer that fails the schema gets one correction round, with the errors verbatim",
			child:   Child{ID: "sub_6", Task: Task{Goal: "count", OutputSchema: schema}},
			replies: []func(context.Context, llm.Request) (*llm.Response, error){reply(`{"n": "three"}`), reply("```json\n{\"n\": 3}\n```")},
			check: func(t *testing.T, r Result, m *fakeModel) {
				reqs := m.requests()
				if r.SchemaValid == nil || !*r.SchemaValid || len(reqs) != 2 {
					t.Fatalf("result %+v after %d calls: want valid after one correction", r, len(reqs))
				}
				last := reqs[1].Messages[len(reqs[1].Messages)-1].Content
				if !strings.Contains(last, "does not meet the output schema") || !strings.Contains(last, "n: got string, want integer") {
					t.Errorf("correction message %q: want the validation errors", last)
				}
			},
		},
		{
			desc:    "an answer that fails twice is invalid with its errors",
			child:   Child{ID: "sub_7", Task: Task{Goal: "count", OutputSchema: schema}},
			replies: []func(context.Context, llm.Request) (*llm.Response, error){reply(`nope`), reply(`{"m": 1}`), reply("unused")},
			check: func(t *testing.T, r Result, m *fakeModel) {
				if r.SchemaValid == nil || *r.SchemaValid || len(r.SchemaErrors) == 0 || len(m.requests()) != 2 {
					t.Errorf("result %+v after %d calls: want invalid with errors after exactly one correction", r, len(m.requests()))
				}
			},
		},
	}
	tests = append(tests, struct {
		desc     string
		child    Child
		opts     func(*SpawnerOptions)
		replies  []func(context.Context, llm.Request) (*llm.Response, error)
		check    func(t *testing.T, r Result, m *fakeModel)
		wantCall int
	}{
		desc:  "a child's cost is its tokens at its model's price",
		child: Child{ID: "sub_p", Task: Task{Goal: "price it"}},
		opts: func(o *SpawnerOptions) {
			o.Model = "priced"
			o.Price = func(model string) (float64, float64, bool) { return 2, 10, model == "priced" }
		},
		replies: []func(context.Context, llm.Request) (*llm.Response, error){reply("done")},
		check: func(t *testing.T, r Result, _ *fakeModel) {
			// 10 tokens in at $2/M, 5 out at $10/M.
			if r.CostUSD == nil || *r.CostUSD != (10*2+5*10)/1e6 {
				t.Errorf("cost = %v, want the tokens priced", r.CostUSD)
			}
		},
	})
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := &fakeModel{replies: tc.replies}
			opts := SpawnerOptions{Client: m, Tools: echoTools(t, nil), Clock: clock.NewFake(t0)}
			if tc.opts != nil {
				tc.opts(&opts)
			}
			r := NewSpawner(opts).Run(context.Background(), tc.child, 1, nil)
			if r.ChildID != tc.child.ID {
				t.Errorf("subagent id %q, want %q", r.ChildID, tc.child.ID)
			}
			tc.check(t, r, m)
		})
	}
}

// runAsync runs the child on its own goroutine and returns its result's
// channel.
func runAsync(s *Spawner, c Child, live *Live) <-chan Result {
	out := make(chan Result, 1)
	go func() { out <- s.Run(context.Background(), c, 1, live) }()
	return out
}

func TestSpawnerTimeout(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		firstCall bool // the timeout comes after a first model call
		wantPhase string
	}{
		{desc: "before the first model call returned", wantPhase: "before_first_llm_call"},
		{desc: "after model calls", firstCall: true, wantPhase: "after_llm_calls"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			started := make(chan struct{})
			m := &fakeModel{}
			if tc.firstCall {
				m.replies = append(m.replies, callTool("look", `{}`))
			}
			m.replies = append(m.replies, blockUntilCancel(started))
			s := NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, nil), Clock: clk, Timeout: 30 * time.Second})
			done := runAsync(s, Child{ID: "sub_t", Task: Task{Goal: "wait"}}, nil)
			<-started
			clk.Advance(30 * time.Second)
			r := <-done
			if r.Status != StatusTimedOut || r.TimeoutSeconds != 30 || r.TimedOutAfterSeconds != 30 || r.TimeoutPhase != tc.wantPhase {
				t.Errorf("result %+v: want timed_out after 30 s, phase %s", r, tc.wantPhase)
			}
		})
	}
}

func TestSpawnerStallMonitor(t *testing.T) {
	const quiet, grace = 450 * time.Second, 120 * time.Second
	newSpawner := func(m llm.Client, clk *clock.Fake, look tools.Handler) *Spawner {
		return NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, look), Clock: clk,
			StallQuiet: quiet, StallTool: 1200 * time.Second, StallGrace: grace})
	}

	t.Run("a quiet child is stopped and returns its partial work in the grace", func(t *testing.T) {
		clk := clock.NewFake(t0)
		started := make(chan struct{})
		m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){blockUntilCancel(started)}}
		done := runAsync(newSpawner(m, clk, nil), Child{ID: "sub_s1", Task: Task{Goal: "think"}}, nil)
		<-started
		waitArmed(t, clk, 1)
		clk.Advance(quiet)
		r := <-done
		if r.Status != StatusStalled || r.StallPhase != "between_tools" || r.StallThresholdSeconds != 450 || r.StalledAfterQuietSecs < 450 || r.StallGraceSeconds != 120 {
			t.Errorf("result %+v: want stalled between tools after 450 s", r)
		}
	})

	t.Run("a child that does not stop in the grace is left behind as stalled", func(t *testing.T) {
		clk := clock.NewFake(t0)
		started, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){
			func(context.Context, llm.Request) (*llm.Response, error) {
				close(started)
				<-release // ignores its context
				return say("late"), nil
			},
		}}
		done := runAsync(newSpawner(m, clk, nil), Child{ID: "sub_s2", Task: Task{Goal: "hang"}}, nil)
		<-started
		waitArmed(t, clk, 1)
		clk.Advance(quiet)
		waitArmed(t, clk, 2) // the grace timer beside the monitor's ticker
		clk.Advance(grace)
		r := <-done
		if r.Status != StatusStalled || !strings.Contains(r.Error, "did not stop within the 120 s grace") {
			t.Errorf("result %+v: want stalled, past the grace", r)
		}
	})

	t.Run("a slow child that makes progress is never touched", func(t *testing.T) {
		clk := clock.NewFake(t0)
		steps := make(chan chan struct{})
		look := func(ctx context.Context, _ *tools.Turn, _ json.RawMessage) (tools.Result, error) {
			step := make(chan struct{})
			steps <- step
			<-step
			return tools.Result{Content: "{}"}, nil
		}
		m := &fakeModel{}
		for range 5 {
			m.replies = append(m.replies, callTool("look", `{}`))
		}
		m.replies = append(m.replies, reply("finished slowly"))
		done := runAsync(newSpawner(m, clk, look), Child{ID: "sub_s3", Task: Task{Goal: "slow"}}, nil)
		for range 5 {
			step := <-steps
			waitArmed(t, clk, 1)
			// Inside a tool for 1,000 s: under the tool threshold.
			clk.Advance(1000 * time.Second)
			close(step)
		}
		r := <-done
		if r.Status != StatusCompleted || r.Summary != "finished slowly" {
			t.Errorf("result %+v: want completed", r)
		}
	})
}

// waitArmed waits until n timers of clk are armed.
func waitArmed(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
}

func TestSpawnerSteer(t *testing.T) {
	t.Run("a steer lands after the next tool result", func(t *testing.T) {
		looked := make(chan struct{})
		live := newLive(Child{ID: "sub_st"}, "c", t0)
		look := func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
			live.Steer("also check the roof")
			close(looked)
			return tools.Result{Content: "{}"}, nil
		}
		m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){callTool("look", `{}`), reply("checked")}}
		s := NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, look), Clock: clock.NewFake(t0)})
		r := s.Run(context.Background(), Child{ID: "sub_st", Task: Task{Goal: "check"}}, 1, live)
		<-looked
		reqs := m.requests()
		last := reqs[1].Messages[len(reqs[1].Messages)-1]
		if last.Role != "user" || last.Content != "also check the roof" || r.PendingSteer != "" {
			t.Errorf("second request ends with %+v, pending steer %q: want the steer as a user message", last, r.PendingSteer)
		}
	})
	t.Run("a steer the child finished before carries pending_steer", func(t *testing.T) {
		live := newLive(Child{ID: "sub_st2"}, "c", t0)
		m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){
			func(context.Context, llm.Request) (*llm.Response, error) {
				live.Steer("too late")
				return say("all done"), nil
			},
		}}
		s := NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, nil), Clock: clock.NewFake(t0)})
		r := s.Run(context.Background(), Child{ID: "sub_st2", Task: Task{Goal: "x"}}, 1, live)
		if r.PendingSteer != "too late" || !strings.Contains(r.Summary, "did not land") {
			t.Errorf("result %+v: want pending_steer and the note", r)
		}
	})
}

func TestSpawnerWorktrees(t *testing.T) {
	touch := func(_ context.Context, turn *tools.Turn, _ json.RawMessage) (tools.Result, error) {
		return tools.Result{Content: "{}"}, os.WriteFile(filepath.Join(turn.Workspace, "made-by-child"), []byte("x"), 0o644)
	}
	tests := []struct {
		desc      string
		workspace func(t testing.TB) string
		replies   []func(context.Context, llm.Request) (*llm.Response, error)
		check     func(t *testing.T, w *Worktree)
	}{
		{
			desc:      "a clean worktree with no commits is pruned",
			workspace: testkit.GitRepo,
			replies:   []func(context.Context, llm.Request) (*llm.Response, error){reply("nothing to change")},
			check: func(t *testing.T, w *Worktree) {
				if w == nil || !w.Pruned || w.Skipped != "" {
					t.Errorf("worktree %+v: want pruned", w)
				}
			},
		},
		{
			desc:      "a worktree the child left files in is kept, dirty, on its branch",
			workspace: testkit.GitRepo,
			replies:   []func(context.Context, llm.Request) (*llm.Response, error){callTool("look", `{}`), reply("made a file")},
			check: func(t *testing.T, w *Worktree) {
				if w == nil || w.Pruned || !w.Dirty || !strings.HasPrefix(w.Branch, "herald-subagent/") {
					t.Fatalf("worktree %+v: want kept and dirty", w)
				}
				if _, err := os.Stat(filepath.Join(w.Path, "made-by-child")); err != nil {
					t.Errorf("the child's file is not in its worktree: %v", err)
				}
			},
		},
		{
			desc:      "outside a git repository the child shares the workspace and says why",
			workspace: func(t testing.TB) string { d := t.TempDir(); testkit.HermeticGit(t, d); return d },
			replies:   []func(context.Context, llm.Request) (*llm.Response, error){reply("done")},
			check: func(t *testing.T, w *Worktree) {
				if w == nil || w.Skipped == "" {
					t.Errorf("worktree %+v: want skipped with a reason", w)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ws := tc.workspace(t)
			m := &fakeModel{replies: tc.replies}
			s := NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, touch), Clock: clock.NewFake(t0), Workspace: ws, Worktrees: true})
			r := s.Run(context.Background(), Child{ID: "sub_0123456789abcdef", Task: Task{Goal: "work"}}, 1, nil)
			if r.Status != StatusCompleted {
				t.Fatalf("result %+v", r)
			}
			tc.check(t, r.Worktree)
		})
	}
}

// TestSpawnerWorkersShareTheOrchestratorsWorktree: a worker an
// orchestrator starts inside its run works in the orchestrator's
// worktree, not in the shared workspace.
func TestSpawnerWorkersShareTheOrchestratorsWorktree(t *testing.T) {
	ws := testkit.GitRepo(t)
	var s *Spawner
	var workerDir string
	look := func(ctx context.Context, turn *tools.Turn, _ json.RawMessage) (tools.Result, error) {
		if DepthOf(ctx) == 1 {
			w := s.Run(ctx, Child{ID: "sub_worker", Task: Task{Goal: "help"}}, 2, nil)
			return tools.Result{Content: w.Summary}, nil
		}
		workerDir = turn.Workspace
		return tools.Result{Content: "{}"}, os.WriteFile(filepath.Join(turn.Workspace, "made-by-worker"), []byte("x"), 0o644)
	}
	m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){
		callTool("look", `{}`), // the orchestrator starts its worker
		callTool("look", `{}`), // the worker writes
		reply("worker done"), reply("orchestrator done"),
	}}
	s = NewSpawner(SpawnerOptions{Client: m, Tools: echoTools(t, look), Clock: clock.NewFake(t0), Workspace: ws, Worktrees: true})
	r := s.Run(context.Background(), Child{ID: "sub_0123456789abcdef", Task: Task{Goal: "lead"}}, 1, nil)
	if r.Status != StatusCompleted || r.Worktree == nil || r.Worktree.Path == "" {
		t.Fatalf("result %+v: want completed in a worktree", r)
	}
	if workerDir != r.Worktree.Path {
		t.Errorf("the worker worked in %q, want the orchestrator's worktree %q", workerDir, r.Worktree.Path)
	}
	if _, err := os.Stat(filepath.Join(r.Worktree.Path, "made-by-worker")); err != nil || !r.Worktree.Dirty {
		t.Errorf("the worker's file in the worktree: %v (worktree %+v); want it there, dirty", err, r.Worktree)
	}
	if _, err := os.Stat(filepath.Join(ws, "made-by-worker")); err == nil {
		t.Errorf("the worker wrote into the shared workspace")
	}
}
