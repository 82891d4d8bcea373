package kanban

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// EventStopAsked is a person's request to end a running card's worker
// (Service.Stop, Service.Reclaim): its Text is the reason.
const EventStopAsked = "stop_requested"

// SignalStop tells every instance's dispatcher that a card's worker is
// to be stopped (its Target names the card, its Text the instance that
// asks): the one that runs it reads the card's claim (Claim.Stop) now,
// not at its next heartbeat.
const SignalStop signals.Kind = "kanban.stop"

// DefaultStopReason is why a card was stopped when the person gave no
// reason.
const DefaultStopReason = "stopped by hand"

// DefaultReclaimReason is why a card was reclaimed when the person gave
// no reason.
const DefaultReclaimReason = "reclaimed by hand"

// StopSpec is a person's stop (Service.Stop) or reclaim
// (Service.Reclaim) of a running card's worker.
type StopSpec struct {
	Reason string
	Actor  string
	// Host is this machine: a worker process here is stopped here.
	Host string
	// Signals, when set, asks the worker's owner elsewhere to stop it;
	// Wait bounds how long the call waits for it, on Clock.
	Signals signals.Store
	// From names the instance that asks, for the signal (the actor when
	// empty).
	From  string
	Wait  time.Duration
	Clock clock.Clock
}

// Reclaim ends a running card's claim so that it runs again, counted as
// a failed run (reclaimed): its worker is stopped first as Stop does,
// and the claim is released (Claim.Stop's StopReclaim).
func (s *Service) Reclaim(ctx context.Context, id string, spec StopSpec) (Card, bool, error) {
	return s.stopWorker(ctx, "kanban.Reclaim", id, StopReclaim, cmp.Or(strings.TrimSpace(spec.Reason), DefaultReclaimReason), spec)
}

// Stop ends a running card's worker and blocks the card with the
// reason, no failure counted (Claim.Stop's StopBlock).
//
// Both Stop and Reclaim never let a card's old worker run beside a new
// one: the claim first says it is to stop (RequestStop, Claim.Stop),
// which keeps the card from any other claim; then a worker process on
// this host is ended here (its process group, confirmed gone), and a
// claim whose owner is gone (its process on this host, or its claim ran
// out) ends at once, as does a person's claim (no dispatcher's, no
// process); else its owner is asked over Signals (SignalStop) to stop
// its worker and end the claim itself, which the call waits up to Wait
// for. It reports whether the claim ended; false: the owner was asked
// and had not answered yet (its dispatcher stops the worker at its next
// heartbeat, or the claim runs out). Errors: NotFound, Invalid (not
// running), LeaseLost (the claim changed meanwhile).
func (s *Service) Stop(ctx context.Context, id string, spec StopSpec) (Card, bool, error) {
	return s.stopWorker(ctx, "kanban.Stop", id, StopBlock, cmp.Or(strings.TrimSpace(spec.Reason), DefaultStopReason), spec)
}

// stopWorker is Stop and Reclaim, then saying what becomes of the card.
func (s *Service) stopWorker(ctx context.Context, op, id string, then StopThen, reason string, spec StopSpec) (Card, bool, error) {
	if spec.Clock == nil {
		spec.Clock = clock.Real{}
	}
	k, err := s.askStop(ctx, op, id, StopRequest{Reason: reason, By: spec.Actor, Then: then})
	if err != nil {
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
		return s.awaitOwner(ctx, op, id, c.Token, spec, poll)
	}
	k, err = s.endStopped(ctx, id, c.Token, *c.Stop)
	if errs.Is(err, errs.LeaseLost) {
		// Its owner saw the worker end and ended the claim first.
		k, err = s.read(ctx, op, id)
		return k, err == nil, err
	}
	return k, err == nil, err
}

// RequestStop marks the claim of the running card id to be stopped with
// reason, then blocked, as actor: the dispatcher that runs its worker
// ends the worker (its process group), then blocks the card, once told
// (AnnounceStop) or at its next heartbeat. It returns the card as
// marked; a card marked before keeps its first request. Stop does this
// and the rest. Errors: NotFound, Invalid (not running).
func (s *Service) RequestStop(ctx context.Context, id, reason, actor string) (Card, error) {
	return s.askStop(ctx, "kanban.RequestStop", id, StopRequest{Reason: cmp.Or(strings.TrimSpace(reason), DefaultStopReason), By: actor, Then: StopBlock})
}

// askStop writes req on the running card's claim (Claim.Stop), with a
// stop_requested event; a claim that asks already keeps its request.
func (s *Service) askStop(ctx context.Context, op, id string, req StopRequest) (Card, error) {
	req.Reason = s.mask(req.Reason)
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		if k.Status != StatusRunning || k.Claim == nil {
			return change{}, errs.E(op, errs.Invalid, "%s is %s, not running: it has no worker to stop", k.ID, k.Status)
		}
		if k.Claim.Stop != nil {
			return change{card: k}, nil
		}
		from := k.Version
		cl := *k.Claim
		req.At = now
		cl.Stop = &req
		k.Claim, k.UpdatedAt = &cl, now
		return change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: from}},
			Events: []Event{{Board: k.Board, Card: k.ID, Kind: EventStopAsked, Run: cl.Run, Actor: req.By, Text: req.Reason, At: now,
				Data: map[string]any{"then": string(cmp.Or(req.Then, StopBlock))}}}}}, nil
	})
}

// AnnounceStop tells every instance's dispatcher, from the instance
// named from, that card's worker is to be stopped (its claim asks so).
func AnnounceStop(ctx context.Context, log signals.Store, card, from string) error {
	return log.Signal(ctx, signals.Signal{Conv: signalConv, Kind: SignalStop, Target: card, Text: from})
}

// awaitOwner asks the claim's owner to stop its worker, and waits up to
// spec.Wait for the claim to end.
func (s *Service) awaitOwner(ctx context.Context, op, id string, token int64, spec StopSpec, poll func(context.Context) error) (Card, bool, error) {
	if spec.Signals != nil {
		if err := AnnounceStop(ctx, spec.Signals, id, cmp.Or(spec.From, spec.Actor)); err != nil {
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

// endStopped ends the claim token of a card whose worker was stopped on
// req: released, reclaimed (StopReclaim), or the card blocked with the
// reason and person, no failure counted (StopBlock). Errors: those of
// Release and Block.
func (s *Service) endStopped(ctx context.Context, id string, token int64, req StopRequest) (Card, error) {
	if req.Then == StopReclaim {
		return s.Release(ctx, id, token, Ending{Outcome: OutcomeReclaimed, Reason: req.Reason})
	}
	return s.Block(ctx, id, token, BlockNeedsInput, req.Reason, cmp.Or(req.By, "herald"))
}

// stopSignalled stops the worker of card here when its claim asks so
// (SignalStop).
func (d *Dispatcher) stopSignalled(card string) {
	d.mu.Lock()
	r := d.running[card]
	d.mu.Unlock()
	if r == nil {
		return
	}
	k, err := d.svc.Store.Card(context.Background(), card)
	if err != nil || k.Claim == nil || k.Claim.Stop == nil {
		return
	}
	d.stopAsked(card, k.Claim.Token, *k.Claim.Stop)
}

// stopAsked stops the worker of card running here under token, when it
// is the one a stop request names: watch then ends the claim as the
// request says (endStopped).
func (d *Dispatcher) stopAsked(card string, token int64, req StopRequest) {
	d.mu.Lock()
	r := d.running[card]
	d.mu.Unlock()
	if r == nil || r.token != token {
		return
	}
	r.mu.Lock()
	first := r.stopped == ""
	if first {
		r.stopped, r.asked = "stopped on request: "+req.Reason, &req
	}
	r.mu.Unlock()
	if first {
		go func() { _ = r.worker.Stop(context.Background()) }()
	}
}

// askedStop is the stop request r was stopped for, if it was.
func (r *running) askedStop() *StopRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
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
