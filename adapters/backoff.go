package adapters

import "time"

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
