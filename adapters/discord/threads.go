package discord

import "sync"

// threadCacheMax bounds the channels remembered; past it the cache starts
// over, which costs one REST call per channel seen again.
const threadCacheMax = 10000

// threadCache remembers, per channel id, whether the channel is a thread
// and its parent. A channel's kind never changes, so entries never lapse.
type threadCache struct {
	mu sync.Mutex
	m  map[string]threadInfo
}

type threadInfo struct {
	parent   string
	isThread bool
}

func newThreadCache() *threadCache { return &threadCache{m: map[string]threadInfo{}} }

func (c *threadCache) get(channelID string) (parent string, isThread, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[channelID]
	return t.parent, t.isThread, ok
}

func (c *threadCache) put(channelID, parent string, isThread bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= threadCacheMax {
		c.m = map[string]threadInfo{}
	}
	c.m[channelID] = threadInfo{parent: parent, isThread: isThread}
}
