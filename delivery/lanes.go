package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
)

// lanes queue the claimed messages by target, each drained by one
// sender, and start a sender for each lane waiting while fewer than
// Senders run.
type lanes struct {
	room    *room
	order   *order
	sender  *sender
	clock   clock.Clock
	slots   chan struct{} // one token per sender goroutine
	senders sync.WaitGroup
	done    chan struct{} // closed once the claim loop returned and every sender ended

	mu      sync.Mutex
	ctx     context.Context  // ends when sends must end now
	by      map[string]*lane // by target: the sender draining it, or waiting for one
	waiting []*lane          // lanes with messages and no sender yet, in the order claimed
	ended   bool             // the claim loop returned: no sender starts any more
}

// lane is the queue of claimed messages for one target, drained by one
// sender.
type lane struct {
	target string
	queue  []queued
	// stalled is set once a message of the lane was handed back unsent:
	// the messages behind it are handed back too, due at hold or later,
	// so that none overtakes it. The store claims them again only after
	// it.
	stalled bool
	hold    time.Time
}

// queued is a claimed message in its lane, and whether the claim loop
// took it (else a commit handed it over): the room counts the loop's
// apart (room.left).
type queued struct {
	c      outbox.Claimed
	looped bool
}

// start gives the senders ctx, whose end cancels their sends.
func (ls *lanes) start(ctx context.Context) {
	ls.mu.Lock()
	ls.ctx = ctx
	ls.mu.Unlock()
}

// open reports whether senders may still start.
func (ls *lanes) open() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.ended
}

// end starts no sender any more, waits for those running, and closes
// done. The claim loop calls it as it returns.
func (ls *lanes) end() {
	// No sender starts once ended is set, so the Wait sees them all.
	ls.mu.Lock()
	ls.ended = true
	ls.mu.Unlock()
	ls.senders.Wait()
	close(ls.done)
}

// dispatch puts each claimed message in its target's lane; a new lane
// waits for a sender, and a sender starts for each waiting lane while
// fewer than Senders run. since is order's mark when the claim began: a
// new lane of a target whose message was handed back since starts
// stalled (order.stalls). looped tells the claim loop's claims from a
// commit's handoff. Once ended it takes nothing and reports false: a
// sender it starts is one end waits for.
func (ls *lanes) dispatch(claimed []outbox.Claimed, since uint64, looped bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.ended {
		return false
	}
	now := ls.clock.Now()
	ls.room.hold(len(claimed), looped)
	for _, c := range claimed {
		key := c.Target.String()
		if l, ok := ls.by[key]; ok {
			l.queue = append(l.queue, queued{c: c, looped: looped})
			continue
		}
		l := &lane{target: key, queue: []queued{{c: c, looped: looped}}}
		l.hold, l.stalled = ls.order.stalls(key, since, now)
		ls.by[key] = l
		ls.waiting = append(ls.waiting, l)
	}
	for len(ls.waiting) > 0 {
		select {
		case ls.slots <- struct{}{}:
		default:
			return true
		}
		l := ls.waiting[0]
		ls.waiting = ls.waiting[1:]
		ls.senders.Add(1)
		go ls.drain(ls.ctx, l)
	}
	return true
}

// drain sends l's messages in order until its queue is empty, then takes
// the next waiting lane, and returns when none waits.
func (ls *lanes) drain(ctx context.Context, l *lane) {
	defer ls.senders.Done()
	defer func() { <-ls.slots }()
	for {
		ls.mu.Lock()
		if len(l.queue) == 0 {
			delete(ls.by, l.target)
			if len(ls.waiting) == 0 {
				ls.waiting = nil // let the backing array go after a burst
				ls.mu.Unlock()
				return
			}
			l = ls.waiting[0]
			ls.waiting = ls.waiting[1:]
			ls.mu.Unlock()
			continue
		}
		q := l.queue[0]
		l.queue = l.queue[1:]
		stalled, hold := l.stalled, l.hold
		ls.mu.Unlock()

		now := ls.clock.Now()
		if back := ls.sender.handle(ctx, q.c, stalled, hold, now); !back.IsZero() {
			ls.mu.Lock()
			l.stalled, l.hold = true, later(l.hold, back)
			ls.order.backed(l.target, l.hold, now)
			ls.mu.Unlock()
		}
		ls.room.settle(q.looped)
	}
}
