package adapters

import (
	"context"
	"time"
)

// Backoff spaces the retries of a connection or a call that keeps
// failing: Min after the first failure, doubling up to Max. A Max below
// Min counts as Min.
type Backoff struct {
	Min, Max time.Duration
}

// Wait is the wait after the n-th failure in a row, counting from 1.
func (b Backoff) Wait(n int) time.Duration {
	wait := b.Min
	for i := 1; i < n && wait > 0 && wait < b.Max; i++ {
		if wait > b.Max/2 {
			wait = b.Max
		} else {
			wait *= 2
		}
	}
	return max(min(wait, b.Max), b.Min)
}

// Sleep waits d, or less when ctx ends first; it reports whether d
// passed. Adapters wait between retries with it, so that Run returns as
// soon as its context ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
