package delegation

import (
	"context"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// StopCause is why a child is stopped, and so how it ends: its parent
// agent or its conversation interrupt it (StatusInterrupted), an
// operator cancels it (StatusCancelled, from the lifecycle API or
// herald delegations stop). A running child's context ends with it as
// its cause; its result says Why.
type StopCause struct {
	Status Status
	Why    string
}

func (c *StopCause) Error() string { return c.Why }

// Causes of a stop the package gives itself.
var (
	byParent       = StopCause{Status: StatusInterrupted, Why: "stopped by its parent agent"}
	byConversation = StopCause{Status: StatusInterrupted, Why: "stopped with the conversation (/stop or /new)"}
)

// Interrupted is the cause of a stop that interrupts a child: why, in
// its result.
func Interrupted(why string) StopCause { return StopCause{Status: StatusInterrupted, Why: why} }

// Cancelled is the cause of an operator's cancel: why ("cancelled from
// the API", "cancelled by the operator"), in its result.
func Cancelled(why string) StopCause { return StopCause{Status: StatusCancelled, Why: why} }

// signal is the delegation signal that brings cause to child id of
// conv on the instance running it: delegation.cancel for a cancel,
// delegation.stop for an interruption, with why as its text.
func (c StopCause) signal(conv, id string) signals.Signal {
	kind := SignalStop
	if c.Status == StatusCancelled {
		kind = SignalCancel
	}
	return signals.Signal{Conv: conv, Kind: kind, Target: id, Text: c.Why}
}

// causeOf is the cause a delegation.stop or delegation.cancel signal
// carries (a stop from an instance that wrote no text is its parent's).
func causeOf(s signals.Signal) *StopCause {
	c := byParent
	if s.Kind == SignalCancel {
		c = Cancelled("cancelled")
	}
	if s.Text != "" {
		c.Why = s.Text
	}
	return &c
}

// Stopper stops children wherever they are: one pending (claimed by no
// instance yet) is ended at once in the store, one running here is
// stopped at once, and one running elsewhere gets the stop through the
// signals log.
type Stopper struct {
	Store   Store
	Signals signals.Store
	Runner  *Runner // this instance's, nil where none runs (the CLI)
}

// Stop stops child c of delegation d (its conversation scopes the
// signal) for cause, which its result says. It reports whether c was not
// terminal. Errors: Unavailable.
func (s Stopper) Stop(ctx context.Context, d Delegation, c Child, cause StopCause) (bool, error) {
	const op = "delegation.Stop"
	switch {
	case c.Status.Terminal():
		return false, nil
	case c.Status == StatusPending:
		r := Result{Status: cause.Status, ExitReason: string(cause.Status), Error: "interrupted before it started: " + cause.Why}
		if cause.Status == StatusCancelled {
			r.Error = cause.Why + " before it started"
		}
		stopped, comp, err := s.Store.StopPending(ctx, c.ID, r)
		if err != nil {
			return false, errs.Wrap(op, errs.Unavailable, err)
		}
		if stopped {
			if comp != nil && s.Runner != nil && s.Runner.opts.Ended != nil {
				s.Runner.opts.Ended()
			}
			return true, nil
		}
		// Claimed since it was read: it runs now, and the stop goes to
		// whoever runs it.
	}
	sig := cause.signal(d.Conv, c.ID)
	if s.Runner != nil && s.Runner.apply(sig) {
		return true, nil
	}
	if err := s.Signals.Signal(ctx, sig); err != nil {
		return false, errs.Wrap(op, errs.Unavailable, err)
	}
	return true, nil
}
