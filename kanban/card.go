// Package kanban is herald's boards: cards that outlive sessions and
// restarts, linked parent to child, claimed by one worker at a time,
// moved through review and announced to chats. A dispatcher on every
// gateway instance (and `herald kanban daemon`) hands ready cards to
// lanes: an in-process worker agent or any CLI command.
//
// Every change to a board is decided here, in Go, on cards read from the
// store, and written back with Store.Apply, which applies it only while
// every card it read is unchanged (a compare-and-set on versions). So
// the rules (what a block kind does, when a card is promoted, who wins a
// claim) live in one place, the same on both backends, and any number of
// dispatchers may work one board at once: of two that decide on the same
// card, one writes and the other reads again.
package kanban

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// DefaultBoard is the board that exists from the start.
const DefaultBoard = "default"

// Status is where a card stands.
type Status string

// The statuses.
const (
	StatusTriage    Status = "triage"    // to be looked at by a person; never dispatched
	StatusTodo      Status = "todo"      // waits for its parents
	StatusScheduled Status = "scheduled" // waits for its time (ScheduledAt)
	StatusReady     Status = "ready"     // may be claimed
	StatusRunning   Status = "running"   // a worker holds it (Claim)
	StatusBlocked   Status = "blocked"   // waits for an unblock
	StatusReview    Status = "review"    // done by its worker, waits for a reviewer
	StatusDone      Status = "done"
	StatusArchived  Status = "archived"
)

// Statuses lists every status, in board order.
var Statuses = []Status{StatusTriage, StatusTodo, StatusScheduled, StatusReady, StatusRunning, StatusBlocked, StatusReview, StatusDone, StatusArchived}

// Valid reports whether s is a status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// BlockKind says why a card is blocked, and so where a block moves it.
type BlockKind string

// The block kinds.
const (
	BlockDependency BlockKind = "dependency" // waits for another card: back to todo
	BlockNeedsInput BlockKind = "needs_input"
	BlockCapability BlockKind = "capability"
	BlockTransient  BlockKind = "transient"
)

// BlockKinds lists every block kind.
var BlockKinds = []BlockKind{BlockDependency, BlockNeedsInput, BlockCapability, BlockTransient}

// WorkspaceKind is where a card's worker works.
type WorkspaceKind string

// The workspace kinds.
const (
	WorkspaceScratch  WorkspaceKind = "scratch"  // a directory of its own, removed once the card is done
	WorkspaceWorktree WorkspaceKind = "worktree" // a git worktree of its own
	WorkspaceDir      WorkspaceKind = "dir"      // a fixed directory (Workspace.Path)
)

// Workspace is a card's workspace.
type Workspace struct {
	Kind WorkspaceKind `json:"kind"`
	Path string        `json:"path,omitempty"` // a dir workspace's directory, a worktree one's repository
}

// Claim is a worker's hold on a running card. Token is the card's
// Version when it was claimed: it grows with every claim of the card,
// and every write the worker makes about the card names it, so a worker
// whose claim was released writes nothing more.
type Claim struct {
	Owner   string    `json:"owner"` // the instance (or CLI) holding it
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"` // by the store's clock
	Run     string    `json:"run"`     // the run it started
	Lane    string    `json:"lane"`
	// Worker is the process that works the card, once it started: on
	// Host, with PID and the process's start time (so a PID reused by
	// another process is not taken for it). An in-process worker has
	// no PID; its heartbeat is its owner's.
	Host      string    `json:"host,omitempty"`
	PID       int       `json:"pid,omitempty"`
	ProcStart string    `json:"proc_start,omitempty"`
	Spawned   bool      `json:"spawned,omitempty"`  // the worker started
	Heartbeat time.Time `json:"heartbeat,omitzero"` // the worker's last sign of life
	// Started is when the claim, and its run, began; Review says the run
	// is a reviewer's. The run's end is written from them.
	Started time.Time `json:"started,omitzero"`
	Review  bool      `json:"review,omitempty"`
	// OwnerPID and OwnerStart name the owner's process on Host (its
	// gateway's, or a dispatching CLI's): with it gone, nothing renews
	// the claim, and an in-process worker is gone with it. 0: not known
	// (a person's claim).
	OwnerPID   int    `json:"owner_pid,omitempty"`
	OwnerStart string `json:"owner_proc_start,omitempty"`
	// Stop, once a person asked for it (Service.Reclaim, Service.Stop),
	// says the worker is to be ended, and what then becomes of the card:
	// the dispatcher that runs the worker does both, and no other worker
	// takes the card before.
	Stop *StopRequest `json:"stop,omitempty"`
}

// StopRequest is a person's request to end a running card's worker.
type StopRequest struct {
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	// Then is what becomes of the card once its worker ended.
	Then StopThen `json:"then,omitempty"`
}

// StopThen is what becomes of a card whose worker was stopped on request.
type StopThen string

const (
	// StopBlock blocks the card with the request's reason, no failure
	// counted (herald kanban stop). The empty StopThen is StopBlock.
	StopBlock StopThen = "block"
	// StopReclaim releases the claim, the run ending reclaimed and
	// counted as a failure: the card is ready again (herald kanban
	// reclaim).
	StopReclaim StopThen = "reclaim"
)

// Result is what a worker's complete call reported.
type Result struct {
	Summary      string            `json:"summary"`
	Result       string            `json:"result,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	CreatedCards []string          `json:"created_cards,omitempty"`
	Artifacts    []string          `json:"artifacts,omitempty"`
}

// Card is one unit of work on a board.
type Card struct {
	ID       string `json:"id"` // t_<8 hex>
	Board    string `json:"board"`
	Title    string `json:"title"`
	Body     string `json:"body,omitempty"`
	Assignee string `json:"assignee,omitempty"` // a lane's name, lower-cased
	Priority int    `json:"priority"`           // higher is claimed first
	Status   Status `json:"status"`
	// Parents and Children are the card's links, as the store keeps
	// them (Change.Link); a card is ready only when every parent is done.
	Parents   []string  `json:"parents,omitempty"`
	Children  []string  `json:"children,omitempty"`
	Workspace Workspace `json:"workspace"`
	// MaxRuntime bounds one run; 0: none.
	MaxRuntime Seconds `json:"max_runtime_seconds,omitempty"`
	// MaxRetries is how many failures in a row give up; 0: the
	// dispatcher's failure limit.
	MaxRetries      int    `json:"max_retries,omitempty"`
	IdempotencyKey  string `json:"idempotency_key,omitempty"`
	CreatedBy       string `json:"created_by,omitempty"`
	Tenant          string `json:"tenant,omitempty"`
	Review          bool   `json:"review,omitempty"`           // a completed run goes to review, not done
	CompletionCheck string `json:"completion_check,omitempty"` // a command that must exit 0 for done
	// ScheduledAt is when a scheduled card becomes ready (or todo).
	ScheduledAt time.Time `json:"scheduled_at,omitzero"`

	// Failures counts the runs in a row that failed; an unblock and a
	// completion reset it.
	Failures  int    `json:"failures,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// BlockKind and BlockReason say why a blocked card is; Reblocks
	// counts the blocks for the same reason after unblocks.
	BlockKind   BlockKind `json:"block_kind,omitempty"`
	BlockReason string    `json:"block_reason,omitempty"`
	Reblocks    int       `json:"reblocks,omitempty"`
	// RetryAt holds a card back from claims until then (a rate-limited
	// run's delay).
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Waiting says why a ready card is not claimed, as the dispatcher
	// last noted it (reason/level), so each is said once.
	Waiting string `json:"waiting,omitempty"`

	Claim  *Claim  `json:"claim,omitempty"`
	Result *Result `json:"result,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ReadyAt is when the card last became ready (or review): the
	// stranded diagnostics count from it.
	ReadyAt     time.Time `json:"ready_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// Version grows with every write of the card (Store.Apply checks it).
	Version int64 `json:"version"`
}

// Seconds is a duration that reads and writes as whole seconds in JSON.
type Seconds time.Duration

// Duration is s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) }

// MarshalJSON writes s as its whole seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, int64(time.Duration(s)/time.Second), 10), nil
}

// UnmarshalJSON reads whole seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("seconds: want a whole number, got %s", b)
	}
	*s = Seconds(time.Duration(n) * time.Second)
	return nil
}

// NewCardID returns a new card id: t_ and 8 random hex digits.
func NewCardID() string { return "t_" + randomHex(4) }

// NewRunID returns a new run id.
func NewRunID() string { return "run_" + randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Board is a set of cards, a hard boundary: a worker sees only its own.
type Board struct {
	Slug        string    `json:"slug"`
	Name        string    `json:"name,omitempty"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// Comment is a note on a card.
type Comment struct {
	ID     string    `json:"id"`
	Card   string    `json:"card"`
	Author string    `json:"author,omitempty"`
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
}

// Attachment is a file attached to a card: kept on the instance that
// took it, in its board home as attachments/<card>/<name>, and handed
// to the card's workers by that path. A card's attachments have names
// of their own: a second one of a name is refused.
type Attachment struct {
	Card      string    `json:"card"`
	Name      string    `json:"name"` // a plain file name (CheckAttachmentName)
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"` // of its contents, in hex
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
	// Path is the file's absolute path, as the service reads it; the
	// store keeps no path, which is the service's to make.
	Path string `json:"path,omitempty"`
}

// Outcome is how a run ended.
type Outcome string

// The outcomes.
const (
	OutcomeCompleted Outcome = "completed"
	OutcomeBlocked   Outcome = "blocked"
	OutcomeCrashed   Outcome = "crashed"
	OutcomeTimedOut  Outcome = "timed_out"
	OutcomeGaveUp    Outcome = "gave_up"
	OutcomeReclaimed Outcome = "reclaimed"
	OutcomeLimited   Outcome = "rate_limited" // exit 75: requeued without a failure
	// OutcomeCheckFailed is a complete whose completion check failed: a
	// failed run, counted as a crash is.
	OutcomeCheckFailed Outcome = "check_failed"
)

// Run is one attempt at a card.
type Run struct {
	ID      string    `json:"id"`
	Card    string    `json:"card"`
	Board   string    `json:"board"`
	Lane    string    `json:"lane"`
	Owner   string    `json:"owner"`
	Review  bool      `json:"review,omitempty"` // a reviewer's run
	Started time.Time `json:"started_at"`
	Ended   time.Time `json:"ended_at,omitzero"`
	Outcome Outcome   `json:"outcome,omitempty"`
	Error   string    `json:"error,omitempty"`
	Summary string    `json:"summary,omitempty"`
}

// Event is one transition or happening on a board, in its log: the
// stranded diagnostics, notifications and the HTTP event stream read it.
type Event struct {
	// Cursor is the event's place in its board's log, given by the
	// store: later events have greater cursors (compare with Store's
	// order, not as strings).
	Cursor string         `json:"cursor"`
	Board  string         `json:"board"`
	Card   string         `json:"card,omitempty"`
	Kind   string         `json:"kind"`
	From   Status         `json:"from,omitempty"`
	To     Status         `json:"to,omitempty"`
	Run    string         `json:"run,omitempty"`
	Actor  string         `json:"actor,omitempty"`
	Text   string         `json:"text,omitempty"` // a reason, an error, a summary
	Data   map[string]any `json:"data,omitempty"`
	At     time.Time      `json:"at"`
}

// Event kinds beside a status change ("moved").
const (
	EventCreated     = "created"
	EventMoved       = "moved"
	EventClaimed     = "claimed"
	EventSpawned     = "spawned"
	EventCompleted   = "completed"
	EventBlocked     = "blocked"
	EventUnblocked   = "unblocked"
	EventGaveUp      = "gave_up"
	EventCrashed     = "crashed"
	EventTimedOut    = "timed_out"
	EventReclaimed   = "reclaimed"
	EventRateLimited = "rate_limited"
	EventReview      = "review_requested"
	EventApproved    = "approved"
	EventChanges     = "changes_requested"
	EventCommented   = "commented"
	EventAttached    = "attached"
	EventLinked      = "linked"
	EventUnlinked    = "unlinked"
	EventAssigned    = "assigned"
	EventPrioritized = "prioritized"
	EventPromoted    = "promoted"
	EventArchived    = "archived"
	EventCheckFailed = "check_failed"

	EventSkippedUnassigned   = "skipped_unassigned"
	EventSkippedNonspawnable = "skipped_nonspawnable"
	EventStranded            = "stranded_in_ready"
)

// Subscription sends a board's events of some kinds to a target, from
// its cursor on: each event once.
type Subscription struct {
	ID     string   `json:"id"`
	Board  string   `json:"board"`
	Target string   `json:"target"`           // as cron's deliver: platform:chat[:thread], a home channel…
	Events []string `json:"events,omitempty"` // kinds; none: the default set
	Conv   string   `json:"conv,omitempty"`   // the conversation that made it, for origin
	// Cursor is the last event sent.
	Cursor    string    `json:"cursor,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Version   int64     `json:"version"`
}
