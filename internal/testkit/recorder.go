package testkit

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// waitTimeout bounds Recorder.Wait, so a test whose values never come
// fails rather than hangs.
const waitTimeout = 10 * time.Second

// Recorder collects values added from many goroutines (what a fake inbox
// took, say) for a test to wait for and read. The zero value is ready.
type Recorder[T any] struct {
	mu      sync.Mutex
	got     []T
	changed chan struct{} // closed and replaced on every Add
}

// Add records v.
func (r *Recorder[T]) Add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v)
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

// All returns what was added so far, in order.
func (r *Recorder[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// Wait waits until at least n values were added and returns them all; it
// fails the test after 10 s.
func (r *Recorder[T]) Wait(t testing.TB, n int) []T {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got := slices.Clone(r.got)
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d values recorded, want %d within %s", len(got), n, waitTimeout)
		}
	}
}
