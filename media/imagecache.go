package media

import (
	"container/list"
	"os"
	"sync"
)

// loaded keeps the pictures LoadImage made from files, so that the model
// calls of a turn, and the later turns whose history shows the same
// picture, do not decode and encode it again. A file changed since is a
// new entry: the key holds its size and modification time.
var loaded = newImageCache(64 << 20)

// imageKey is one version of a file.
type imageKey struct {
	path string
	size int64
	mod  int64 // UnixNano
}

func keyOf(path string, fi os.FileInfo) imageKey {
	return imageKey{path: path, size: fi.Size(), mod: fi.ModTime().UnixNano()}
}

// imageCache is a least-recently-used cache of encoded pictures bounded
// by their bytes.
type imageCache struct {
	mu    sync.Mutex
	max   int
	used  int
	order *list.List // of *cachedImage, most recent first
	byKey map[imageKey]*list.Element
}

type cachedImage struct {
	key  imageKey
	data []byte
	mime string
}

func newImageCache(max int) *imageCache {
	return &imageCache{max: max, order: list.New(), byKey: map[imageKey]*list.Element{}}
}

func (c *imageCache) get(k imageKey) (data []byte, mime string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return nil, "", false
	}
	c.order.MoveToFront(e)
	ci := e.Value.(*cachedImage)
	return ci.data, ci.mime, true
}

func (c *imageCache) put(k imageKey, data []byte, mime string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok || len(data) > c.max/4 {
		return
	}
	c.byKey[k] = c.order.PushFront(&cachedImage{key: k, data: data, mime: mime})
	c.used += len(data)
	for c.used > c.max {
		e := c.order.Back()
		ci := e.Value.(*cachedImage)
		c.order.Remove(e)
		delete(c.byKey, ci.key)
		c.used -= len(ci.data)
	}
}
