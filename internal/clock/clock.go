// Package clock is the one time source herald reads. Every lease, retry,
// timeout and schedule takes a Clock so tests can move time by hand: a
// Fake's timers and tickers fire when the test advances it, not when the
// wall clock gets there.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and waits on it. Its timers and tickers follow
// package time as of Go 1.23: Stop and Reset need no draining, and no
// value from before them arrives after they return.
type Clock interface {
	Now() time.Time
	// NewTimer returns a Timer that sends the time on its channel once d
	// has passed; d <= 0 sends at once.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a Timer that calls f in its own goroutine once d
	// has passed; its channel is nil.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker returns a Ticker that sends the time every d; it panics
	// when d <= 0, as time.NewTicker does. A reader that falls behind
	// misses ticks rather than receiving a backlog.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer behind an interface, so a Fake can stand in for it.
type Timer interface {
	// C is the channel the time is sent on; nil for an AfterFunc timer.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether that kept it from firing.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether the
	// timer had been armed.
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker behind an interface, so a Fake can stand in for it.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	// Reset restarts the ticker, stopped or not, with period d.
	Reset(d time.Duration)
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

func (Real) Now() time.Time { return time.Now() }

func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }

// Sleep waits d on the wall clock, or less when ctx ends first; it
// reports whether d passed. Retries and polls wait with it, so that
// whatever waits stops as soon as its context ends.
func Sleep(ctx context.Context, d time.Duration) bool { return SleepOn(ctx, Real{}, d) }

// SleepOn is Sleep on c's time, so a wait under a Fake ends when the test
// advances the Fake past d.
func SleepOn(ctx context.Context, c Clock, d time.Duration) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
