package delegation

import (
	"context"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Stopper stops children wherever they are: one pending (claimed by no
// instance yet) is ended at once in the store, one running here is
// stopped at once, and one running elsewhere gets the stop through the
// signals log.
type Stopper struct {
	Store   Store
	Signals sessions.Signals
	Runner  *Runner // this instance's, nil where none runs (the CLI)
}

// Stop stops child c of delegation d (its conversation scopes the
// signal), saying why in the result of a child that had not started.
// It reports whether c was not terminal. Errors: Unavailable.
func (s Stopper) Stop(ctx context.Context, d Delegation, c Child, why string) (bool, error) {
	const op = "delegation.Stop"
	switch {
	case c.Status.Terminal():
		return false, nil
	case c.Status == StatusPending:
		stopped, comp, err := s.Store.StopPending(ctx, c.ID, Result{Status: StatusInterrupted, ExitReason: "interrupted", Error: "interrupted before it started: " + why})
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
	sig := sessions.Signal{Conv: d.Conv, Kind: SignalStop, Target: c.ID}
	if s.Runner != nil && s.Runner.apply(sig) {
		return true, nil
	}
	if err := s.Signals.Signal(ctx, sig); err != nil {
		return false, errs.Wrap(op, errs.Unavailable, err)
	}
	return true, nil
}
