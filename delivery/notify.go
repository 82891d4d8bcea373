package delivery

import (
	"context"
	"sync"

	"github.com/heraldgw/herald/outbox"
)

// notices wakes the claim loop when a message was queued, and tells
// whether a claim has taken every message queued so far.
type notices struct {
	wake chan struct{} // a token asks the claim loop to claim now

	mu sync.Mutex
	// notified counts Notify calls, and claimedTo is the count at which
	// the last claim that took every due message began: while they
	// differ, a message enqueued here may wait unclaimed, and a commit's
	// replies to its target must not pass it (see Worker.Handoff).
	notified, claimedTo uint64
}

// Notify makes the claim loop claim now instead of at its next poll: a
// turn committed a reply, or a command answer was queued. Until a claim
// has taken what was queued, commits' replies are not handed over (see
// Handoff), so they do not pass it.
func (w *Worker) Notify() { w.notices.notify() }

func (n *notices) notify() {
	n.mu.Lock()
	n.notified++
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// mark is the count of Notify calls as a claim begins.
func (n *notices) mark() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notified
}

// claimedAll records that a claim begun at mark took every message due
// when it began.
func (n *notices) claimedAll(mark uint64) {
	n.mu.Lock()
	n.claimedTo = mark
	n.mu.Unlock()
}

// caughtUp reports whether no message enqueued here may wait unclaimed.
func (n *notices) caughtUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notified == n.claimedTo
}

// NotifyingOutbox returns s, calling notify after each Enqueue of a
// message not queued before, so the delivery worker claims it at once:
// the router's command answers, and what other domains queue outside a
// turn's commit, take this way.
func NotifyingOutbox(s outbox.Store, notify func()) outbox.Store {
	return notifyingOutbox{Store: s, notify: notify}
}

type notifyingOutbox struct {
	outbox.Store
	notify func()
}

func (o notifyingOutbox) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	id, dup, err := o.Store.Enqueue(ctx, m)
	if err == nil && !dup {
		o.notify()
	}
	return id, dup, err
}
