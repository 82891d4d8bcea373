package delivery

import (
	"errors"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// doubt is how long the worker neither claims nor takes handoffs after a
// store call that may have given it messages and whose outcome it does
// not know.
//
// The store gives a worker the messages behind those it holds (a claim
// takes them, a commit hands them over), trusting that the worker sends
// what it holds in order. A call that failed yet may have been carried
// out (its reply lost with a connection, a Redis primary killed before it
// answered, a WAIT that fell short) can leave messages held by the worker
// that it never saw; a claim or a handoff after it would get the messages
// behind them, to be sent first. So until every claim such a call could
// have made has run out, the worker claims nothing and commits enqueue
// their replies due; then the messages it never saw are due again, and
// its next claim takes them first, in order with those behind them.
type doubt struct {
	claimTTL time.Duration
	clock    clock.Clock

	mu    sync.Mutex
	until time.Time
}

// after takes the outcome of a call that may have given the worker
// messages: when it failed and may have been carried out all the same,
// the worker doubts what it holds until the call's claims ran out. It
// reports whether it began to doubt.
func (d *doubt) after(err error) bool {
	if !uncertain(err) {
		return false
	}
	until := d.clock.Now().Add(d.claimTTL + claimMargin)
	d.mu.Lock()
	defer d.mu.Unlock()
	began := !d.until.After(d.clock.Now())
	if until.After(d.until) {
		d.until = until
	}
	return began
}

// left is how long the doubt lasts from now; 0 when there is none.
func (d *doubt) left() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(0, d.until.Sub(d.clock.Now()))
}

// uncertain reports whether a store call that failed with err may have
// been carried out all the same: only errors that say the store refused
// it are certain.
func uncertain(err error) bool {
	if err == nil {
		return false
	}
	switch errs.CodeOf(err) {
	case errs.Invalid, errs.NotFound, errs.LeaseLost, errs.Conflict, errs.TooLarge, errs.Closed:
		return false
	}
	// A call the store tells as not run (its server refused it, or it
	// was never sent) took nothing.
	return !errors.Is(err, errs.ErrNotRun)
}
