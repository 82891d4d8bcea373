package redis

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/heraldgw/herald/chat"
)

// A conversation's turns mostly run in the process that received their
// messages (AppendClaim), one after another, so the history a turn reads
// is usually the history this process read or wrote at the turn before.
// histCache keeps it, per conversation, with the lease token it is known
// at, and the append that grants a lease sends that token and the
// history's length: the script leaves the history out of its reply when
// the conversation's fence still equals the token (no lease was granted
// since, and no ClearHistory ran, which moves the fence too) and the list
// still has that length (the state's hl, which every write of the
// history keeps). Under one fence only the holder of that lease
// writes the history, and only by appending, so with the length unchanged
// the list is unchanged, and the turn takes the kept copy instead of
// reading and decoding every message again.
//
// The copy is made from what this process knows for certain: the history
// a claim read, extended by what a commit under the same lease appended
// once that commit went through. A write is the only one in flight for its
// conversation while it holds the entry taken out (take), and puts back
// only where nothing was put since (putBack); a copy that is wrong in any
// way is wrong in its length or its token, which the script checks.
type histCache struct {
	served atomic.Int64 // turns given a kept history, for tests

	mu    sync.Mutex
	m     map[string]histEntry
	bytes int // the sum of the entries' costs
	max   int // bytes kept at most; 0 keeps nothing
}

// histEntry is a conversation's history as it stood at a lease token.
// Its messages are never changed in place: a turn gets a copy.
type histEntry struct {
	token int64
	msgs  []chat.Message
	size  int // the encoded messages' length in bytes
}

// Memory, about: an entry takes histEntryOverhead beyond its messages
// (its key, its place in the map, the entry itself), and a message
// histMessageOverhead beyond its encoded length (the struct and its
// strings' headers).
const (
	histEntryOverhead   = 128
	histMessageOverhead = 128
)

// messageSize is about what a message of n encoded bytes takes decoded.
func messageSize(n int) int { return n + histMessageOverhead }

// cost is about how much memory e takes.
func (e histEntry) cost() int { return e.size + histEntryOverhead }

// historyCacheBytes bounds the histories a store keeps in memory.
const historyCacheBytes = 16 << 20

func newHistCache(max int) *histCache {
	return &histCache{m: make(map[string]histEntry), max: max}
}

// get returns conv's entry, if any.
func (c *histCache) get(conv string) (histEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[conv]
	return e, ok
}

// put records conv's history as read at token, in place of any entry.
func (c *histCache) put(conv string, e histEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(conv)
	c.addLocked(conv, e)
}

// take removes conv's entry and returns it when it is at token: a write
// under that lease extends it and puts it back once the write went
// through (putBack).
func (c *histCache) take(conv string, token int64) (histEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[conv]
	c.dropLocked(conv)
	return e, ok && e.token == token
}

// putBack records e as conv's entry unless another was put meanwhile.
func (c *histCache) putBack(conv string, e histEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[conv]; !ok {
		c.addLocked(conv, e)
	}
}

// drop forgets conv's entry.
func (c *histCache) drop(conv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(conv)
}

func (c *histCache) dropLocked(conv string) {
	if e, ok := c.m[conv]; ok {
		c.bytes -= e.cost()
		delete(c.m, conv)
	}
}

// addLocked adds e, then drops other entries, any, while over the bound.
// A history of more than an eighth of the bound is not kept.
func (c *histCache) addLocked(conv string, e histEntry) {
	if c.max <= 0 || e.cost() > c.max/8 {
		return
	}
	c.m[conv] = e
	c.bytes += e.cost()
	for other := range c.m {
		if c.bytes <= c.max {
			break
		}
		if other != conv {
			c.dropLocked(other)
		}
	}
}

// extended is e with msgs appended, of the given encoded size. It appends
// in place where e's array has room, so that a turn costs what it adds
// rather than a copy of the whole history: nothing else reads that room.
// Turns get copies, and of the values sharing the array, only one is
// ever extended: a write extends the entry it took out of the cache,
// and an entry a get returned is put back unextended only when the
// script found the history as long as it was, so no write extended it.
func (e histEntry) extended(msgs []chat.Message, size int) histEntry {
	return histEntry{token: e.token, msgs: append(e.msgs, msgs...), size: e.size + size}
}

// dropped is e without its n oldest messages (all when it has fewer),
// as a finish that drops them leaves the history. The messages dropped
// are costed by their text, which is about what they took.
func (e histEntry) dropped(n int) histEntry {
	n = min(n, len(e.msgs))
	if n <= 0 {
		return e
	}
	for _, m := range e.msgs[:n] {
		e.size -= messageSize(len(m.Content) + len(m.Role))
	}
	e.size = max(e.size, 0)
	e.msgs = e.msgs[n:]
	return e
}

// copy returns the messages for a turn, which may append to its slice and
// change its messages, their tool calls included, as it may a history it
// read.
func (e histEntry) copy() []chat.Message {
	out := slices.Clone(e.msgs)
	for i := range out {
		if out[i].ToolCalls != nil {
			out[i].ToolCalls = slices.Clone(out[i].ToolCalls)
		}
	}
	return out
}
