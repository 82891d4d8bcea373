package redis

import "sync"

// onEveryShard calls fn for every shard at once, so that calls made for
// a read of every shard (a list, a count) go out together and share the
// batcher's round trips, and waits for them all; it returns the first
// shard's error, in shard order.
func (db *DB) onEveryShard(fn func(i int) error) error {
	return together(db.shards.count(), fn)
}

// together calls fn(0) … fn(n-1) at once, waits for them all and returns
// the first error, in that order.
func together(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	failed := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { failed[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range failed {
		if err != nil {
			return err
		}
	}
	return nil
}
