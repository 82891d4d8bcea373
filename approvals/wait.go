package approvals

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// register makes a wake-up channel for approval id, which Answer (in
// this process) and SignalDecided (from another) ring.
func (ap *Approver) register(id string) chan struct{} {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	ch := make(chan struct{}, 1)
	ap.waiting[id] = ch
	return ch
}

func (ap *Approver) unregister(id string) {
	ap.mu.Lock()
	delete(ap.waiting, id)
	ap.mu.Unlock()
}

// wake rings the channel of approval id, when a turn here waits on it.
func (ap *Approver) wake(id string) {
	ap.mu.Lock()
	ch := ap.waiting[id]
	ap.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Waiting reports how many turns of this process wait for an answer.
func (ap *Approver) Waiting() int {
	ap.mu.Lock()
	defer ap.mu.Unlock()
	return len(ap.waiting)
}

// HandleSignal wakes the turn waiting here on an approval another
// gateway decided.
func (ap *Approver) HandleSignal(s signals.Signal) {
	if s.Kind == SignalDecided {
		ap.wake(s.Target)
	}
}

// wait holds the turn until a is decided (here, by another gateway's
// signal, or as a re-read of the store finds it every Poll), its
// deadline passes (a Timeout) or ctx ends (Expired). The turn's lease
// is renewed by its worker all the while, as for any slow tool.
func (ap *Approver) wait(ctx context.Context, a Approval) error {
	const op = "approvals.wait"
	ap.mu.Lock()
	ch := ap.waiting[a.ID]
	ap.mu.Unlock()
	defer ap.unregister(a.ID)
	deadline := ap.opts.Clock.NewTimer(a.Deadline.Sub(ap.opts.Clock.Now()))
	defer deadline.Stop()
	poll := ap.opts.Clock.NewTicker(ap.opts.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			// The turn was stopped: its question can no longer be
			// answered. A restart runs the turn again and asks anew.
			end, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			ap.end(end, a.ID, Expired)
			cancel()
			return ctx.Err()
		case <-deadline.C():
			return ap.outcome(ap.end(ctx, a.ID, Timeout))
		case <-ch:
		case <-poll.C():
		}
		got, err := ap.opts.Store.Approval(ctx, a.ID)
		if err != nil {
			if errs.Is(err, errs.NotFound) {
				return errs.E(op, errs.Invalid, "%s", vanishedText)
			}
			ap.opts.Logger.Warn("reading a pending approval failed; reading it again", "approval", a.ID, "err", err)
			continue
		}
		if !got.Pending() {
			return ap.outcome(got)
		}
	}
}

// end decides approval id as herald (a timeout, an expiry) and says so
// in its chat; when a person decided it first, that is its outcome.
func (ap *Approver) end(ctx context.Context, id string, d Decision) Approval {
	a, err := ap.opts.Store.Decide(ctx, id, d, Herald, ap.opts.Clock.Now(), "")
	switch {
	case errs.Is(err, errs.Conflict):
		return a
	case err != nil:
		ap.opts.Logger.Warn("ending an approval failed", "approval", id, "decision", d, "err", err)
		a.ID, a.Decision = id, d
		return a
	}
	ap.settle(ctx, a, "")
	return a
}

// outcome is what the model reads of a decided approval: nil to run.
func (ap *Approver) outcome(a Approval) error {
	if a.Decision.Allows() {
		return nil
	}
	return errs.E("approvals.Ask", errs.Invalid, "%s", outcomeText(a, ap.opts.Timeout))
}
