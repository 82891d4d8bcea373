package delegation

import (
	"context"
	"time"

	"github.com/heraldgw/herald/lease"
)

// Claim is an instance's fenced hold on a running child (lease.Claim,
// Name the child's id): every write made under it (Renew, End) checks
// its token, so an instance whose claim ran out and whose child was
// declared unknown can write nothing more.
type Claim = lease.Claim

// CompletionClaim is a deliverer's hold on a pending completion.
type CompletionClaim struct {
	Completion Completion
	Worker     string
	Token      int64
	Expires    time.Time // by the store's clock
}

// Query selects delegations for List.
type Query struct {
	Conv  string // only this conversation's; "" for every one
	Limit int    // at most this many, newest first; 0 means 50
	// Active keeps only delegations with a child not terminal.
	Active bool
}

// Store keeps delegations, their children and their completions. Every
// method may return errs.Closed after Close and errs.Unavailable when
// the backend cannot be reached; methods taking a Claim return
// errs.LeaseLost when it is no longer the child's current one, and then
// have written nothing. Times are the store's clock.
type Store interface {
	// Create writes a dispatch made outside a turn (/background,
	// /review, the HTTP API): the delegation and its children, pending.
	// A dispatch made in a turn is the same write carried by the turn's
	// commit (sessions.Finish.Writes). Errors: Invalid (no id, no
	// conversation, no children, a child without id or goal), Conflict
	// (the id exists).
	Create(ctx context.Context, d Dispatch) error

	// Start writes the dispatch of an orchestrator's workers
	// (d.Delegation.Orchestrator set), which run inside its run on this
	// instance: as Create does, counted under d.Limit beside the
	// conversation's other children, but with every child running at
	// once, claimed for owner for ttl, and its claims returned in
	// dispatch order. Their ends make no completion (CompletionFor) and
	// add no tokens to the conversation (ParentUsage). Errors: as
	// Create's, and Invalid (no orchestrator, empty owner, ttl ≤ 0).
	Start(ctx context.Context, d Dispatch, owner string, ttl time.Duration) ([]Claim, error)

	// Claim takes up to n pending children, oldest dispatch first, for
	// owner for ttl: each becomes running with a fresh claim (its token
	// above every earlier one) and StartedAt set. It returns none when
	// none is pending. Errors: Invalid (n < 1, empty owner, ttl ≤ 0).
	Claim(ctx context.Context, owner string, n int, ttl time.Duration) ([]Child, []Claim, error)

	// Renew extends each claim to ttl from now and records its child's
	// progress (progress[claim.Name], when given). It returns the
	// claims still held, renewed; a claim not current any more is left
	// out (not an error): its child is someone else's, or ended.
	Renew(ctx context.Context, claims []Claim, ttl time.Duration, progress map[string]Progress) ([]Claim, error)

	// End records the child's result under its claim: status r.Status
	// (terminal), the result, EndedAt; and, when the child is the last
	// of its unit to end (CompletionFor), the unit's completion, pending
	// delivery, in the same step. It returns that completion, or nil.
	// Errors: LeaseLost, Invalid (a status that is not terminal),
	// Conflict (the child has more steers recorded than r.Steers counts,
	// CheckSteers: read it, add the rest with Unlanded, and end again).
	End(ctx context.Context, c Claim, r Result) (*Completion, error)

	// Steer records text as a steer of child id while it runs (appended
	// to its Steers), whichever instance runs it: the instance that runs
	// it is told through the signals log, and the child's End is checked
	// against the record, so a steer that arrives as the child finishes
	// is said in its result, never lost. Errors: NotFound (no such
	// child), Conflict (it is not running: not started yet, or ended),
	// TooLarge (it has MaxSteers steers).
	Steer(ctx context.Context, id, text string) error

	// StopPending ends child id as StatusInterrupted with r (its Error says
	// why) when it is still pending — no instance has claimed it — and
	// makes its unit's completion when it is the last of the unit, in one
	// atomic step, as End does. It reports whether it was pending; a child
	// that runs or has ended is left as it is (false, nil). Errors:
	// NotFound (no such child), Invalid (r's status not terminal).
	//
	// A stop is otherwise a signal only a running child's runner hears; a
	// pending child has no runner, so without this it would start later
	// and run anyway. The store records r's status as given (a stop gives
	// StatusInterrupted), and Claim never hands the child out afterwards.
	StopPending(ctx context.Context, id string, r Result) (stopped bool, c *Completion, err error)

	// Reap ends as StatusUnknown (error UnknownError) up to limit
	// running children whose claim ran out, and makes the completions
	// their ends complete, each in its own atomic step, so of several
	// instances reaping at once each child is ended once. It returns the
	// children it ended.
	Reap(ctx context.Context, limit int) ([]Child, error)

	// ClaimCompletions takes up to n pending completions that are due
	// (not claimed, or their claim ran out; past their retry time), for
	// worker for ttl, oldest first.
	ClaimCompletions(ctx context.Context, worker string, n int, ttl time.Duration) ([]CompletionClaim, error)

	// AckCompletion marks a claimed completion delivered. Errors:
	// LeaseLost (the claim is not current: another deliverer has it, or
	// it was delivered).
	AckCompletion(ctx context.Context, c CompletionClaim) error

	// RetryCompletion gives a claimed completion back, due after after,
	// with reason as its last error and its attempts counted. A
	// completion is never given up on. Errors: LeaseLost.
	RetryCompletion(ctx context.Context, c CompletionClaim, after time.Duration, reason string) error

	// Delegation returns one delegation with its children, by index.
	// Errors: NotFound.
	Delegation(ctx context.Context, id string) (Delegation, error)

	// Child returns one child. Errors: NotFound.
	Child(ctx context.Context, id string) (Child, error)

	// List returns delegations with their children, newest first.
	List(ctx context.Context, q Query) ([]Delegation, error)

	// Completions returns a delegation's completions, delivered or not.
	Completions(ctx context.Context, delegation string) ([]Completion, error)

	// Active counts conv's children that are pending or running.
	Active(ctx context.Context, conv string) (int, error)
}
