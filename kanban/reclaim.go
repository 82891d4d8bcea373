package kanban

import (
	"context"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// SignalStop asks every instance's dispatcher to stop the worker of the
// card its Text names, when it runs it and the card's claim asks so
// (Claim.Stop).
const SignalStop sessions.SignalKind = "kanban.stop"

// ReclaimSpec is a person's reclaim of a running card.
type ReclaimSpec struct {
	Reason string
	Actor  string
	// Host is this machine: a worker process here is stopped here.
	Host string
	// Signals, when set, asks the worker's owner elsewhere to stop it;
	// Wait bounds how long Reclaim waits for it, on Clock.
	Signals sessions.Signals
	Wait    time.Duration
	Clock   clock.Clock
}

// Reclaim ends a running card's claim so that it runs again, counted as
// a failed run (reclaimed), and never while its old worker may still
// run: the claim first says it is to stop (Claim.Stop), which keeps the
// card from any other claim; then a worker process on this host is
// ended here (its process group, confirmed gone), and a claim whose
// owner is gone (its process on this host, or its claim ran out) is
// released at once, as is a person's claim (no dispatcher's, no
// process); else its owner is asked over Signals and stops its
// worker and releases the claim itself, which Reclaim waits up to Wait
// for. It reports whether the claim was released; false: the owner was
// asked and had not answered yet (its dispatcher stops the worker at
// its next heartbeat, or the claim runs out). Errors: NotFound, Invalid
// (not running), LeaseLost (the claim changed meanwhile).
func (s *Service) Reclaim(ctx context.Context, id string, spec ReclaimSpec) (Card, bool, error) {
	const op = "kanban.Reclaim"
	spec.Reason = strings.TrimSpace(spec.Reason)
	if spec.Reason == "" {
		spec.Reason = "reclaimed by hand"
	}
	if spec.Clock == nil {
		spec.Clock = clock.Real{}
	}
	k, err := s.read(ctx, op, id)
	if err != nil {
		return Card{}, false, err
	}
	if k.Status != StatusRunning || k.Claim == nil {
		return k, false, errs.E(op, errs.Invalid, "%s is %s, not running: there is no claim to reclaim", k.ID, k.Status)
	}
	token := k.Claim.Token
	if k, err = s.askStop(ctx, op, id, token, spec.Reason); err != nil {
		return k, false, err
	}
	c := *k.Claim
	now, err := s.Store.Now(ctx)
	if err != nil {
		return k, false, err
	}
	ownerGone, _ := ClaimGone(c, spec.Host)
	local := c.Host == spec.Host && c.Host != "" && c.PID > 0
	poll := func(ctx context.Context) error { return sleep(ctx, spec.Clock, 50*time.Millisecond) }
	switch {
	case local:
		if err := StopOrphan(ctx, c.PID, c.ProcStart, poll); err != nil {
			return k, false, err
		}
	case ownerGone || now.After(c.Expires) || c.Host == "":
		// Nothing renews it, or it is a person's claim (`herald kanban
		// claim`) with no process of herald's to stop: its worker finds
		// it gone at its next report.
	default:
		return s.awaitOwner(ctx, op, id, token, spec, poll)
	}
	k, err = s.Release(ctx, id, token, Ending{Outcome: OutcomeReclaimed, Reason: spec.Reason})
	if errs.Is(err, errs.LeaseLost) {
		// Its owner saw the worker end and released it first.
		k, err = s.read(ctx, op, id)
		return k, err == nil, err
	}
	return k, err == nil, err
}

// askStop writes on the card's claim token that its worker is to stop.
func (s *Service) askStop(ctx context.Context, op, id string, token int64, reason string) (Card, error) {
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return change{}, err
		}
		if k.Claim.Stop != "" {
			return change{card: k}, nil
		}
		from := k.Version
		cl := *k.Claim
		cl.Stop = reason
		k.Claim, k.UpdatedAt = &cl, now
		return change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: from}}}}, nil
	})
}

// awaitOwner asks the claim's owner to stop its worker, and waits up to
// spec.Wait for the claim to end.
func (s *Service) awaitOwner(ctx context.Context, op, id string, token int64, spec ReclaimSpec, poll func(context.Context) error) (Card, bool, error) {
	if spec.Signals != nil {
		if err := spec.Signals.Signal(ctx, sessions.Signal{Conv: signalConv, Kind: SignalStop, Text: id}); err != nil {
			return Card{}, false, err
		}
	}
	deadline := spec.Clock.Now().Add(spec.Wait)
	for {
		k, err := s.read(ctx, op, id)
		if err != nil || k.Claim == nil || k.Claim.Token != token {
			return k, err == nil, err
		}
		if !spec.Clock.Now().Before(deadline) {
			return k, false, nil
		}
		if err := poll(ctx); err != nil {
			return k, false, err
		}
	}
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
