package delivery

import (
	"math"
	"sync"
	"time"
)

// maxHeld bounds the messages the claim loop holds claimed at once,
// however fast the sends: what it takes out of the store is here only
// because it claimed it. The replies commits hand over are not counted
// in it (see reserve).
const maxHeld = 4096

// room is how many messages the worker may hold claimed: no more than
// its senders send in a quarter of a claim, going by how long sends have
// taken, so a claimed message does not wait in this process until its
// claim runs out.
type room struct {
	senders  int
	claimTTL time.Duration
	free     chan struct{} // a token: a held message was settled, so the loop may claim again

	mu       sync.Mutex
	held     int           // claimed messages not yet settled
	looped   int           // of held, those the claim loop claimed
	promised int           // room kept for the replies of commits in flight (Handoff)
	sendAvg  time.Duration // how long a send takes, a moving average; 0 until one was timed
}

// left is how many more messages the claim loop may claim now: the room
// not held or promised to commits in flight, and no more than maxHeld
// (or one a sender, when that is more) of the loop's own held at once.
// The replies commits hand over take the room, not the loop's share of
// it, so a burst of them does not keep the loop from claiming.
func (r *room) left() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(0, min(r.freeLocked(), max(maxHeld, r.senders)-r.looped))
}

// freeLocked is the capacity not held or promised to commits in flight.
// r.mu is held.
func (r *room) freeLocked() int {
	return r.capacityLocked() - r.held - r.promised
}

// capacityLocked is how many messages the senders send in a quarter of
// a claim at the speed sends have taken, at least one a sender; one a
// sender until a send was timed. r.mu is held.
func (r *room) capacityLocked() int {
	if r.sendAvg <= 0 {
		return r.senders
	}
	c := int64(r.senders) * int64(r.claimTTL/4) / int64(r.sendAvg)
	return int(max(int64(r.senders), min(c, math.MaxInt32)))
}

// reserve keeps room for n messages a commit in flight may hand over,
// and reports false, keeping nothing, when there is not that much.
// maxHeld does not bound it: the replies are in this process already,
// made by the turns committing them (as many as workers.turns), and
// handed over they cost no store call, where enqueued due each would
// cost a claim; only the time their sends take does. A burst of replies
// that outnumbers maxHeld then goes out as it commits instead of
// through the claim loop.
func (r *room) reserve(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freeLocked() < n {
		return false
	}
	r.promised += n
	return true
}

// release gives back the room reserve kept for n messages.
func (r *room) release(n int) {
	r.mu.Lock()
	r.promised -= n
	r.mu.Unlock()
	r.signal()
}

// hold counts n messages claimed, by the claim loop when looped, else
// handed over by a commit.
func (r *room) hold(n int, looped bool) {
	r.mu.Lock()
	r.held += n
	if looped {
		r.looped += n
	}
	r.mu.Unlock()
}

// settle counts one held message settled: sent, or handed back; looped
// as it was held.
func (r *room) settle(looped bool) {
	r.mu.Lock()
	r.held--
	if looped {
		r.looped--
	}
	r.mu.Unlock()
	r.signal()
}

// timed adds a send's duration to the moving average.
func (r *room) timed(took time.Duration) {
	took = max(took, time.Microsecond)
	r.mu.Lock()
	if r.sendAvg == 0 {
		r.sendAvg = took
	} else {
		r.sendAvg += (took - r.sendAvg) / 8
	}
	r.mu.Unlock()
}

// signal tells the claim loop, if it waits for room to claim, that some
// may have come free.
func (r *room) signal() {
	select {
	case r.free <- struct{}{}:
	default:
	}
}
