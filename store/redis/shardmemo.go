package redis

import "sync"

// shardMemo remembers the shard an id was found in, for the ids a domain
// makes (a delegation's, a child's), which name no shard of their own: an
// operation by such an id looks in the shard remembered, and only when
// there is none asks every shard at once (inShards). A record is never
// wrong, since a record lives where it was first written and is never
// moved. It keeps at most 2×memoSize ids: once the newer of its two
// generations is full, the older is dropped, so ids in use stay.
type shardMemo struct {
	mu       sync.Mutex
	cur, old map[string]int
}

// memoSize bounds one generation of a shardMemo.
const memoSize = 4096

// get is the shard id was remembered in.
func (m *shardMemo) get(id string) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := m.cur[id]; ok {
		return i, true
	}
	i, ok := m.old[id]
	if ok {
		m.putLocked(id, i)
	}
	return i, ok
}

// put remembers id in shard i.
func (m *shardMemo) put(id string, i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(id, i)
}

func (m *shardMemo) putLocked(id string, i int) {
	if len(m.cur) >= memoSize {
		m.old, m.cur = m.cur, nil
	}
	if m.cur == nil {
		m.cur = make(map[string]int, memoSize)
	}
	m.cur[id] = i
}
