// Package delegation runs sub-agents in the background: delegate_task
// dispatches children that start from nothing but their goal and
// context, each child runs on a goroutine of an instance that owns it
// (a fenced claim with a heartbeat), and their results come back to the
// parent conversation as a completion: a synthetic turn, delivered at
// least once and deduplicated by the completion's id, never dropped.
//
// The package holds the domain's types and its Store interface; the
// backends (store/sqlite, store/redis) implement it and are held to one
// conformance suite (store/storetest). A dispatch made in a turn is a
// sessions.Write (Dispatch), committed with the turn or not at all.
package delegation

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldgw/herald/internal/worktree"
	"github.com/heraldgw/herald/outbox"
)

// Status is where a child stands.
type Status string

const (
	// StatusPending: dispatched, not yet taken by an instance.
	StatusPending Status = "pending"
	// StatusRunning: an instance owns it and runs it.
	StatusRunning Status = "running"
	// The terminal statuses: a child in one has its Result.
	StatusCompleted   Status = "completed"
	StatusFailed      Status = "failed"
	StatusInterrupted Status = "interrupted"
	// StatusCancelled: an operator cancelled it (the lifecycle API,
	// herald delegations stop), where StatusInterrupted is a stop by its
	// parent agent or its conversation (/stop, /new).
	StatusCancelled Status = "cancelled"
	StatusTimedOut  Status = "timed_out"
	StatusStalled   Status = "stalled"
	// StatusUnknown: the instance that ran it died before it recorded a
	// result.
	StatusUnknown Status = "unknown"
	// StatusRejected: it never started, its dispatch finding the
	// conversation at delegation.max_concurrent_children when the turn
	// that made it was saved (Dispatch.Limit).
	StatusRejected Status = "rejected"
)

// Terminal reports whether s is an end: the child has its result.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusInterrupted, StatusCancelled, StatusTimedOut, StatusStalled, StatusUnknown, StatusRejected:
		return true
	}
	return false
}

// Roles of a task. RoleReviewer is /review's: a leaf on the review
// model; delegate_task never gives it.
const (
	RoleLeaf         = "leaf"
	RoleOrchestrator = "orchestrator"
	RoleReviewer     = "reviewer"
)

// Task is what one child is asked to do.
type Task struct {
	Goal    string `json:"goal"`
	Context string `json:"context,omitempty"`
	// OutputSchema is a JSON Schema the child's final answer must meet.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Group names the tasks that complete together when completions are
	// independent (Delegation.Independent).
	Group string `json:"group,omitempty"`
	// Role is RoleLeaf or RoleOrchestrator, as the child runs it (an
	// orchestrator the depth does not allow runs as a leaf).
	Role string `json:"role,omitempty"`
	// Files are the files the child is handed, as absolute paths (in
	// the workspace, or kept by herald): its first message names them,
	// and it is shown the pictures among them.
	Files []string `json:"files,omitempty"`
	// Toolsets, when set, are the toolsets the child runs with: its
	// parent's tools restricted to them. None: all its parent's.
	Toolsets []string `json:"toolsets,omitempty"`
}

// Progress is what a running child last reported, for /agents and the
// stall monitor.
type Progress struct {
	APICalls     int       `json:"api_calls"`
	CurrentTool  string    `json:"current_tool,omitempty"` // "" between tools
	LastActivity time.Time `json:"last_activity,omitzero"`
	InputTokens  int       `json:"input_tokens,omitempty"`
	OutputTokens int       `json:"output_tokens,omitempty"`
	// Model is the model its calls run on.
	Model string `json:"model,omitempty"`
	// Workers are, for an orchestrator, the workers its calls started,
	// oldest first: they run inside its run, and are seen through it.
	Workers []WorkerProgress `json:"workers,omitempty"`
}

// WorkerProgress is where one of an orchestrator's workers stands.
type WorkerProgress struct {
	ID          string `json:"id"` // sub_<hex>
	Goal        string `json:"goal"`
	Status      Status `json:"status"` // running, or how it ended
	APICalls    int    `json:"api_calls"`
	CurrentTool string `json:"current_tool,omitempty"`
	Tokens      int    `json:"tokens,omitempty"`
}

// Child is one sub-agent.
type Child struct {
	ID         string `json:"id"` // sub_<hex>
	Delegation string `json:"delegation_id"`
	Index      int    `json:"task_index"` // its place in the dispatch, from 0
	Task
	Status Status `json:"status"`
	// Owner is the instance that runs it, Token its claim's fencing token
	// and OwnerExpires when the claim runs out by the store's clock,
	// while it runs.
	Owner        string    `json:"owner,omitempty"`
	Token        int64     `json:"token,omitempty"`
	OwnerExpires time.Time `json:"owner_expires,omitzero"`
	Progress     Progress  `json:"progress"`
	// Steers are the steers sent to it while it ran, oldest first
	// (Store.Steer): the record its end is checked against, so that a
	// steer that never reached it is said in its result.
	Steers    []string  `json:"steers,omitempty"`
	Result    *Result   `json:"result,omitempty"` // once terminal
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Delegation is one dispatch: its children and where their results go.
type Delegation struct {
	ID     string        `json:"id"`   // deleg_<hex>
	Conv   string        `json:"conv"` // the parent conversation
	User   string        `json:"user,omitempty"`
	Origin outbox.Target `json:"origin"` // where the parent's replies go
	// Session is the parent conversation's session when it dispatched
	// (sessions.ConvMetaSession): a completion for a conversation started
	// anew since is posted to the chat as a notice, not run as a turn of
	// a session that never asked for it.
	Session string `json:"session,omitempty"`
	// Source says who dispatched: "tool", "background", "review", "api".
	Source string `json:"source"`
	// Independent makes each task, or each group, complete on its own;
	// else one completion holds every task's result.
	Independent bool `json:"independent,omitempty"`
	// Orchestrator is, for the workers an orchestrator's call started
	// (Store.Start), that orchestrator's id: they run inside its run and
	// their results go back to it there, so their ends make no
	// completion, and their tokens, already the orchestrator's, are not
	// added to the conversation's totals again.
	Orchestrator string    `json:"orchestrator,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	Children     []Child   `json:"children"`
	// Trace is the span context of the turn that dispatched
	// (internal/tracing.Inject): its children and its completion's turn
	// continue that turn's trace.
	Trace map[string]string `json:"trace,omitempty"`
}

// Status is the delegation's own: running while a child is not
// terminal, else the status its children share, or, with mixed ends,
// "completed" when one completed; else "failed" when one failed (failed,
// timed out, stalled), else the first of "cancelled", "interrupted",
// "unknown" that one ended with: a delegation that was stopped, or whose
// instance died, says so rather than that it failed.
func (d Delegation) Status() Status {
	seen := map[Status]bool{}
	for _, c := range d.Children {
		if !c.Status.Terminal() {
			return StatusRunning
		}
		seen[c.Status] = true
	}
	switch {
	case len(seen) == 0:
		return StatusCompleted
	case len(seen) == 1:
		for s := range seen {
			return s
		}
	case seen[StatusCompleted]:
		return StatusCompleted
	case seen[StatusFailed] || seen[StatusTimedOut] || seen[StatusStalled]:
		return StatusFailed
	}
	for _, s := range []Status{StatusCancelled, StatusInterrupted, StatusUnknown} {
		if seen[s] {
			return s
		}
	}
	return StatusRejected
}

// Unit is the completion a child belongs to: "" for the whole
// delegation, else "group:<name>" or "task:<index>" when completions are
// independent.
func (d Delegation) Unit(c Child) string {
	switch {
	case !d.Independent:
		return ""
	case c.Group != "":
		return "group:" + c.Group
	}
	return "task:" + itoa(c.Index)
}

// CompletionFor is the completion that child's end makes, or nil while
// another child of its unit is not terminal. d holds the children as
// they stand with child's end written. Backends call it in the step that
// records the end, so the last child of a unit to end makes its
// completion exactly once.
//
// The workers of an orchestrator (Delegation.Orchestrator) make none.
func CompletionFor(d Delegation, child Child) *Completion {
	if d.Orchestrator != "" {
		return nil
	}
	unit := d.Unit(child)
	var results []Result
	for _, c := range d.Children {
		if d.Unit(c) != unit {
			continue
		}
		if !c.Status.Terminal() || c.Result == nil {
			return nil
		}
		results = append(results, *c.Result)
	}
	slices.SortFunc(results, func(a, b Result) int { return a.TaskIndex - b.TaskIndex })
	id := "cmp_" + d.ID
	if unit != "" {
		id += ":" + unit
	}
	return &Completion{
		ID: id, Delegation: d.ID, Conv: d.Conv, User: d.User, Origin: d.Origin,
		Session: d.Session, Unit: unit, Results: results, Total: len(d.Children), Trace: d.Trace,
	}
}

// Completion is the results of a delegation (or of one unit of it) on
// their way back to the parent conversation.
type Completion struct {
	ID         string        `json:"id"` // cmp_<delegation id>[:<unit>]; the dedupe key of its turn
	Delegation string        `json:"delegation_id"`
	Conv       string        `json:"conv"`
	User       string        `json:"user,omitempty"`
	Origin     outbox.Target `json:"origin"`
	Session    string        `json:"session,omitempty"`
	Unit       string        `json:"unit,omitempty"`
	Results    []Result      `json:"results"`
	Total      int           `json:"total"` // the delegation's children, for "2 of 3 done"
	// Delivered is set once the completion is in the parent's queue.
	Delivered   bool      `json:"delivered,omitempty"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	// Attempts counts deliveries that failed; it never gives up on one.
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Trace is its delegation's (Delegation.Trace).
	Trace map[string]string `json:"trace,omitempty"`
}

// Worktree is what a child's git worktree came to.
type Worktree = worktree.Worktree

// Result is one task's result.
type Result struct {
	TaskIndex    int      `json:"task_index"`
	ChildID      string   `json:"subagent_id"` // the child's; its JSON name is the stored one
	Goal         string   `json:"goal"`
	Status       Status   `json:"status"`
	Summary      string   `json:"summary"`
	ExitReason   string   `json:"exit_reason,omitempty"`
	Truncated    bool     `json:"truncated,omitempty"`
	SchemaValid  *bool    `json:"schema_valid,omitempty"`
	SchemaErrors []string `json:"schema_errors,omitempty"`
	APICalls     int      `json:"api_calls"`
	InputTokens  int      `json:"input_tokens,omitempty"`
	OutputTokens int      `json:"output_tokens,omitempty"`
	// Model is the model its calls ran on; its tokens add to the parent
	// conversation's totals on it (ParentUsage).
	Model string `json:"model,omitempty"`
	// CostUSD is from the price table in config; nil when the model has
	// no price there.
	CostUSD         *float64  `json:"cost_usd,omitempty"`
	DurationSeconds float64   `json:"duration_seconds"`
	Error           string    `json:"error,omitempty"` // one line, for a failure
	Worktree        *Worktree `json:"worktree,omitempty"`
	// PendingSteer is the steers that arrived too late to land, one a
	// line.
	PendingSteer string `json:"pending_steer,omitempty"`
	// Steers counts the steers the child was given, landed or pending:
	// Store.End refuses a result that counts fewer than the store
	// recorded (a steer sent as the child finished), so the runner can
	// say those did not land (Unlanded).
	Steers int `json:"steers,omitempty"`
	// RoleNote says the task ran as a leaf though it asked to orchestrate.
	RoleNote string `json:"role_note,omitempty"`
	// Timeout metadata (StatusTimedOut).
	TimeoutSeconds        int    `json:"timeout_seconds,omitempty"`
	TimedOutAfterSeconds  int    `json:"timed_out_after_seconds,omitempty"`
	TimeoutPhase          string `json:"timeout_phase,omitempty"`
	StalledAfterQuietSecs int    `json:"stalled_after_quiet_seconds,omitempty"`
	StallThresholdSeconds int    `json:"stall_threshold_seconds,omitempty"`
	StallPhase            string `json:"stall_phase,omitempty"`
	StallGraceSeconds     int    `json:"stall_grace_seconds,omitempty"`
	// RetryAfterSeconds is how long the model provider asked to wait
	// (ExitReason rate_limited), when it said.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// FreeSlots is, for StatusRejected, how many more children the
	// conversation had room for when its dispatch was refused.
	FreeSlots *int `json:"free_slots,omitempty"`
}

// UnknownError is the error of a child whose owner died.
const UnknownError = "owner exited before recording a result; outcome unknown"

// Dispatch is a delegation written with the turn that made it
// (sessions.Finish.Writes), its children pending, or by Store.Create
// outside a turn.
type Dispatch struct {
	Delegation Delegation
	// Limit is delegation.max_concurrent_children: the conversation's
	// pending and running children, these included, may be at most
	// Limit, counted in the step that writes the dispatch, so that two
	// dispatches arriving together cannot both pass it. Store.Create
	// refuses one that does not fit (a *Full error); a turn's commit
	// writes it with every child ended StatusRejected (Rejected) and its
	// completion pending, so the turn is saved and the parent hears of
	// the refusal as it hears of any result. 0 is no limit.
	Limit int
}

// WriteKind is the kind backends apply a Dispatch by.
func (Dispatch) WriteKind() string { return WriteDispatch }

// WriteDispatch is Dispatch's write kind.
const WriteDispatch = "delegation.dispatch"

// NewID returns prefix and 16 random hex digits: deleg_…, sub_….
func NewID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
