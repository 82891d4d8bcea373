package clock

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Fake is a clock that only moves when told to. Its timers and tickers
// fire when Advance or Set moves it to or past their deadlines, so a test
// of a timeout runs in no time and the same way every run. A test waits
// for the code under test to arm its timer with BlockUntil, never by
// sleeping. It is safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
	// armed holds the timers that have yet to fire and the tickers not
	// stopped: what Advance looks through, and what Waiters counts.
	armed []*waiter
	seq   uint64 // arming order, which breaks ties between equal deadlines
	// armedCh is closed, and left for the next BlockUntil to remake, each
	// time a waiter is armed, so that BlockUntil can wait without polling.
	armedCh chan struct{}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires what falls due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moveTo(f.now.Add(d))
}

// Set moves the clock to t and fires what falls due. Moving it back fires
// nothing, and leaves every deadline where it was.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moveTo(t)
}

// Waiters reports how many timers are armed and tickers running.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// BlockUntil returns once at least n timers are armed or tickers
// running, so that a test advances only after the goroutine it drives
// has started to wait. When ctx ends first it returns ctx's error,
// wrapped with the Unavailable code.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.armed) >= n {
			f.mu.Unlock()
			return nil
		}
		if f.armedCh == nil {
			f.armedCh = make(chan struct{})
		}
		ch := f.armedCh
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return errs.Wrap("clock.Fake.BlockUntil", errs.Unavailable, ctx.Err())
		}
	}
}

func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &waiter{clk: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start(w, d)
	return fakeTimer{w}
}

func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	w := &waiter{clk: f, fn: fn}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start(w, d)
	return fakeTimer{w}
}

func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for Fake.NewTicker")
	}
	w := &waiter{clk: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start(w, d)
	return fakeTicker{w}
}

// waiter is a Fake's timer or ticker. Its fields other than clk, c and fn
// are guarded by clk.mu.
type waiter struct {
	clk    *Fake
	c      chan time.Time // nil for an AfterFunc timer
	fn     func()         // nil unless an AfterFunc timer
	period time.Duration  // > 0 for a ticker
	when   time.Time
	seq    uint64
	armed  bool
}

func (w *waiter) C() <-chan time.Time { return w.c }

// start arms w to fire after d, or fires it now when d <= 0: a zero
// timeout has passed already, and waiting for the next Advance would
// leave code that arms one and then waits on it hung.
func (f *Fake) start(w *waiter, d time.Duration) {
	if d <= 0 {
		f.fire(w, f.now)
		return
	}
	w.when = f.now.Add(d)
	w.seq = f.seq
	f.seq++
	w.armed = true
	f.armed = append(f.armed, w)
	if f.armedCh != nil {
		close(f.armedCh)
		f.armedCh = nil
	}
}

// moveTo sets the time to now and fires, earliest first, every waiter
// due by then.
func (f *Fake) moveTo(now time.Time) {
	f.now = now
	var due []*waiter
	for _, w := range f.armed {
		if !w.when.After(now) {
			due = append(due, w)
		}
	}
	slices.SortFunc(due, func(a, b *waiter) int {
		return cmp.Or(a.when.Compare(b.when), cmp.Compare(a.seq, b.seq))
	})
	for _, w := range due {
		at := w.when
		if w.period > 0 {
			// A ticker overdue by several periods ticks once, as a real one
			// drops the ticks its reader could not have read; its next tick
			// keeps its phase, as the runtime's does.
			w.when = w.when.Add(w.period * (now.Sub(w.when)/w.period + 1))
		} else {
			f.disarm(w)
		}
		f.fire(w, at)
	}
}

// fire sends at on w's channel, dropping it when a value is unread there
// already, or starts w's func. Neither blocks nor calls into the caller's
// code, so it is safe under f.mu.
func (f *Fake) fire(w *waiter, at time.Time) {
	if w.fn != nil {
		go w.fn()
		return
	}
	select {
	case w.c <- at:
	default:
	}
}

func (f *Fake) disarm(w *waiter) {
	w.armed = false
	f.armed = slices.DeleteFunc(f.armed, func(o *waiter) bool { return o == w })
}

// stop disarms w and discards a value unread on its channel, so that, as
// with a Go 1.23 timer, nothing from before a Stop or Reset arrives after
// it. It reports whether w was armed, counting a value discarded as not
// yet fired, as Go 1.23 does.
func (f *Fake) stop(w *waiter) bool {
	was := w.armed
	if was {
		f.disarm(w)
	}
	if w.c != nil {
		select {
		case <-w.c:
			was = true
		default:
		}
	}
	return was
}

type fakeTimer struct{ *waiter }

func (t fakeTimer) Stop() bool {
	f := t.clk
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stop(t.waiter)
}

func (t fakeTimer) Reset(d time.Duration) bool {
	f := t.clk
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.stop(t.waiter)
	f.start(t.waiter, d)
	return was
}

type fakeTicker struct{ *waiter }

func (t fakeTicker) Stop() {
	f := t.clk
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stop(t.waiter)
}

func (t fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Fake ticker's Reset")
	}
	f := t.clk
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stop(t.waiter)
	t.period = d
	f.start(t.waiter, d)
}
