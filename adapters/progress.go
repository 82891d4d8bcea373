package adapters

import (
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
)

// ProgressTTL is how long SendProgress keeps how far a message got. The
// delivery worker retries within minutes; an older entry belongs to a
// message that was dead-lettered or taken over by another process.
const ProgressTTL = time.Hour

// SendProgress remembers, by outbox message id, how far a message sent
// in parts got (T is the adapter's own record: parts accepted, the first
// part's id, …), so that a retry sends only the parts that did not go. It
// lives in memory: a process that dies between two parts forgets it, and
// the process that sends the message again sends every part, so the parts
// that went before appear twice. That is the outbox's at-least-once
// window, widened from one message to the parts of one.
//
// A send takes its entry, works on its own copy and keeps it again only
// when a retry is to come; a message is claimed by one sender at a time.
type SendProgress[T any] struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]progressEntry[T]
}

type progressEntry[T any] struct {
	v  T
	at time.Time
}

// NewSendProgress returns an empty SendProgress aging entries by c.
func NewSendProgress[T any](c clock.Clock) *SendProgress[T] {
	return &SendProgress[T]{clock: c, m: map[string]progressEntry[T]{}}
}

// Take removes and returns message id's progress; ok is false when there
// is none, when it is older than ProgressTTL, or when id is empty.
func (p *SendProgress[T]) Take(id string) (v T, ok bool) {
	if id == "" {
		return v, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[id]
	delete(p.m, id)
	if !ok || p.clock.Now().Sub(e.at) > ProgressTTL {
		return v, false
	}
	return e.v, true
}

// Keep keeps v as message id's progress for its next attempt, and
// forgets entries older than ProgressTTL. An empty id keeps nothing.
func (p *SendProgress[T]) Keep(id string, v T) {
	if id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for k, e := range p.m {
		if now.Sub(e.at) > ProgressTTL {
			delete(p.m, k)
		}
	}
	p.m[id] = progressEntry[T]{v: v, at: now}
}
