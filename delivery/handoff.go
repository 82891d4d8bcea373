package delivery

import (
	"context"
	"time"

	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Handoff returns a sessions.Handoff for a commit about to enqueue msgs,
// so that they are enqueued claimed by this worker and sent at once,
// without a claim of their own; nil when the worker cannot take them now
// (not running, no room, a platform without a route here), and they are
// enqueued due, for whichever worker claims them. The caller calls done
// once the commit has returned, with its error: the room kept for the
// messages meanwhile (so that commits running at once never take more
// than the worker may hold) is given back, and the worker is woken for
// those of them a commit enqueued due instead. A commit whose outcome is
// unknown may have handed messages over that the worker never saw: it
// doubts what it holds for a while (see doubt).
func (w *Worker) Handoff(msgs []outbox.Message) (h *sessions.Handoff, done func(err error)) {
	n := len(msgs)
	targets := make([]string, n)
	for i, m := range msgs {
		targets[i] = m.Target.String()
	}
	done = func(err error) {
		if err == nil && n > 0 {
			w.notices.notify(targets)
		}
	}
	if n == 0 || !w.routed(msgs) {
		return nil, done
	}
	// Replies handed over are sent at once, so they would pass a message
	// to their target enqueued here earlier that the loop has not claimed
	// yet (a command's answer beside the turn's own notice): until it has,
	// commits enqueue theirs due, behind it. Another target's backlog
	// holds them up not at all.
	if !w.running() || !w.lanes.open() || !w.notices.caughtUp(targets) {
		return nil, done
	}
	// Nor may they pass a message a claim of the loop's took and has not
	// put in its lanes yet, which the store, seeing it held here, would
	// hand them over behind: a commit waits for a claim on its way to
	// put what it took in the lanes (a claim waits likewise for the
	// commits offered here to return). Enqueued due instead, the replies
	// would wait behind every message due before them, one chat's
	// backlog included.
	w.handoffs.RLock()
	// Nor while the worker doubts what it holds (see doubt), which a
	// claim waited for may have begun.
	if w.doubt.left() > 0 || !w.room.reserve(n) {
		w.handoffs.RUnlock()
		return nil, done
	}
	handed := 0 // set by Claimed, on the committing goroutine, before done
	since := w.order.mark()
	h = &sessions.Handoff{Worker: w.name, TTL: w.claimTTL, Claimed: func(cs []outbox.Claimed) {
		handed = len(cs)
		w.handed(cs, since)
	}}
	done = func(err error) {
		if w.doubt.after(err) {
			w.log.Warn("a commit handing replies over failed and may have handed them all the same; this worker claims and takes nothing until its claims ran out, so that none is passed",
				"for", w.doubt.left(), "err", err)
		}
		w.handoffs.RUnlock()
		w.room.release(n)
		if err == nil && handed < n {
			w.notices.notify(targets)
		}
	}
	return h, done
}

// routed reports whether every one of msgs has a route here.
func (w *Worker) routed(msgs []outbox.Message) bool {
	for _, m := range msgs {
		if _, ok := w.routes.Get(m.Target.Platform); !ok {
			return false
		}
	}
	return true
}

// handed takes the claims a commit made for this worker (see Handoff) as
// if its own loop had claimed them; since is order's mark when the
// commit began.
func (w *Worker) handed(claimed []outbox.Claimed, since uint64) {
	if len(claimed) == 0 {
		return
	}
	// The lanes take them only until the loop's end, under the lock that
	// end is set under: a sender they start is one Shutdown waits for.
	if w.running() && w.lanes.dispatch(claimed, since, false) {
		return
	}
	// The worker began stopping while the commit ran, or its context
	// ended, and its loop may have returned, after which no sender
	// starts: the messages go back, due at once, for whichever worker
	// claims next.
	now := w.clock.Now()
	for _, c := range claimed {
		w.sender.postpone(w.base, c, now, "the delivery worker is stopping")
	}
}

// Sessions returns the turn worker's view of s: a Finish (or
// FinishAndClaim) that queues messages for delivery hands them to w,
// this process's delivery worker, claimed in the same step
// (Finish.Handoff), when it can take them, and wakes it otherwise, so a
// reply goes out at once instead of at the next poll.
func Sessions(s sessions.Store, w *Worker) sessions.Store {
	return handingSessions{Store: s, worker: w}
}

type handingSessions struct {
	sessions.Store
	worker *Worker
}

// Finish and FinishAndClaim call done deferred: until it is called, the
// delivery worker's claim loop waits (Worker.handoffs).
func (s handingSessions) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) (err error) {
	f, done := s.offer(f)
	defer func() { done(err) }()
	return s.Store.Finish(ctx, l, f)
}

func (s handingSessions) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (_ *sessions.Turn, err error) {
	f, done := s.offer(f)
	defer func() { done(err) }()
	return s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
}

// offer asks the delivery worker to take f's messages as they are
// enqueued (see Worker.Handoff); done is told how f's commit ended.
func (s handingSessions) offer(f sessions.Finish) (_ sessions.Finish, done func(err error)) {
	if f.Handoff != nil {
		return f, func(error) {}
	}
	f.Handoff, done = s.worker.Handoff(f.Outbox)
	return f, done
}
