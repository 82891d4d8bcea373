package sessions

import (
	"sync"
	"time"
)

// turnDeadline is one turn's deadline in a worker's turnTimers, its
// lease's next renewal: when it is due, since the timers' epoch.
type turnDeadline struct {
	when time.Duration
	at   *activeTurn
}

// turnTimers runs the deadlines of a worker's turns, each turn's lease
// renewal, from one runtime timer: a turn waiting on the model holds a
// place in a heap, not a runtime timer and its callback. Deadlines are
// read on the wall clock's monotonic reading. A renewal that falls due
// runs on a goroutine of its own (it waits on the store). The zero value
// is ready.
type turnTimers struct {
	mu    sync.Mutex
	epoch time.Time
	heap  []turnDeadline // by when, earliest first
	timer *time.Timer    // calls fire; made on first use
	armed bool           // timer is set to fire at armedAt
	// armedAt is when timer fires, since epoch, while armed.
	armedAt time.Duration
}

// add makes the turn's renewal due after d. The turn must not have one
// queued.
func (tt *turnTimers) add(at *activeTurn, d time.Duration) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.epoch.IsZero() {
		tt.epoch = time.Now()
	}
	now := time.Since(tt.epoch)
	when := now + d
	tt.heap = append(tt.heap, turnDeadline{when: when, at: at})
	i := len(tt.heap) - 1
	at.due = int32(i) + 1
	tt.up(i)
	if !tt.armed || when < tt.armedAt {
		tt.arm(when, now)
	}
}

// remove takes the turn's renewal out, and reports whether it
// was queued: false once it fell due (its callback has it) or when none
// was added.
func (tt *turnTimers) remove(at *activeTurn) bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	i := int(at.due) - 1
	if i < 0 {
		return false
	}
	tt.removeAt(i)
	if len(tt.heap) == 0 && tt.armed {
		tt.timer.Stop()
		tt.armed = false
	}
	return true
}

// fire runs the deadlines due, then sets the timer for the next.
func (tt *turnTimers) fire() {
	tt.mu.Lock()
	tt.armed = false
	now := time.Since(tt.epoch)
	for len(tt.heap) > 0 && tt.heap[0].when <= now {
		d := tt.heap[0]
		tt.removeAt(0)
		tt.mu.Unlock()
		go d.at.renew()
		tt.mu.Lock()
	}
	if len(tt.heap) > 0 && (!tt.armed || tt.heap[0].when < tt.armedAt) {
		tt.arm(tt.heap[0].when, time.Since(tt.epoch))
	}
	tt.mu.Unlock()
}

// arm sets the timer to fire at when. Called with tt.mu held.
func (tt *turnTimers) arm(when, now time.Duration) {
	tt.armed, tt.armedAt = true, when
	if tt.timer == nil {
		tt.timer = time.AfterFunc(when-now, tt.fire)
		return
	}
	tt.timer.Reset(when - now)
}

// removeAt takes the heap's i-th deadline out. Called with tt.mu held.
func (tt *turnTimers) removeAt(i int) {
	h := tt.heap
	gone := h[i]
	gone.at.due = 0
	last := len(h) - 1
	if i != last {
		h[i] = h[last]
		h[i].at.due = int32(i) + 1
	}
	h[last] = turnDeadline{}
	tt.heap = h[:last]
	if i != last {
		tt.down(i)
		tt.up(i)
	}
	if len(tt.heap) == 0 && cap(tt.heap) > 1024 {
		tt.heap = nil // a burst's heap goes with it
	}
}

func (tt *turnTimers) up(i int) {
	h := tt.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].when <= h[i].when {
			return
		}
		tt.swap(p, i)
		i = p
	}
}

func (tt *turnTimers) down(i int) {
	h := tt.heap
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].when < h[c].when {
			c = r
		}
		if h[i].when <= h[c].when {
			return
		}
		tt.swap(i, c)
		i = c
	}
}

func (tt *turnTimers) swap(i, j int) {
	h := tt.heap
	h[i], h[j] = h[j], h[i]
	h[i].at.due = int32(i) + 1
	h[j].at.due = int32(j) + 1
}
