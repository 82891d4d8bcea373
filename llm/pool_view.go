package llm

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// A pool keeps a view of its keys' states in memory, so that a request
// on the happy path asks nothing of the store:
//
//   - The view is read from the store when there is none, when it is
//     older than ViewMaxAge, when the pool or another process marked or
//     revived a key since (Forget, told by PoolOptions.Marked's signal),
//     and at every request while a key is set aside (cooling or dead),
//     so a cooling ends on the store's clock as it always did.
//   - A use is counted in the view at once, so this process's
//     round_robin and least_used move on, and written with the others
//     counted since, in one CountUses, UseFlushEvery later (or at
//     Flush): the count is bookkeeping, a few lost to a crash mislead
//     least_used a little.
//   - With several keys, a conversation's key is read with the view the
//     first time this process serves it, and written at once when it
//     changes (its first key, a rotation), so that every process keeps
//     it on that key; its later uses are counted like any other. A pool
//     of one key has no conversation's key to keep.
//
// So a pool of one key whose key is fine calls the store once per
// ViewMaxAge and once per UseFlushEvery of requests, never on a
// request's path; a pool of several adds one read and one write the
// first time a process serves a conversation.

// ViewMaxAge bounds how long a pool trusts its view of the keys without
// reading the store, when no mark told it to read sooner.
const ViewMaxAge = time.Minute

// UseFlushEvery is how long the uses a pool counts wait before they are
// written, all in one call.
const UseFlushEvery = time.Second

// maxViewSticky bounds the conversations a pool remembers the key of:
// past it, it forgets them all and reads each again when it next serves
// it.
const maxViewSticky = 10_000

// poolView is what a pool knows of its keys between reads of the store.
type poolView struct {
	mu      sync.Mutex
	forgets uint64              // Forgets so far: a read begun before one is not fresh
	fresh   bool                // read, and no mark since
	readAt  time.Time           // when, by the pool's clock
	now     time.Time           // the store's clock at that read
	states  map[string]KeyState // by key id
	// sticky is the key the store keeps for each conversation this
	// process served, and when it was written or read, by the pool's
	// clock: written again when StickyTTL/2 old, so the store keeps it
	// while the conversation goes on.
	sticky  map[string]stickyUse
	pending map[string]*pendingUses // uses counted, not written yet
	seq     int64                   // the order of pending's uses
	flush   clock.Timer             // the pending write; nil when none
}

// pendingUses is the uses of one key counted since the last write, and
// the order of its last.
type pendingUses struct {
	n, last int64
}

// order is pending's ids, the one used last last.
func order(pending map[string]*pendingUses) []string {
	return slices.SortedFunc(maps.Keys(pending), func(a, b string) int {
		return cmp.Compare(pending[a].last, pending[b].last)
	})
}

// Forget makes the pool read the store at its next request: a key was
// marked or revived, here or in another process on the store.
func (p *Pool) Forget() {
	p.view.mu.Lock()
	p.view.fresh = false
	p.view.forgets++
	p.view.mu.Unlock()
}

// snapshot returns the store's clock, the keys' states and conv's key,
// from the view when it serves, else read from the store.
func (p *Pool) snapshot(ctx context.Context, conv string) (time.Time, map[string]KeyState, string, error) {
	v := &p.view
	if len(p.keys) == 1 {
		conv = "" // one key: no conversation's key to keep
	}
	local := p.clock.Now()
	v.mu.Lock()
	if now, ok := p.serves(local, conv); ok {
		states := maps.Clone(v.states)
		sticky := v.sticky[conv].id
		v.mu.Unlock()
		return now, states, sticky, nil
	}
	began := v.forgets
	v.mu.Unlock()
	r, err := p.store.ReadPool(ctx, p.name, conv)
	if err != nil {
		return r.Now, nil, "", err
	}
	states := make(map[string]KeyState, len(r.Keys))
	for _, s := range r.Keys {
		states[s.ID] = s
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	// Uses counted here and not written yet stay counted in the view,
	// and the keys they were of are the pool's latest, in their order.
	var last int64
	for _, st := range states {
		last = max(last, st.LastUse)
	}
	for _, id := range order(v.pending) {
		u := v.pending[id]
		st := states[id]
		last++
		st.ID, st.Uses, st.LastUse = id, st.Uses+u.n, last
		states[id] = st
	}
	// A mark told of while the read was under way may be newer than
	// what it read: the next request reads again.
	v.fresh, v.readAt, v.now, v.states = v.forgets == began, local, r.Now, states
	if conv != "" {
		v.remember(conv, r.Sticky, local)
	}
	return r.Now, maps.Clone(states), r.Sticky, nil
}

// serves reports whether the view answers a request of conv at local
// (the pool's clock), and the store's clock it stands for. v.mu is held.
func (p *Pool) serves(local time.Time, conv string) (time.Time, bool) {
	v := &p.view
	age := local.Sub(v.readAt)
	if !v.fresh || age < 0 || age >= ViewMaxAge {
		return time.Time{}, false
	}
	if conv != "" {
		if u, ok := v.sticky[conv]; !ok || local.Sub(u.at) >= StickyTTL/2 {
			return time.Time{}, false
		}
	}
	now := v.now.Add(age)
	for _, k := range p.keys {
		st := p.effective(v.states[k.id])
		if p.dead(st) || st.CoolingUntil.After(now) {
			return time.Time{}, false // set aside: its end is the store's to say
		}
	}
	return now, true
}

// remember keeps id as conv's key, as the store has it now ("" for
// none: the first use writes it). v.mu is held.
func (v *poolView) remember(conv, id string, at time.Time) {
	if v.sticky == nil || len(v.sticky) >= maxViewSticky {
		v.sticky = map[string]stickyUse{}
	}
	v.sticky[conv] = stickyUse{id: id, at: at}
}

// used counts a use of k for a request of conv (may be ""): in the view
// at once, in the store with the next write, or at once when it makes k
// conv's key.
func (p *Pool) used(ctx context.Context, k *poolKey, conv string) {
	v := &p.view
	local := p.clock.Now()
	v.mu.Lock()
	if v.states == nil {
		v.states = map[string]KeyState{}
	}
	st := v.states[k.id]
	var last int64
	for _, s := range v.states {
		last = max(last, s.LastUse)
	}
	st.ID, st.Uses, st.LastUse = k.id, st.Uses+1, last+1
	v.states[k.id] = st
	stick := len(p.keys) > 1 && conv != ""
	if stick {
		u, ok := v.sticky[conv]
		stick = !ok || u.id != k.id || local.Sub(u.at) >= StickyTTL/2
	}
	if !stick {
		p.countLocked(k.id)
		v.mu.Unlock()
		return
	}
	v.mu.Unlock()
	if err := p.store.UseKey(ctx, p.name, k.id, conv); err != nil {
		if ctx.Err() == nil {
			p.log.Warn("counting a use of a key failed", "pool", p.name, "key", k.id, "err", err)
		}
		return
	}
	v.mu.Lock()
	v.remember(conv, k.id, local)
	v.mu.Unlock()
}

// countLocked adds a use of key id to the next write, and plans the
// write when none is planned. v.mu is held.
func (p *Pool) countLocked(id string) {
	v := &p.view
	if v.pending == nil {
		v.pending = map[string]*pendingUses{}
	}
	u := v.pending[id]
	if u == nil {
		u = &pendingUses{}
		v.pending[id] = u
	}
	v.seq++
	u.n, u.last = u.n+1, v.seq
	p.planFlushLocked()
}

// planFlushLocked plans the write of the pending uses UseFlushEvery
// from now, unless one is planned. v.mu is held.
func (p *Pool) planFlushLocked() {
	if p.view.flush != nil {
		return
	}
	p.view.flush = p.clock.AfterFunc(UseFlushEvery, func() {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		defer cancel()
		p.Flush(ctx)
	})
}

// flushTimeout bounds a planned write of the uses.
const flushTimeout = 10 * time.Second

// Flush writes the uses counted since the last write, in one call, the
// key used last written last. A write that fails keeps them for the
// next. The gateway flushes its pools as it stops.
func (p *Pool) Flush(ctx context.Context) {
	v := &p.view
	v.mu.Lock()
	if v.flush != nil {
		v.flush.Stop()
		v.flush = nil
	}
	pending := v.pending
	v.pending = nil
	v.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	uses := make([]KeyUses, 0, len(pending))
	for _, id := range order(pending) {
		uses = append(uses, KeyUses{ID: id, N: pending[id].n})
	}
	err := p.store.CountUses(ctx, p.name, uses)
	switch {
	case err == nil:
		return
	case errs.Is(err, errs.Closed):
		return // the store is gone: nothing will write them
	}
	p.log.Warn("writing the keys' use counts failed; they are kept for the next write", "pool", p.name, "err", err)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pending == nil {
		v.pending = map[string]*pendingUses{}
	}
	for id, u := range pending {
		if now := v.pending[id]; now != nil {
			now.n += u.n
		} else {
			v.pending[id] = u
		}
	}
	p.planFlushLocked()
}
