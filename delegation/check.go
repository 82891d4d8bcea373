package delegation

import (
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// The checks and records every backend of Store shares, so that a
// dispatch one store refuses the other refuses too, and a child's end
// reads the same on both.

// CheckDispatch refuses, with Invalid, a dispatch no store may write: a
// delegation without id or conversation, or without children; a child
// without id or goal, of another delegation (its Delegation field), named
// twice, or not pending (a dispatch writes its children pending; an empty
// Status is taken as pending). Store.Create and the turn's commit
// (sessions.Finish.Writes) both call it before they write anything.
func CheckDispatch(op string, d Dispatch) error {
	g := d.Delegation
	switch {
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
	r.TaskIndex, r.SubagentID = c.Index, c.ID
	if r.Goal == "" {
		r.Goal = c.Goal
	}
	return r
}

// Reaped is the result Reap records for c, whose owner's claim ran out at
// now: StatusUnknown with UnknownError, and what its last progress said.
func Reaped(c Child, now time.Time) Result {
	r := Result{
		Status:       StatusUnknown,
		Error:        UnknownError,
		APICalls:     c.Progress.APICalls,
		InputTokens:  c.Progress.InputTokens,
		OutputTokens: c.Progress.OutputTokens,
	}
	if !c.StartedAt.IsZero() && now.After(c.StartedAt) {
		r.DurationSeconds = now.Sub(c.StartedAt).Seconds()
	}
	return Ended(c, r)
}
