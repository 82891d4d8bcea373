package delivery

import (
	"context"
	"sync"

	"github.com/heraldgw/herald/outbox"
)

// notices wakes the claim loop when a message was queued, and tells
// whether a claim has taken every message queued so far to some targets.
type notices struct {
	wake chan struct{} // a token asks the claim loop to claim now

	mu sync.Mutex
	// notified counts the notices, and claimedTo is the count at which
	// the last claim that took every due message began. A notice counted
	// after claimedTo is a message enqueued here that may wait unclaimed,
	// and a commit's replies to its target must not pass it (see
	// Worker.Handoff): anyAt is the count of the last notice of messages
	// to targets not named, and at the count of the last one of each
	// target named; those at or below claimedTo are forgotten.
	notified, claimedTo, anyAt uint64
	at                         map[string]uint64
}

// Notify makes the claim loop claim now instead of at its next poll: a
// command answer was queued, or a route came up. Until a claim has taken
// what was queued, commits' replies are not handed over (see Handoff),
// so they do not pass it.
func (w *Worker) Notify() { w.notices.notify(nil) }

// NotifyTarget is Notify for a message queued to target: until a claim
// has taken it, only commits' replies to target wait for that claim;
// another chat's reply is still handed over at once, however long one
// chat's backlog.
func (w *Worker) NotifyTarget(target outbox.Target) {
	w.notices.notify([]string{target.String()})
}

// notify counts a notice of messages queued to targets, or to any target
// when targets is empty, and wakes the claim loop.
func (n *notices) notify(targets []string) {
	n.mu.Lock()
	n.notified++
	if len(targets) == 0 {
		n.anyAt = n.notified
	}
	for _, t := range targets {
		if n.at == nil {
			n.at = map[string]uint64{}
		}
		n.at[t] = n.notified
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// mark is the count of notices as a claim begins.
func (n *notices) mark() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notified
}

// claimedAll records that a claim begun at mark took every message due
// when it began.
func (n *notices) claimedAll(mark uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.claimedTo = mark
	for t, at := range n.at {
		if at <= mark {
			delete(n.at, t)
		}
	}
}

// caughtUp reports whether no message enqueued here to any of targets
// may wait unclaimed.
func (n *notices) caughtUp(targets []string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.anyAt > n.claimedTo {
		return false
	}
	for _, t := range targets {
		if n.at[t] > n.claimedTo {
			return false
		}
	}
	return true
}

// NotifyingOutbox returns s, calling notify after each Enqueue of a
// message not queued before, so the delivery worker claims it at once:
// the router's command answers, and what other domains queue outside a
// turn's commit, take this way.
func NotifyingOutbox(s outbox.Store, notify func(outbox.Target)) outbox.Store {
	return notifyingOutbox{Store: s, notify: notify}
}

type notifyingOutbox struct {
	outbox.Store
	notify func(outbox.Target)
}

func (o notifyingOutbox) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	id, dup, err := o.Store.Enqueue(ctx, m)
	if err == nil && !dup {
		o.notify(m.Target)
	}
	return id, dup, err
}
