package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// ToolName is the delegation tool's name.
const ToolName = "delegate_task"

// Toolset is the toolset delegate_task is registered in.
const Toolset = "delegation"

// Signal kinds of the delegation domain (signals.Signal, Target the
// sub-agent's id, Conv its parent conversation).
const (
	SignalStop  signals.Kind = "delegation.stop"
	SignalSteer signals.Kind = "delegation.steer"
	// SignalCancel is an operator's cancel: the child ends cancelled.
	SignalCancel signals.Kind = "delegation.cancel"
)

const toolSchema = `{
  "type": "object",
  "properties": {
    "goal": {"type": "string", "description": "What one sub-agent should achieve. It starts from nothing: say everything it needs."},
    "context": {"type": "string", "description": "Facts, paths, constraints the sub-agent needs; it sees none of this conversation."},
    "role": {"type": "string", "description": "leaf (default) or orchestrator (may delegate to its own workers and returns one synthesis)."},
    "tasks": {
      "type": "array",
      "description": "Several tasks run in parallel, one sub-agent each; use instead of goal.",
      "items": {
        "type": "object",
        "properties": {
          "goal": {"type": "string"},
          "context": {"type": "string"},
          "output_schema": {"type": "object", "description": "A JSON Schema the sub-agent's final answer must meet."},
          "group": {"type": "string", "description": "Tasks of one group complete together when completions are independent."},
          "role": {"type": "string"},
          "files": {"type": "array", "items": {"type": "string"}},
          "toolsets": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["goal"]
      }
    },
    "output_schema": {"type": "object", "description": "For goal: a JSON Schema the final answer must meet."},
    "files": {"type": "array", "items": {"type": "string"}, "description": "For goal (each task has its own): paths of files in the workspace, or kept by herald (a person's upload), that the sub-agent is handed; it is shown the pictures among them."},
    "toolsets": {"type": "array", "items": {"type": "string"}, "description": "For goal (each task has its own): the toolsets the sub-agent runs with, some of yours (core, mcp, …); omitted, it has all of yours."},
    "action": {"type": "string", "enum": ["list", "steer", "stop"], "description": "Control instead of dispatch: list this conversation's sub-agents, steer one with a message, or stop one."},
    "subagent_id": {"type": "string", "description": "For steer and stop: the sub-agent, as dispatch or list gave it."},
    "message": {"type": "string", "description": "For steer: what to tell the sub-agent; it lands after its next tool result."}
  },
  "additionalProperties": false
}`

type taskArgs struct {
	Goal         string          `json:"goal"`
	Context      string          `json:"context"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Group        string          `json:"group"`
	Role         string          `json:"role"`
	Files        []string        `json:"files"`
	Toolsets     []string        `json:"toolsets"`
}

type toolArgs struct {
	taskArgs
	Tasks   []taskArgs `json:"tasks"`
	Action  string     `json:"action"`
	ChildID string     `json:"subagent_id"`
	Message string     `json:"message"`
}

// ToolOptions are what delegate_task needs.
type ToolOptions struct {
	Store   Store
	Spawner *Spawner // runs an orchestrator's workers in its turn
	Runner  *Runner  // this instance's running children, for control
	Signals signals.Store
	// Meta reads the parent conversation's metadata (its session).
	Meta func(ctx context.Context, conv string) (map[string]string, error)
	// MaxChildren is delegation.max_concurrent_children: a batch and a
	// conversation's running children are bounded by it.
	MaxChildren int
	Independent bool // delegation.independent_completions
	// Transcripts names a child's live transcript, "" for none.
	Transcripts func(delegation string, index int) string
	// Files checks the files a task hands its child; without its
	// Resolve, tasks with files are refused.
	Files HandedFiles
	// Workspace is tools.workspace, where a conversation's relative
	// paths are taken from (a child's own turn works in its own).
	Workspace string
	Clock     clock.Clock
}

// Tool is delegate_task.
func Tool(opts ToolOptions) tools.Tool {
	if opts.MaxChildren < 1 {
		opts.MaxChildren = 10
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	h := &toolHandler{opts: opts}
	return tools.Tool{
		Name: ToolName,
		Description: "Hand self-contained work to sub-agents that run in the background. Give goal (and context) for one, or tasks for several in parallel. " +
			"The call returns at once; each sub-agent's result comes back to this conversation later as a new message. Do not wait or poll for it. " +
			"A sub-agent knows only what you put in goal and context. action list/steer/stop controls the sub-agents of this conversation.",
		Schema:  []byte(toolSchema),
		Handler: tools.Func(h.handle),
	}
}

type toolHandler struct {
	opts ToolOptions
}

func (h *toolHandler) handle(ctx context.Context, turn *tools.Turn, a toolArgs) (tools.Result, error) {
	const op = "delegation.delegate_task"
	if a.Action != "" {
		return h.control(ctx, turn, a)
	}
	tasks, err := checkTasks(op, a.taskArgs, a.Tasks, h.opts.MaxChildren)
	if err != nil {
		return tools.Result{}, err
	}
	if h.opts.Spawner != nil {
		if err := checkToolsets(op, tasks, h.opts.Spawner.Toolsets(ctx)); err != nil {
			return tools.Result{}, err
		}
	}
	workspace := turn.Workspace
	if workspace == "" {
		workspace = h.opts.Workspace
	}
	if tasks, err = h.opts.Files.resolve(op, tasks, workspace, keptConv(ctx, turn)); err != nil {
		return tools.Result{}, err
	}
	if depth := DepthOf(ctx); depth > 0 {
		return h.orchestrate(ctx, depth, tasks)
	}
	return h.dispatch(ctx, turn, tasks)
}

// checkTasks is what a dispatch asks for, goal (one task) or tasks
// (several), checked as delegate_task and the lifecycle API both check
// it: not both, not neither, at most max, each with a goal and an output
// schema that compiles. With tasks, goal's context and output_schema must
// be empty: each task carries its own. Errors: Invalid.
func checkTasks(op string, goal taskArgs, tasks []taskArgs, max int) ([]taskArgs, error) {
	switch {
	case strings.TrimSpace(goal.Goal) != "":
		if len(tasks) > 0 {
			return nil, errs.E(op, errs.Invalid, "give either goal or tasks, not both")
		}
		tasks = []taskArgs{goal}
	case len(tasks) == 0:
		return nil, errs.E(op, errs.Invalid, "nothing to delegate: give goal (one task) or tasks (several)")
	case strings.TrimSpace(goal.Context) != "" || !noSchema(goal.OutputSchema) || len(goal.Files) > 0 || len(goal.Toolsets) > 0:
		// Said rather than dropped: with tasks, each carries its own.
		return nil, errs.E(op, errs.Invalid, "context, output_schema, files and toolsets go with goal; with tasks, give each task its own")
	}
	if len(tasks) > max {
		return nil, errs.E(op, errs.Invalid,
			"%d tasks is more than delegation.max_concurrent_children (%d); nothing was started: send at most %d, or fewer larger tasks",
			len(tasks), max, max)
	}
	for i, t := range tasks {
		if strings.TrimSpace(t.Goal) == "" {
			return nil, errs.E(op, errs.Invalid, "task %d has no goal; nothing was started", i)
		}
		if err := checkSchema(t.OutputSchema); err != nil {
			return nil, errs.E(op, errs.Invalid, "task %d: output_schema is not a valid JSON Schema (%v); nothing was started", i, err)
		}
	}
	return tasks, nil
}

// checkToolsets refuses tasks that name a toolset outside have, the
// parent's. Errors: Invalid.
func checkToolsets(op string, tasks []taskArgs, have []string) error {
	for i, t := range tasks {
		for _, ts := range t.Toolsets {
			if !slices.Contains(have, ts) {
				return errs.E(op, errs.Invalid, "task %d: %s; nothing was started", i, unknownToolset(ts, have))
			}
		}
	}
	return nil
}

// dispatch writes the delegation with the turn (a sessions.Write): its
// children start once the turn has committed, and a turn that never
// commits dispatches nothing.
func (h *toolHandler) dispatch(ctx context.Context, turn *tools.Turn, tasks []taskArgs) (tools.Result, error) {
	const op = "delegation.delegate_task"
	active, err := h.opts.Store.Active(ctx, turn.Conv)
	if err != nil {
		return tools.Result{}, errs.E(op, errs.Unavailable, "could not count this conversation's running sub-agents (%v); try again", err)
	}
	for _, w := range turn.Writes() {
		if d, ok := w.(Dispatch); ok {
			active += len(d.Delegation.Children)
		}
	}
	if free := h.opts.MaxChildren - active; len(tasks) > free {
		return tools.JSON(map[string]any{
			"status":     "rejected",
			"error":      fmt.Sprintf("this conversation has %d sub-agents running and the limit is %d (delegation.max_concurrent_children): %d free; nothing was started. Wait for results, or send fewer tasks.", active, h.opts.MaxChildren, max(free, 0)),
			"free_slots": max(free, 0),
		}), nil
	}
	d := Delegation{
		ID: NewID("deleg_"), Conv: turn.Conv, User: turn.User, Origin: turn.Origin,
		Source: "tool", Independent: h.opts.Independent, CreatedAt: h.opts.Clock.Now(),
		Trace: tracing.Inject(ctx, nil),
	}
	if h.opts.Meta != nil {
		if meta, err := h.opts.Meta(ctx, turn.Conv); err == nil {
			d.Session = meta[sessions.ConvMetaSession]
		}
	}
	d.Children = childrenOf(d.ID, tasks)
	// The store counts again as it writes, with the turn: a dispatch
	// another made meanwhile may leave no room, and then this one's
	// children end rejected and that comes back as their result.
	turn.Write(Dispatch{Delegation: d, Limit: h.opts.MaxChildren})
	ids := make([]string, len(d.Children))
	var logs []string
	for i, c := range d.Children {
		ids[i] = c.ID
		if h.opts.Transcripts != nil {
			if p := h.opts.Transcripts(d.ID, i); p != "" {
				logs = append(logs, p)
			}
		}
	}
	return tools.JSON(map[string]any{
		"status":           "dispatched",
		"delegation_id":    d.ID,
		"subagent_ids":     ids,
		"live_transcripts": logs,
		"note":             "The sub-agents run in the background; their results come back to this conversation as a new message. Do not poll for them.",
	}), nil
}

// childrenOf makes a delegation's children from its tasks, pending.
func childrenOf(id string, tasks []taskArgs) []Child {
	out := make([]Child, len(tasks))
	for i, t := range tasks {
		role := RoleLeaf
		if t.Role == RoleOrchestrator {
			role = RoleOrchestrator
		}
		out[i] = Child{
			ID: NewID("sub_"), Delegation: id, Index: i, Status: StatusPending,
			Task: Task{Goal: t.Goal, Context: t.Context, OutputSchema: t.OutputSchema, Group: t.Group, Role: role, Files: t.Files, Toolsets: t.Toolsets},
		}
	}
	return out
}

// orchestrate runs an orchestrator's workers inside its own run and
// returns their results at once: its synthesis needs them. They take
// places under delegation.process_max_children as any child does, and,
// when the orchestrator is a child this instance runs, are written to
// the store (Runner.startWorkers): counted under the conversation's
// delegation.max_concurrent_children, listed with its delegations, and
// ended there with their results. Either limit refuses them all, or
// none start.
func (h *toolHandler) orchestrate(ctx context.Context, depth int, tasks []taskArgs) (tools.Result, error) {
	const op = "delegation.delegate_task"
	children := childrenOf(NewID("deleg_"), tasks)
	var runs []*running
	var ctxs []context.Context
	if r := h.opts.Runner; r != nil {
		free, ok := r.holdWorkers(len(tasks))
		if !ok {
			return tools.JSON(map[string]any{
				"status":     "rejected",
				"error":      fmt.Sprintf("this instance runs as many sub-agents as it may (delegation.process_max_children is %d): %d free for %d workers; nothing was started. Do the work yourself, or send fewer tasks.", r.opts.Max, free, len(tasks)),
				"free_slots": free,
			}), nil
		}
		var err error
		runs, ctxs, err = r.startWorkers(ctx, children, h.opts.MaxChildren)
		if full, ok := FullOf(err); ok {
			r.releaseWorkers(len(tasks))
			return tools.JSON(map[string]any{
				"status":     "rejected",
				"error":      fmt.Sprintf("this conversation has %d sub-agents running and the limit is %d (delegation.max_concurrent_children): %d free for %d workers; nothing was started. Do the work yourself, or send fewer tasks.", full.Running, full.Limit, full.Free(), len(tasks)),
				"free_slots": full.Free(),
			}), nil
		}
		if err != nil {
			r.releaseWorkers(len(tasks))
			return tools.Result{}, errs.E(op, errs.Unavailable, "could not start the workers (%v); nothing was started, try again", err)
		}
		if runs == nil {
			defer r.releaseWorkers(len(tasks))
		}
	}
	clk := h.opts.Spawner.opts.Clock
	results := make([]Result, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if runs == nil {
				l := worker(ctx, c, clk.Now())
				results[i] = h.opts.Spawner.Run(ctx, c, depth+1, l)
				h.workerEnded(l, results[i])
				return
			}
			rc := runs[i]
			results[i] = h.opts.Spawner.Run(ctxs[i], c, depth+1, rc.live)
			rc.cancel(nil)
			h.workerEnded(rc.live, results[i])
			h.opts.Runner.end(rc, results[i])
		}()
	}
	wg.Wait()
	return tools.JSON(map[string]any{"status": "completed", "results": results}), nil
}

// workerEnded writes worker l's end into its orchestrator's transcript
// and progress.
func (h *toolHandler) workerEnded(l *Live, res Result) {
	l.transcript.End(h.opts.Spawner.opts.Clock.Now(), res)
	if l.parent != nil {
		l.parent.workerEnded(l, res.Status)
	}
}

// control is list, steer and stop, within the caller's own conversation:
// another conversation's sub-agent answers "not found".
func (h *toolHandler) control(ctx context.Context, turn *tools.Turn, a toolArgs) (tools.Result, error) {
	const op = "delegation.delegate_task"
	if a.Action == "list" {
		return h.list(ctx, turn)
	}
	id := strings.TrimSpace(a.ChildID)
	if id == "" {
		return tools.Result{}, errs.E(op, errs.Invalid, "%s needs subagent_id; list the sub-agents to see their ids", a.Action)
	}
	c, err := h.opts.Store.Child(ctx, id)
	var d Delegation
	if err == nil {
		d, err = h.opts.Store.Delegation(ctx, c.Delegation)
	}
	if errs.Is(err, errs.NotFound) || (err == nil && d.Conv != turn.Conv) {
		return tools.Result{}, errs.E(op, errs.NotFound, "no sub-agent %q in this conversation; list the sub-agents to see their ids", id)
	}
	if err != nil {
		return tools.Result{}, errs.E(op, errs.Unavailable, "could not read sub-agent %s (%v); try again", id, err)
	}
	if c.Status.Terminal() {
		return tools.JSON(map[string]any{"status": "rejected", "error": fmt.Sprintf("sub-agent %s has already ended (%s); its result comes back as a message", id, c.Status)}), nil
	}
	switch a.Action {
	case "steer":
		if strings.TrimSpace(a.Message) == "" {
			return tools.Result{}, errs.E(op, errs.Invalid, "steer needs message: what to tell the sub-agent")
		}
		if c.Status == StatusPending {
			return tools.JSON(map[string]any{"status": "rejected", "error": fmt.Sprintf("sub-agent %s has not started yet; steer it once it runs, or stop it and dispatch again with the new context", id)}), nil
		}
		// The store records the steer first: the child's end is checked
		// against the record, so a steer that reaches it too late, or not
		// at all, is said in its result. A child's steers come from its
		// conversation's turns, one tool call at a time, so they reach it
		// in the order they were recorded.
		if err := h.opts.Store.Steer(ctx, id, a.Message); err != nil {
			switch {
			case errs.Is(err, errs.Conflict):
				return tools.JSON(map[string]any{"status": "rejected", "error": fmt.Sprintf("sub-agent %s has already ended; its result comes back as a message", id)}), nil
			case errs.Is(err, errs.TooLarge):
				return tools.JSON(map[string]any{"status": "rejected", "error": fmt.Sprintf("sub-agent %s has taken %d steers, the most it takes; stop it and dispatch again with the new context", id, MaxSteers)}), nil
			}
			return tools.Result{}, errs.E(op, errs.Unavailable, "could not steer sub-agent %s (%v); try again", id, err)
		}
		sig := signals.Signal{Conv: turn.Conv, Kind: SignalSteer, Target: id, Text: a.Message}
		if h.opts.Runner == nil || (!h.opts.Runner.applyRegistered(sig) && !h.opts.Runner.runs(id)) {
			// It runs on another instance.
			if err := h.opts.Signals.Signal(ctx, sig); err != nil {
				return tools.JSON(map[string]string{"status": "steered", "subagent_id": id,
					"note": fmt.Sprintf("recorded, but it could not be sent to the instance running the sub-agent just now (%v): it may not land; if it does not, the result says so", err)}), nil
			}
		}
		return tools.JSON(map[string]string{"status": "steered", "subagent_id": id, "note": "it lands after the sub-agent's next tool result; if it finishes first, its result says the steer did not land"}), nil
	case "stop":
		stop := Stopper{Store: h.opts.Store, Signals: h.opts.Signals, Runner: h.opts.Runner}
		if _, err := stop.Stop(ctx, d, c, byParent); err != nil {
			return tools.Result{}, errs.E(op, errs.Unavailable, "could not reach sub-agent %s (%v); try again", id, err)
		}
		return tools.JSON(map[string]string{"status": "stopping", "subagent_id": id, "note": "it stops at its next step; its partial result comes back as a message"}), nil
	}
	return tools.Result{}, errs.E(op, errs.Invalid, "unknown action %q: use list, steer or stop", a.Action)
}

func (h *toolHandler) list(ctx context.Context, turn *tools.Turn) (tools.Result, error) {
	ds, err := h.opts.Store.List(ctx, Query{Conv: turn.Conv, Limit: 20})
	if err != nil {
		return tools.Result{}, errs.E("delegation.delegate_task", errs.Unavailable, "could not list the sub-agents (%v); try again", err)
	}
	now := h.opts.Clock.Now()
	type row struct {
		ChildID        string `json:"subagent_id"`
		DelegationID   string `json:"delegation_id"`
		Goal           string `json:"goal"`
		Status         Status `json:"status"`
		RunningSeconds int    `json:"running_seconds,omitempty"`
		AcceptingSteer bool   `json:"accepting_steer"`
		Transcript     string `json:"transcript,omitempty"`
		// Toolsets are those its task limited it to; none: all its parent's.
		Toolsets []string `json:"toolsets,omitempty"`
	}
	rows := []row{}
	for _, d := range ds {
		for _, c := range d.Children {
			r := row{ChildID: c.ID, DelegationID: d.ID, Goal: excerpt(c.Goal, 200), Status: c.Status, AcceptingSteer: c.Status == StatusRunning, Toolsets: c.Toolsets}
			if c.Status == StatusRunning && !c.StartedAt.IsZero() {
				r.RunningSeconds = int(now.Sub(c.StartedAt).Seconds())
			}
			if h.opts.Transcripts != nil {
				r.Transcript = h.opts.Transcripts(d.ID, c.Index)
			}
			rows = append(rows, r)
		}
	}
	return tools.JSON(map[string]any{"subagents": rows}), nil
}

// checkSchema compiles an output schema; empty is none.
func checkSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}

// compileSchema compiles an output schema, nil for none.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	if noSchema(raw) {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("urn:herald:output", doc); err != nil {
		return nil, err
	}
	return c.Compile("urn:herald:output")
}

// excerpt is s cut to n characters.
func excerpt(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}
