package delegation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

// Blocked are the tools a child never has: it cannot ask the user
// (clarify), write the user's notes (memory), speak to chats
// (send_message, send_file) or schedule (cronjob); delegate_task is kept
// only for an orchestrator the depth allows.
var Blocked = []string{ToolName, "clarify", "memory", "send_message", "cronjob", "send_file"}

// Defaults for SpawnerOptions.
const (
	DefaultMaxIterations = 50
	DefaultSummaryMax    = 24_000
	DefaultMaxDepth      = 1
)

// childPrompt opens every child's request: it starts from nothing, and
// what it returns is read by another agent, not by a person.
const childPrompt = `You are a sub-agent. Another agent handed you one task to do in the background; the goal and context below are all you know about it, and there is no user to ask. Work on it with your tools. When you are done, reply with a structured summary, which is returned verbatim to the agent that delegated the task:

## What I did
## What I found
## Files changed
## Problems

Keep it factual and complete: that agent sees nothing of your work but this summary.`

// SpawnerOptions configure NewSpawner.
type SpawnerOptions struct {
	Client llm.Client // nil: every child fails saying no model is configured
	Model  string
	// Price, when set, is what model's tokens cost (model.prices). A
	// child's result then carries its cost.
	Price Prices
	// Review and ReviewModel run /review's reviewer (RoleReviewer); nil
	// uses Client and Model.
	Review      llm.Client
	ReviewModel string
	// Tools is the parent's tool set; a child gets it without Blocked
	// (an orchestrator keeps delegate_task).
	Tools               *tools.Set
	MaxIterations       int // per child; 0 means DefaultMaxIterations
	SummaryMax          int // characters of a summary kept; 0 means DefaultSummaryMax
	MaxDepth            int // 1 is flat: children cannot delegate; 0 means DefaultMaxDepth
	OrchestratorEnabled bool
	// Timeout bounds one child's run; 0 is none.
	Timeout time.Duration
	// Workspace, when set, is the directory whose AGENTS.md a child is
	// given with its task, and where its workspace tools work.
	Workspace string
	// Worktrees gives each child of a conversation its own git worktree
	// of Workspace (delegation.worktree_isolation).
	Worktrees bool
	// StallQuiet and StallTool are how long a child may go without
	// progress between tools and inside one before it is stopped, and
	// StallGrace how long it then has to return; 0 turns the monitor off.
	StallQuiet, StallTool, StallGrace time.Duration
	// Nudge, when set, is asked once a child gave its final answer
	// whether it left something undone: a text it returns gives the
	// child one more round with that text as its next message (a kanban
	// worker that ended without reporting on its card is told to).
	Nudge func(ctx context.Context) string

	// Images loads the pictures a child's model requests show, as the
	// conversations' agent does (agent.Agent.Images); nil shows them as
	// lines.
	Images func(ctx context.Context, img chat.Image) (chat.Image, error)
	// Files tells a child of the files its task hands it (their Peek);
	// without it they are named by their paths alone.
	Files HandedFiles

	// EndProcesses ends the background processes a child's terminal
	// started, when it ends (keyed by the child's conversation key).
	EndProcesses func(conv string)
	Clock        clock.Clock
	Logger       *slog.Logger
}

// Spawner runs children: one agent loop each, on the caller's
// goroutine, with the child's own tools, budget and prompt.
type Spawner struct {
	opts SpawnerOptions
	leaf *tools.Set // the tools of a leaf
	orch *tools.Set // the tools of an orchestrator
	log  *slog.Logger
}

// NewSpawner returns a spawner.
func NewSpawner(opts SpawnerOptions) *Spawner {
	if opts.MaxIterations <= 0 {
		opts.MaxIterations = DefaultMaxIterations
	}
	if opts.SummaryMax <= 0 {
		opts.SummaryMax = DefaultSummaryMax
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	s := &Spawner{opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.leaf = opts.Tools.Without(Blocked...)
	s.orch = opts.Tools.Without(Blocked[1:]...)
	return s
}

// WithTools returns a spawner like s whose children get set (without
// Blocked) in place of the parent's tools: a kanban worker agent's,
// whose set adds the tools a card's worker reports with.
func (s *Spawner) WithTools(set *tools.Set) *Spawner {
	c := *s
	c.SetTools(set)
	return &c
}

// WithWork returns a spawner like s whose children work in workspace
// (its caller made it: they get no worktree of their own) and, when
// model is set, run on model: a kanban lane's worker agent, in its
// card's workspace.
func (s *Spawner) WithWork(workspace, model string) *Spawner {
	c := *s
	c.opts.Workspace, c.opts.Worktrees = workspace, false
	if model != "" {
		c.opts.Model = model
	}
	return &c
}

// WithNudge returns a spawner like s whose children are nudged by nudge
// (SpawnerOptions.Nudge).
func (s *Spawner) WithNudge(nudge func(ctx context.Context) string) *Spawner {
	c := *s
	c.opts.Nudge = nudge
	return &c
}

// SetTools replaces the parent's tool set (the registry is built after
// the spawner, since delegate_task needs the spawner).
func (s *Spawner) SetTools(set *tools.Set) {
	s.opts.Tools = set
	s.leaf = set.Without(Blocked...)
	s.orch = set.Without(Blocked[1:]...)
}

// depthKey carries a child's depth in its context: 1 for a child of a
// conversation, 2 for an orchestrator's worker, ….
type depthKey struct{}

// DepthOf is the depth of the child ctx runs in; 0 outside a child.
func DepthOf(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// parentKey carries, in a child's context, the conversation its
// delegation came from (Parent).
type parentKey struct{}

// Parent is the conversation a child works for: where its delegation's
// results go, and whose person dispatched it.
type Parent struct {
	Conv   string
	User   string
	Origin outbox.Target
}

// WithParent returns ctx carrying p as its child's parent (ParentOf).
func WithParent(ctx context.Context, p Parent) context.Context {
	return context.WithValue(ctx, parentKey{}, p)
}

// ParentOf is the conversation the child ctx runs for, as its
// delegation records it; false outside a child, or for one whose
// delegation could not be read. An orchestrator's workers have its
// parent.
func ParentOf(ctx context.Context) (Parent, bool) {
	p, ok := ctx.Value(parentKey{}).(Parent)
	return p, ok
}

// Live is a running child as the instance running it sees it: its
// progress, for /agents, renewals and the stall monitor, and its steer
// channel.
type Live struct {
	Child Child
	Conv  string

	// transcript is the child's live log; nil writes none.
	transcript *Transcript

	mu       sync.Mutex
	progress Progress
	steer    sessions.SteerQueue
	given    int   // the steers taken into steer, landed or not
	closed   bool  // the child ended: no steer is taken any more
	parent   *Live // the orchestrator this worker reports to, if any
	// workers are the workers this orchestrator started, and how those
	// that ended ended (by id).
	workers []*Live
	ended   map[string]Status
	// loops are the child's agent loops (its run, a correction round);
	// behind is set when the stall monitor left one running past the
	// grace: the run has its result, but the loop still holds a model
	// call, and its place under the process cap is kept until it returns.
	loops  sync.WaitGroup
	behind bool
}

// leftBehind reports whether the stall monitor left one of the child's
// agent loops running after its run returned; Wait for it then.
func (l *Live) leftBehind() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.behind
}

func newLive(c Child, conv string, now time.Time) *Live {
	return &Live{Child: c, Conv: conv, progress: Progress{LastActivity: now}}
}

// Progress returns what the child last reported, with its workers'.
func (l *Live) Progress() Progress {
	l.mu.Lock()
	p, workers, ended := l.progress, slices.Clone(l.workers), maps.Clone(l.ended)
	l.mu.Unlock()
	for _, w := range workers {
		wp := w.Progress()
		status, done := ended[w.Child.ID]
		if !done {
			status = StatusRunning
		}
		p.Workers = append(p.Workers, WorkerProgress{ID: w.Child.ID, Goal: excerpt(w.Child.Goal, 200), Status: status,
			APICalls: wp.APICalls, CurrentTool: wp.CurrentTool, Tokens: wp.InputTokens + wp.OutputTokens})
	}
	return p
}

// workerEnded records how worker w of this orchestrator ended.
func (l *Live) workerEnded(w *Live, s Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended == nil {
		l.ended = map[string]Status{}
	}
	l.ended[w.Child.ID] = s
}

func (l *Live) update(f func(p *Progress)) {
	l.mu.Lock()
	before := l.progress
	f(&l.progress)
	after := l.progress
	l.mu.Unlock()
	if l.parent != nil {
		// An orchestrator waiting for its workers makes progress as they
		// do, and their tokens are its own.
		l.parent.update(func(p *Progress) {
			p.LastActivity = after.LastActivity
			p.InputTokens += after.InputTokens - before.InputTokens
			p.OutputTokens += after.OutputTokens - before.OutputTokens
		})
	}
}

// liveKey carries the running child's Live in its context, so the
// workers an orchestrator starts report through it.
type liveKey struct{}

// workspaceKey carries the running child's workspace in its context, so
// the workers an orchestrator starts work in it.
type workspaceKey struct{}

// toolsetsKey carries the toolsets of the running child in its context:
// the workers an orchestrator starts have no more than it has.
type toolsetsKey struct{}

// Toolsets are the toolsets a child dispatched from ctx may run with:
// those of the child ctx runs in, or else all the parent's.
func (s *Spawner) Toolsets(ctx context.Context) []string {
	if ts, ok := ctx.Value(toolsetsKey{}).([]string); ok {
		return ts
	}
	return s.opts.Tools.Toolsets()
}

// toolsFor is base, a child's tools, limited to the toolsets of the
// child ctx runs in, if any, and then to asked, the toolsets its task
// names, when it names some. Errors: NotFound (asked names a toolset
// the parent does not have).
func toolsFor(ctx context.Context, base *tools.Set, asked []string) (*tools.Set, error) {
	if outer, ok := ctx.Value(toolsetsKey{}).([]string); ok {
		// A worker's spawner may hold toolsets its orchestrator was not
		// given, and the orchestrator toolsets its spawner lacks.
		keep := slices.DeleteFunc(base.Toolsets(), func(ts string) bool { return !slices.Contains(outer, ts) })
		var err error
		if base, err = base.Only(keep...); err != nil {
			return nil, err
		}
	}
	if len(asked) == 0 {
		return base, nil
	}
	for _, ts := range asked {
		if !slices.Contains(base.Toolsets(), ts) {
			return nil, errs.E("delegation.toolsFor", errs.NotFound, "%s", unknownToolset(ts, base.Toolsets()))
		}
	}
	return base.Only(asked...)
}

// unknownToolset says a task named ts, a toolset its parent, whose
// toolsets are have, lacks.
func unknownToolset(ts string, have []string) string {
	return fmt.Sprintf("toolset %q is not one the parent has (it has %s); a sub-agent gets some of its parent's toolsets, never more", ts, strings.Join(have, ", "))
}

// worker is the Live of a worker an orchestrator's call starts in ctx,
// listed among its orchestrator's workers.
func worker(ctx context.Context, c Child, now time.Time) *Live {
	l := newLive(c, "", now)
	l.parent, _ = ctx.Value(liveKey{}).(*Live)
	if l.parent != nil {
		l.transcript = l.parent.transcript.worker(now, c.ID, c.Goal)
		l.parent.mu.Lock()
		l.parent.workers = append(l.parent.workers, l)
		l.parent.mu.Unlock()
	}
	return l
}

// Steer hands text to the child, to land after its next tool result. It
// reports false once the child has ended, or when its steer buffer is
// full (MaxSteers, which the store bounds a child's steers by).
func (l *Live) Steer(text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		// The child has ended: a steer now would land nowhere, and its
		// result is already made.
		return false
	}
	if !l.steer.Offer(text, MaxSteers) {
		return false
	}
	l.given++
	return true
}

// endSteers closes the child to steers and returns those left in the
// queue, which never landed, and how many it was given in all.
func (l *Live) endSteers() (left []string, given int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.steer.Close(), l.given
}

// Run runs child at depth (1 for a conversation's child) to its end
// and returns its result. ctx ending stops it: its partial result comes
// back as StatusInterrupted. Its timeout, its stall monitor and its
// output schema's correction round are applied here, on the spawner's
// clock.
func (s *Spawner) Run(ctx context.Context, child Child, depth int, live *Live) Result {
	started := s.opts.Clock.Now()
	if live == nil {
		live = newLive(child, "", started)
	}
	res := Result{TaskIndex: child.Index, ChildID: child.ID, Goal: child.Goal}
	set, role := s.leaf, child.Role
	if role == RoleOrchestrator {
		if s.opts.OrchestratorEnabled && depth < s.opts.MaxDepth {
			set = s.orch
		} else {
			role = RoleLeaf
			res.RoleNote = fmt.Sprintf("ran as a leaf: orchestration needs delegation.orchestrator_enabled and a depth below delegation.max_spawn_depth (%d)", s.opts.MaxDepth)
		}
	}
	set, err := toolsFor(ctx, set, child.Toolsets)
	if err != nil {
		res.Status, res.ExitReason, res.Error = StatusFailed, "unknown_toolset", errs.Reason(err)
		return res
	}
	schema, err := compileSchema(child.OutputSchema)
	if err != nil {
		res.Status, res.ExitReason = StatusFailed, "invalid_output_schema"
		res.Error = "output_schema is not a valid JSON Schema: " + err.Error()
		return res
	}
	// An orchestrator's workers work where it works: in its worktree,
	// when it has one.
	workspace, inherited := ctx.Value(workspaceKey{}).(string)
	if !inherited {
		workspace = s.opts.Workspace
	}
	var wt *worktreeRun
	if s.opts.Worktrees && depth == 1 {
		wt = s.worktree(ctx, child.ID)
		workspace = wt.dir
	}
	ctx = context.WithValue(context.WithValue(context.WithValue(ctx, depthKey{}, depth), liveKey{}, live), workspaceKey{}, workspace)
	ctx = context.WithValue(ctx, toolsetsKey{}, set.Toolsets())
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if s.opts.Timeout > 0 {
		t := s.opts.Clock.AfterFunc(s.opts.Timeout, func() { cancel(errTimedOut) })
		defer t.Stop()
	}

	client, model := s.opts.Client, s.opts.Model
	if role == RoleReviewer && s.opts.Review != nil {
		client, model = s.opts.Review, s.opts.ReviewModel
	}
	a := &agent.Agent{
		Client:        countingClient{Client: client, live: live, clock: s.opts.Clock},
		Model:         model,
		Tools:         set,
		MaxIterations: s.opts.MaxIterations,
		HistoryBudget: -1,
		SystemPrompt:  childPrompt,
		Images:        s.opts.Images,
		Clock:         s.opts.Clock,
		Logger:        s.log.With("subagent", child.ID),
	}
	if client == nil {
		a.Client = nil
	}
	live.update(func(p *Progress) { p.Model = model })
	in := s.turnInput(child, workspace)
	conv := in.Conv
	in.Steer = &live.steer
	in.Progress = func(p sessions.Progress) {
		now := s.opts.Clock.Now()
		live.update(func(pr *Progress) { pr.CurrentTool, pr.LastActivity = p.Tool, now })
	}
	in.Observe = func(m chat.Message) {
		now := s.opts.Clock.Now()
		if m.Role == "tool" {
			live.update(func(pr *Progress) { pr.CurrentTool, pr.LastActivity = "", now })
		}
		live.transcript.Message(now, m)
	}
	out, stall, runErr := s.watch(ctx, cancel, live, func(ctx context.Context) (sessions.TurnOutput, error) { return runOut(a.Run(ctx, &in)) })
	if runErr == nil && stall == nil && out.End == sessions.TurnDone && schema != nil {
		out, stall, runErr = s.conform(ctx, cancel, live, a, in, out, schema, &res)
	}
	if runErr == nil && stall == nil && out.End == sessions.TurnDone && s.opts.Nudge != nil {
		if text := s.opts.Nudge(ctx); text != "" {
			out, stall, runErr = s.again(ctx, cancel, live, a, in, out, text)
		}
	}
	if s.opts.EndProcesses != nil {
		s.opts.EndProcesses(conv)
	}
	p := live.Progress()
	res.APICalls = p.APICalls
	res.InputTokens, res.OutputTokens, res.Model = p.InputTokens, p.OutputTokens, model
	res.CostUSD = s.opts.Price.Cost(model, p.InputTokens, p.OutputTokens)
	res.DurationSeconds = s.opts.Clock.Now().Sub(started).Seconds()
	res.Summary = s.cap(lastAssistant(out.History))
	switch {
	case stall != nil:
		res.Status, res.ExitReason = StatusStalled, "stalled"
		res.StalledAfterQuietSecs = int(stall.quiet / time.Second)
		res.StallThresholdSeconds = int(stall.threshold / time.Second)
		res.StallPhase = stall.phase
		res.StallGraceSeconds = int(s.opts.StallGrace / time.Second)
		res.Error = fmt.Sprintf("stalled: no progress for %d s %s", res.StalledAfterQuietSecs, strings.ReplaceAll(stall.phase, "_", " "))
		if !stall.returned {
			res.Error += fmt.Sprintf(", and it did not stop within the %d s grace", res.StallGraceSeconds)
		}
	case runErr != nil && errors.Is(context.Cause(ctx), errTimedOut):
		res.Status, res.ExitReason = StatusTimedOut, "timeout"
		res.TimeoutSeconds = int(s.opts.Timeout / time.Second)
		res.TimedOutAfterSeconds = int(res.DurationSeconds)
		res.TimeoutPhase = "after_llm_calls"
		if p.APICalls == 0 {
			res.TimeoutPhase = "before_first_llm_call"
		}
		res.Error = fmt.Sprintf("timed out after %d s (delegation.child_timeout_seconds)", res.TimedOutAfterSeconds)
	case runErr != nil:
		res.Status, res.ExitReason = StatusInterrupted, "interrupted"
		res.Error = "interrupted: " + causeText(context.Cause(ctx))
		var stop *StopCause
		if errors.As(context.Cause(ctx), &stop) && stop.Status == StatusCancelled {
			res.Status, res.ExitReason, res.Error = StatusCancelled, "cancelled", stop.Why
		}
	case out.End == sessions.TurnModelError:
		res.Status, res.ExitReason = StatusFailed, "model_error"
		res.Error = llm.UserMessage(out.Err)
		switch llm.ClassOf(out.Err) {
		case llm.ClassRateLimited:
			res.ExitReason = "rate_limited"
			res.RetryAfterSeconds = int(llm.RetryAfterOf(out.Err).Round(time.Second) / time.Second)
		case llm.ClassPayment:
			res.ExitReason = "quota_exhausted"
		}
	case out.End == sessions.TurnBudget:
		res.Status, res.ExitReason, res.Truncated = StatusCompleted, "max_iterations", true
	default:
		res.Status, res.ExitReason = StatusCompleted, "done"
	}
	if role != child.Role {
		res.Summary = strings.TrimSpace(res.Summary + "\n\n(" + res.RoleNote + ")")
	}
	left, given := live.endSteers()
	res = notLanded(res, left)
	res.Steers = given
	if wt != nil {
		res.Worktree = wt.finish()
	}
	return res
}

// stallInfo says why the stall monitor stopped a child.
type stallInfo struct {
	quiet, threshold time.Duration
	phase            string // between_tools | in_tool
	returned         bool   // the child stopped within the grace
}

// runOut is a runner's output and error as watch takes them.
func runOut(out *sessions.TurnOutput, err error) (sessions.TurnOutput, error) {
	if out == nil {
		return sessions.TurnOutput{}, err
	}
	return *out, err
}

// watch runs fn (the child's agent loop) under the stall monitor: a
// child quiet for StallQuiet between tools, or StallTool inside one, is
// stopped; one that returns within StallGrace gives its partial work,
// one that does not is left behind (stall.returned false) and its run
// ends without it. A child that makes progress is never touched.
func (s *Spawner) watch(ctx context.Context, cancel context.CancelCauseFunc, live *Live, fn func(context.Context) (sessions.TurnOutput, error)) (sessions.TurnOutput, *stallInfo, error) {
	type ran struct {
		out sessions.TurnOutput
		err error
	}
	done := make(chan ran, 1)
	live.loops.Add(1)
	go func() {
		defer live.loops.Done()
		out, err := fn(ctx)
		done <- ran{out, err}
	}()
	if s.opts.StallQuiet <= 0 && s.opts.StallTool <= 0 {
		r := <-done
		return r.out, nil, r.err
	}
	every := min(nonZero(s.opts.StallQuiet), nonZero(s.opts.StallTool)) / 10
	tick := s.opts.Clock.NewTicker(max(every, time.Second))
	defer tick.Stop()
	var stall *stallInfo
	var grace clock.Timer
	var graceC <-chan time.Time
	for {
		select {
		case r := <-done:
			if grace != nil {
				grace.Stop()
			}
			if stall != nil {
				stall.returned = true
			}
			return r.out, stall, r.err
		case <-graceC:
			live.mu.Lock()
			live.behind = true
			live.mu.Unlock()
			return sessions.TurnOutput{}, stall, errStalled
		case <-tick.C():
			if stall != nil {
				continue
			}
			now := s.opts.Clock.Now()
			p := live.Progress()
			threshold, phase := s.opts.StallQuiet, "between_tools"
			if p.CurrentTool != "" {
				threshold, phase = s.opts.StallTool, "in_tool"
			}
			if threshold <= 0 {
				continue
			}
			if quiet := now.Sub(p.LastActivity); quiet >= threshold {
				stall = &stallInfo{quiet: quiet, threshold: threshold, phase: phase}
				s.log.Warn("a sub-agent made no progress; stopping it", "subagent", live.Child.ID, "quiet_ms", quiet.Milliseconds(), "phase", phase)
				cancel(errStalled)
				grace = s.opts.Clock.NewTimer(s.opts.StallGrace)
				graceC = grace.C()
			}
		}
	}
}

// nonZero is d, or a very long time when d is not positive.
func nonZero(d time.Duration) time.Duration {
	if d <= 0 {
		return 1 << 62
	}
	return d
}

var errStalled = errors.New("the sub-agent made no progress")

// conform checks the child's final answer against its output schema
// and, when it fails, gives the child exactly one round to correct it,
// with the validation errors verbatim.
func (s *Spawner) conform(ctx context.Context, cancel context.CancelCauseFunc, live *Live, a *agent.Agent, in sessions.TurnInput,
	out sessions.TurnOutput, schema *jsonschema.Schema, res *Result) (sessions.TurnOutput, *stallInfo, error) {
	problems := validateAnswer(schema, lastAssistant(out.History))
	if len(problems) == 0 {
		valid := true
		res.SchemaValid = &valid
		return out, nil, nil
	}
	merged, stall, err := s.again(ctx, cancel, live, a, in, out, "Your final answer does not meet the output schema you were given. Validation errors:\n"+strings.Join(problems, "\n")+
		"\n\nReply again with only the corrected answer: one JSON value that meets the schema.")
	if err != nil || stall != nil || merged.End != sessions.TurnDone {
		valid := false
		res.SchemaValid, res.SchemaErrors = &valid, problems
		return merged, stall, err
	}
	problems = validateAnswer(schema, lastAssistant(merged.History[len(out.History):]))
	valid := len(problems) == 0
	res.SchemaValid, res.SchemaErrors = &valid, problems
	return merged, nil, nil
}

// again gives the child one more round after its run out, with text as
// its next message, and returns both rounds as one output: the first
// round's history, its task message first, is what the second builds on.
func (s *Spawner) again(ctx context.Context, cancel context.CancelCauseFunc, live *Live, a *agent.Agent, in sessions.TurnInput,
	out sessions.TurnOutput, text string) (sessions.TurnOutput, *stallInfo, error) {
	in.History = append(slices.Clone(in.History), out.History...)
	// The pictures came with the first message, which the history holds.
	in.Entry.Text, in.Images = text, nil
	next, stall, err := s.watch(ctx, cancel, live, func(ctx context.Context) (sessions.TurnOutput, error) { return runOut(a.Run(ctx, &in)) })
	merged := out
	merged.History = append(slices.Clone(out.History), next.History...)
	merged.End, merged.Err = next.End, next.Err
	return merged, stall, err
}

// validateAnswer checks answer (JSON, possibly in a code fence) against
// schema and returns the problems, none when it meets it.
func validateAnswer(schema *jsonschema.Schema, answer string) []string {
	text := strings.TrimSpace(answer)
	if strings.HasPrefix(text, "```") {
		text = strings.TrimPrefix(text, "```json")
		text = strings.TrimPrefix(text, "```")
		text = strings.TrimSuffix(strings.TrimSpace(text), "```")
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return []string{"the answer is not JSON: " + err.Error()}
	}
	if err := schema.Validate(inst); err != nil {
		return []string{tools.SchemaProblems(err)}
	}
	return nil
}

// errTimedOut is the cause of a child's context ended by its timeout.
var errTimedOut = errors.New("the child's timeout ran out")

// causeText is why a child was stopped, for its result's error.
func causeText(err error) string {
	if err == nil {
		return "stopped"
	}
	return err.Error()
}

// turnInput is the child's turn: its task as its first message, in
// workspace, shown the pictures among its files.
func (s *Spawner) turnInput(child Child, workspace string) sessions.TurnInput {
	conv := "subagent:" + child.ID
	files, images := handedFiles(child.Files, s.opts.Files.Peek)
	return sessions.TurnInput{
		Conv:      conv,
		Entry:     sessions.Entry{Inbound: sessions.Inbound{Conv: conv, Kind: sessions.KindSynthetic, Text: s.taskText(child, workspace, files)}, ID: child.ID},
		Images:    images,
		Workspace: workspace,
	}
}

// handedFiles are the lines naming the files a child is handed, told by
// peek, and the pictures among them as it is shown them.
func handedFiles(paths []string, peek func(string) (int64, string, bool, error)) (lines []string, images []chat.Image) {
	for _, p := range paths {
		if peek == nil {
			lines = append(lines, "- "+p)
			continue
		}
		size, mime, image, err := peek(p)
		if err != nil {
			lines = append(lines, fmt.Sprintf("- %s (it cannot be read now: %v)", p, err))
			continue
		}
		line := fmt.Sprintf("- %s (%s, %d bytes)", p, mime, size)
		if image {
			line += ", shown to you"
			images = append(images, chat.Image{Name: filepath.Base(p), MIME: mime, Path: p})
		}
		lines = append(lines, line)
	}
	return lines, images
}

// taskText is the child's one message: its goal, its context, the lines
// naming its files and the workspace's AGENTS.md.
func (s *Spawner) taskText(c Child, workspace string, files []string) string {
	var b strings.Builder
	b.WriteString("Goal: " + c.Goal)
	if c.Context != "" {
		b.WriteString("\n\nContext:\n" + c.Context)
	}
	if len(files) > 0 {
		b.WriteString("\n\nFiles handed to you:\n" + strings.Join(files, "\n"))
	}
	if agents := readAgentsFile(workspace); agents != "" {
		b.WriteString("\n\nThe workspace's AGENTS.md:\n" + agents)
	}
	return b.String()
}

// cap cuts a summary to the configured characters, saying so.
func (s *Spawner) cap(text string) string {
	if utf8.RuneCountInString(text) <= s.opts.SummaryMax {
		return text
	}
	r := []rune(text)
	return string(r[:s.opts.SummaryMax]) + "\n[summary cut at delegation.summary_max_chars]"
}

// lastAssistant is the newest assistant text of a child's run: its
// final answer, or what it said last before it was stopped.
func lastAssistant(h []chat.Message) string {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == "assistant" && strings.TrimSpace(h[i].Content) != "" {
			return h[i].Content
		}
	}
	return ""
}

// countingClient reports each model call and its usage to the child's
// progress as it happens.
type countingClient struct {
	llm.Client
	live  *Live
	clock clock.Clock
}

func (c countingClient) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := c.Client.Complete(ctx, req)
	now := c.clock.Now()
	c.live.update(func(p *Progress) {
		if err == nil {
			// A call cut off (by the timeout, a stop) is not one made.
			p.APICalls++
		}
		p.LastActivity = now
		p.CurrentTool = ""
		if resp != nil {
			p.InputTokens += resp.Usage.PromptTokens
			p.OutputTokens += resp.Usage.CompletionTokens
		}
	})
	return resp, err
}
