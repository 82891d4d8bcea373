package delegation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// The checks and records every backend of Store shares, so that a
// dispatch one store refuses the other refuses too, and a child's end
// reads the same on both.

// CheckDispatch refuses, with Invalid, a dispatch no store may write: a
// delegation without id or conversation, or without children; a child
// without id or goal, of another delegation (its Delegation field), named
// twice, or not pending (a dispatch writes its children pending; an empty
// Status is taken as pending). Store.Create and the turn's commit
// (sessions.Finish.Writes) both call it before they write anything. A
// dispatch of an orchestrator's workers (Delegation.Orchestrator) is
// Store.Start's only (CheckStart).
func CheckDispatch(op string, d Dispatch) error {
	if d.Delegation.Orchestrator != "" {
		return errs.E(op, errs.Invalid, "delegation %q is an orchestrator's workers, which Start writes", d.Delegation.ID)
	}
	return checkDispatch(op, d)
}

// CheckStart refuses, with Invalid, the arguments of a Start: a dispatch
// CheckDispatch refuses, one that names no orchestrator, or a claim
// without owner or ttl.
func CheckStart(op string, d Dispatch, owner string, ttl time.Duration) error {
	switch {
	case d.Delegation.Orchestrator == "":
		return errs.E(op, errs.Invalid, "delegation %q names no orchestrator", d.Delegation.ID)
	case owner == "":
		return errs.E(op, errs.Invalid, "start of delegation %q without an owner", d.Delegation.ID)
	case ttl <= 0:
		return errs.E(op, errs.Invalid, "start of delegation %q with a claim of %v, want more than 0", d.Delegation.ID, ttl)
	}
	return checkDispatch(op, d)
}

func checkDispatch(op string, d Dispatch) error {
	g := d.Delegation
	switch {
	case d.Limit < 0:
		return errs.E(op, errs.Invalid, "delegation %q with a limit of %d children, want 0 (none) or more", g.ID, d.Limit)
	case g.ID == "":
		return errs.E(op, errs.Invalid, "delegation without an id")
	case g.Conv == "":
		return errs.E(op, errs.Invalid, "delegation %q without a conversation", g.ID)
	case len(g.Children) == 0:
		return errs.E(op, errs.Invalid, "delegation %q without children", g.ID)
	}
	seen := make(map[string]bool, len(g.Children))
	for i, c := range g.Children {
		switch {
		case c.ID == "":
			return errs.E(op, errs.Invalid, "child %d of delegation %q without an id", i, g.ID)
		case c.Goal == "":
			return errs.E(op, errs.Invalid, "child %q of delegation %q without a goal", c.ID, g.ID)
		case c.Delegation != g.ID:
			return errs.E(op, errs.Invalid, "child %q names delegation %q, not %q", c.ID, c.Delegation, g.ID)
		case seen[c.ID]:
			return errs.E(op, errs.Invalid, "child %q named twice in delegation %q", c.ID, g.ID)
		case c.Status != "" && c.Status != StatusPending:
			return errs.E(op, errs.Invalid, "child %q is dispatched %s, not pending", c.ID, c.Status)
		}
		seen[c.ID] = true
	}
	return nil
}

// CheckClaim refuses, with Invalid, the arguments of a Claim (n children
// for owner for ttl) or, with n 1, of a ClaimCompletions.
func CheckClaim(op, owner string, n int, ttl time.Duration) error {
	switch {
	case n < 1:
		return errs.E(op, errs.Invalid, "claim of %d, want at least 1", n)
	case owner == "":
		return errs.E(op, errs.Invalid, "claim without an owner")
	case ttl <= 0:
		return errs.E(op, errs.Invalid, "claim ttl %v, want more than 0", ttl)
	}
	return nil
}

// CheckEnd refuses, with Invalid, an End or a StopPending whose result
// has a status that is not terminal.
func CheckEnd(op string, r Result) error {
	if !r.Status.Terminal() {
		return errs.E(op, errs.Invalid, "end with status %q, which is not terminal", r.Status)
	}
	return nil
}

// Pending is c as a dispatch writes it: what it is asked to do, pending,
// with nothing of a run.
func Pending(c Child) Child {
	return Child{ID: c.ID, Delegation: c.Delegation, Index: c.Index, Task: c.Task, Status: StatusPending}
}

// Ended is the result End and StopPending record for c: r, with the
// child's index and id (which CompletionFor orders and names the results
// by) and, when r has none, its goal.
func Ended(c Child, r Result) Result {
	r.TaskIndex, r.ChildID = c.Index, c.ID
	if r.Goal == "" {
		r.Goal = c.Goal
	}
	return r
}

// MaxSteers bounds the steers a child takes in its run (Store.Steer).
const MaxSteers = 32

// CheckSteer refuses a steer of c, as Store.Steer does: Conflict when c
// is not running, TooLarge when it has MaxSteers.
func CheckSteer(op string, c Child) error {
	switch {
	case c.Status != StatusRunning:
		return errs.E(op, errs.Conflict, "child %q is %s, not running", c.ID, c.Status)
	case len(c.Steers) >= MaxSteers:
		return errs.E(op, errs.TooLarge, "child %q has %d steers, the most it takes", c.ID, MaxSteers)
	}
	return nil
}

// CheckSteers refuses, with Conflict, an End of c whose result counts
// fewer steers than c has recorded: one arrived as it finished, and its
// result must say it did not land (Unlanded). Backends call it in the
// step that records the end.
func CheckSteers(op string, c Child, r Result) error {
	if len(c.Steers) > r.Steers {
		return errs.E(op, errs.Conflict, "child %q has %d steers recorded and its result counts %d: add the rest as not landed", c.ID, len(c.Steers), r.Steers)
	}
	return nil
}

// Unlanded is r with the steers of c it does not count (those after its
// first r.Steers) added as not landed: in PendingSteer, and in a note at
// the end of its summary.
func Unlanded(c Child, r Result) Result {
	if len(c.Steers) <= r.Steers {
		return r
	}
	r = notLanded(r, c.Steers[r.Steers:])
	r.Steers = len(c.Steers)
	return r
}

// notLanded is r with left, steers that never reached the child, said:
// in PendingSteer, and in a note at the end of its summary.
func notLanded(r Result, left []string) Result {
	if len(left) == 0 {
		return r
	}
	text := strings.Join(left, "\n")
	if r.PendingSteer != "" {
		r.PendingSteer += "\n"
	}
	r.PendingSteer += text
	r.Summary = strings.TrimSpace(r.Summary + "\n\n(A steer arrived after this sub-agent's last tool result and did not land: " + text + ")")
	return r
}

// Reaped is the result Reap records for c, whose owner's claim ran out at
// now: StatusUnknown with UnknownError, what its last progress said, and
// its recorded steers, none known to have landed.
func Reaped(c Child, now time.Time) Result {
	r := Result{
		Status:       StatusUnknown,
		Error:        UnknownError,
		APICalls:     c.Progress.APICalls,
		InputTokens:  c.Progress.InputTokens,
		OutputTokens: c.Progress.OutputTokens,
		Model:        c.Progress.Model,
	}
	if !c.StartedAt.IsZero() && now.After(c.StartedAt) {
		r.DurationSeconds = now.Sub(c.StartedAt).Seconds()
	}
	return Ended(c, Unlanded(c, r))
}

// Full is a dispatch refused for want of room: its conversation had
// Running children pending or running, the limit is Limit
// (delegation.max_concurrent_children), and it asked for Want more.
// Store.Create returns it inside a Conflict (FullOf finds it).
type Full struct {
	Conv                 string
	Running, Limit, Want int
}

// Free is how many more children the conversation had room for.
func (f *Full) Free() int { return max(f.Limit-f.Running, 0) }

func (f *Full) Error() string {
	return fmt.Sprintf("conversation %s has %d sub-agents pending or running and the limit is %d (delegation.max_concurrent_children): %d free, %d asked for; nothing was started",
		f.Conv, f.Running, f.Limit, f.Free(), f.Want)
}

// Fits reports whether d's children fit beside running others of its
// conversation, and when they do not, the refusal (a Conflict holding a
// *Full). Backends call it in the step that writes the dispatch.
func Fits(op string, d Dispatch, running int) error {
	want := len(d.Delegation.Children)
	if d.Limit <= 0 || running+want <= d.Limit {
		return nil
	}
	f := &Full{Conv: d.Delegation.Conv, Running: running, Limit: d.Limit, Want: want}
	return &errs.Error{Op: op, Code: errs.Conflict, Msg: f.Error(), Err: f}
}

// FullOf is the *Full inside err, when err is a refusal for want of room.
func FullOf(err error) (*Full, bool) {
	var f *Full
	ok := errors.As(err, &f)
	return f, ok
}

// Rejected is the result a turn's commit records for child c of a
// dispatch that did not fit under limit: StatusRejected, and free, the
// places left, when given (a backend that cannot build the result in the
// step adds free_slots to its encoding there).
func Rejected(c Child, limit int, free *int) Result {
	return Ended(c, Result{
		Status:     StatusRejected,
		ExitReason: "rejected",
		Error: fmt.Sprintf("not started: when the turn that dispatched it was saved, this conversation had no room for it (delegation.max_concurrent_children is %d); wait for results, then dispatch again",
			limit),
		FreeSlots: free,
	})
}

// ParentUsage is the write that adds r's tokens to the totals of conv,
// the parent conversation, on r's model (sessions.Usage, as /status
// reads them), and whether there are any. Backends apply it in the step
// that records a child's end (End, Reap), so a child's tokens count
// once in its parent's totals; not for a worker of an orchestrator
// (Delegation.Orchestrator), whose tokens its orchestrator's include.
func ParentUsage(conv string, r Result) (sessions.Usage, bool) {
	u := sessions.Usage{Conv: conv, Model: r.Model, Prompt: r.InputTokens, Completion: r.OutputTokens}
	return u, u.Prompt > 0 || u.Completion > 0
}
