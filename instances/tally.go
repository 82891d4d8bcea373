package instances

import "sync/atomic"

// Tally counts what this process does, in memory, for its heartbeat to
// record: each count only grows, and a change wakes the heartbeat. The
// zero Tally is not ready; use NewTally. Its methods may be called on a
// nil Tally, which counts nothing.
type Tally struct {
	turns, turnErrors, modelErrors, sent, sendFailed atomic.Int64
	changed                                          chan struct{}
}

// NewTally returns a Tally at zero.
func NewTally() *Tally { return &Tally{changed: make(chan struct{}, 1)} }

// Turn counts a turn that ran to its end.
func (t *Tally) Turn() { t.add(func(t *Tally) *atomic.Int64 { return &t.turns }) }

// TurnError counts a turn that could not run or commit.
func (t *Tally) TurnError() { t.add(func(t *Tally) *atomic.Int64 { return &t.turnErrors }) }

// ModelError counts a model call that failed.
func (t *Tally) ModelError() { t.add(func(t *Tally) *atomic.Int64 { return &t.modelErrors }) }

// Sent counts an outbox message a platform accepted.
func (t *Tally) Sent() { t.add(func(t *Tally) *atomic.Int64 { return &t.sent }) }

// SendFailed counts a send a platform refused or that did not reach it.
func (t *Tally) SendFailed() { t.add(func(t *Tally) *atomic.Int64 { return &t.sendFailed }) }

func (t *Tally) add(field func(*Tally) *atomic.Int64) {
	if t == nil {
		return
	}
	field(t).Add(1)
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Counts is everything counted so far.
func (t *Tally) Counts() Counts {
	if t == nil {
		return Counts{}
	}
	return Counts{
		Turns:       t.turns.Load(),
		TurnErrors:  t.turnErrors.Load(),
		ModelErrors: t.modelErrors.Load(),
		Sent:        t.sent.Load(),
		SendFailed:  t.sendFailed.Load(),
	}
}

// Changed receives once after any count changed since it last did.
func (t *Tally) Changed() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.changed
}
