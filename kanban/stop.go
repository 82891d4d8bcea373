package kanban

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// EventStopAsked is a person's request to end a running card's worker
// and block the card (RequestStop).
const EventStopAsked = "stop_requested"

// SignalStop tells every instance's dispatcher that a card's worker is
// to be stopped (its Target names the card): the one that runs it looks
// at the card's claim now, not at its next heartbeat.
const SignalStop sessions.SignalKind = "kanban.stop"

// DefaultStopReason is why a card was stopped when the person gave no
// reason.
const DefaultStopReason = "stopped by hand"

// RequestStop marks the claim of the running card id to be stopped with
// reason: the dispatcher that runs its worker ends the worker (its
// process group), then blocks the card with the reason, as actor. It
// returns the card as marked; a card marked before keeps its first
// request. Errors: NotFound, Invalid (not running).
func (s *Service) RequestStop(ctx context.Context, id, reason, actor string) (Card, error) {
	const op = "kanban.RequestStop"
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = DefaultStopReason
	}
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
		cl.Stop = &StopRequest{Reason: reason, By: actor, At: now}
		k.Claim, k.UpdatedAt = &cl, now
		return change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: from}},
			Events: []Event{{Board: k.Board, Card: k.ID, Kind: EventStopAsked, Run: cl.Run, Actor: actor, Text: reason, At: now}}}}, nil
	})
}

// AnnounceStop tells every instance's dispatcher, from the instance
// named from, that card's worker is to be stopped (RequestStop marked
// it).
func AnnounceStop(ctx context.Context, signals sessions.Signals, card, from string) error {
	return signals.Signal(ctx, sessions.Signal{Conv: signalConv, Kind: SignalStop, Target: card, Text: from})
}

// BlockStopped blocks a card whose worker was stopped on request, under
// its claim's token, with the request's reason and person: how a stop
// ends. Errors: those of Block.
func (s *Service) BlockStopped(ctx context.Context, id string, token int64, stop StopRequest) (Card, error) {
	return s.Block(ctx, id, token, BlockNeedsInput, stop.Reason, cmp.Or(stop.By, "herald"))
}

// stopAsked stops the worker of card running here under token, when it
// is the one a stop request names: watch then blocks the card.
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
