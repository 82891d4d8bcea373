package delivery

import (
	"sync"
	"time"
)

// order remembers, by target, the last message handed back unsent, so
// that none claimed behind it is sent before it: a claim or a handoff
// that began before the hand-back may hold messages behind it, taken
// while it was still held here.
type order struct {
	claimTTL time.Duration

	mu    sync.Mutex
	backs map[string]backMark // by target
	seq   uint64              // numbers the hand-backs
}

// backMark is a hand-back of a message to a target: its number and when
// the message is due again.
type backMark struct {
	seq  uint64
	hold time.Time
	at   time.Time // when it was recorded, to forget it
}

// mark is the number of the last hand-back, as a claim or a commit
// begins: the "since" of stalls.
func (o *order) mark() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seq
}

// backed records that a message to target was handed back, due at hold,
// and forgets the records older than a claim: a claim or a commit in
// flight that long ago has ended.
func (o *order) backed(target string, hold, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	o.backs[target] = backMark{seq: o.seq, hold: hold, at: now}
	if len(o.backs) > 64 {
		for k, b := range o.backs {
			if now.Sub(b.at) > o.claimTTL {
				delete(o.backs, k)
			}
		}
	}
}

// stalls reports whether a new lane of target, filled by a claim that
// began at since (mark), starts stalled, and until when. It does when a
// message to target was handed back since, as its lane was, since the
// store gave its messages out behind that one while this worker still
// held it. So does one whose hand-back is not due yet, whenever it was:
// the write of one that failed left the message claimed here until its
// claim runs out, and the store gives out the messages behind it
// meanwhile.
func (o *order) stalls(target string, since uint64, now time.Time) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.backs[target]
	if ok && (b.seq > since || b.hold.After(now)) {
		return b.hold, true
	}
	return time.Time{}, false
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
