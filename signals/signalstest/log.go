// Package signalstest holds an in-memory signal log for the tests of
// what sends and tails signals.
package signalstest

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// Log is an in-memory signal log (signals.Store) for the tests of
// what sends and tails signals. Cursors are positions in it.
type Log struct {
	clock clock.Clock

	mu  sync.Mutex
	log []signals.Signal
}

var _ signals.Store = (*Log)(nil)

// NewLog returns an empty log that stamps signals with clk's time.
func NewLog(clk clock.Clock) *Log { return &Log{clock: clk} }

// Signal appends s. Errors: Invalid (no conversation).
func (l *Log) Signal(_ context.Context, s signals.Signal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.Conv == "" {
		return errs.E("testkit.Log.Signal", errs.Invalid, "empty conversation")
	}
	s.Cursor = strconv.Itoa(len(l.log) + 1)
	s.At = l.clock.Now()
	l.log = append(l.log, s)
	return nil
}

// SignalsAfter reads as signals.Store says. Errors: Invalid (a cursor
// the log did not make).
func (l *Log) SignalsAfter(_ context.Context, after string, limit int) ([]signals.Signal, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after == "" {
		return nil, strconv.Itoa(len(l.log)), nil
	}
	from, err := strconv.Atoi(after)
	if err != nil || from < 0 || from > len(l.log) {
		return nil, "", errs.E("testkit.Log.SignalsAfter", errs.Invalid, "bad cursor %q", after)
	}
	end := min(len(l.log), from+limit)
	return slices.Clone(l.log[from:end]), strconv.Itoa(end), nil
}

// Sent returns every signal appended so far, oldest first.
func (l *Log) Sent() []signals.Signal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}
