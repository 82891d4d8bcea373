package redis

import (
	"context"
	"sync"
)

// inShards runs call for each of shards at once, so that the script calls
// they make go out together (batch.go) rather than one round trip after
// another, and returns the first error any of them returned. With one
// shard it runs call on the caller's goroutine.
func inShards(ctx context.Context, shards []int, call func(ctx context.Context, i int) error) error {
	if len(shards) == 1 {
		return call(ctx, shards[0])
	}
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for k, i := range shards {
		wg.Go(func() { errs[k] = call(ctx, i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// all is every shard, in order.
func (l *layout) all() []int {
	out := make([]int, l.count())
	for i := range out {
		out[i] = i
	}
	return out
}
