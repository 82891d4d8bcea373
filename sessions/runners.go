package sessions

import (
	"context"
	"slices"
	"sync"
	"time"
)

// runners keeps the goroutines that ran turns, each parked for the next
// turn a while after its last, so that a turn mostly starts on a stack
// that earlier turns grew (a commit encodes the turn's messages, which
// takes a deep stack) instead of growing a new goroutine's stack anew.
// The most recently parked goroutine is given the next turn.
type runners struct {
	fn   func(*Turn)     // runs a turn
	done <-chan struct{} // parked goroutines end once it is closed
	max  int             // goroutines parked at most
	wait time.Duration   // how long a goroutine stays parked

	mu     sync.Mutex
	parked []chan *Turn
}

// runnerWait is how long a goroutine that ran a turn waits for another.
const runnerWait = 10 * time.Second

// maxParkedRunners bounds the goroutines kept: enough for a busy
// worker's turns to follow each other on warm stacks, few enough that a
// burst of turns does not leave its stacks behind.
const maxParkedRunners = 256

// newRunners runs turns with fn until ctx ends.
func newRunners(ctx context.Context, max int, fn func(*Turn)) *runners {
	return &runners{fn: fn, done: ctx.Done(), max: max, wait: runnerWait}
}

// run runs t on a parked goroutine, else on a new one.
func (r *runners) run(t *Turn) {
	r.mu.Lock()
	if n := len(r.parked); n > 0 {
		next := r.parked[n-1]
		r.parked = r.parked[:n-1]
		r.mu.Unlock()
		next <- t
		return
	}
	r.mu.Unlock()
	go r.loop(t)
}

// loop runs turns until none came within r.wait, or r.done is closed.
func (r *runners) loop(t *Turn) {
	// next is made once the goroutine first parks: a burst's turns wait
	// on the model without it.
	var next chan *Turn
	var timer *time.Timer
	for {
		r.fn(t)
		if next == nil {
			next = make(chan *Turn, 1)
		}
		if !r.park(next) {
			return
		}
		if timer == nil {
			timer = time.NewTimer(r.wait)
		} else {
			timer.Reset(r.wait)
		}
		select {
		case t = <-next:
			timer.Stop()
			continue
		case <-timer.C:
		case <-r.done:
			timer.Stop()
		}
		if r.unpark(next) {
			return
		}
		// Handed a turn as it gave up waiting: the turn is on its way.
		t = <-next
	}
}

// park puts next among the parked unless r has its fill or is done.
func (r *runners) park(next chan *Turn) bool {
	select {
	case <-r.done:
		return false
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parked) >= r.max {
		return false
	}
	r.parked = append(r.parked, next)
	return true
}

// unpark takes next out of the parked, reporting false when run had
// taken it already.
func (r *runners) unpark(next chan *Turn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.parked, next)
	if i < 0 {
		return false
	}
	r.parked = slices.Delete(r.parked, i, i+1)
	return true
}
