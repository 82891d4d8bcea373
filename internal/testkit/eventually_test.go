package testkit_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// fatalRecorder is a testing.TB whose Fatalf keeps the message and ends
// the goroutine, as the testing package's does.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// inGoroutine runs fn as a test body would, returning when fn returned
// or called Fatalf.
func inGoroutine(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &fatalRecorder{TB: t}
	inGoroutine(func() {
		testkit.Eventually(r, "the third call", func() bool { return calls.Add(1) >= 3 })
	})
	if r.fatal != "" {
		t.Fatalf("Eventually failed: %s", r.fatal)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("cond called %d times, want 3: polling stops once it holds", got)
	}
}

func TestEventuallyWithinFailsWithTheConditionsLastWord(t *testing.T) {
	var calls atomic.Int32
	r := &fatalRecorder{TB: t}
	start := time.Now()
	inGoroutine(func() {
		testkit.EventuallyWithin(r, 50*time.Millisecond, func() (bool, string) {
			return false, fmt.Sprintf("asked %d times", calls.Add(1))
		})
	})
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Errorf("failed after %s, before its timeout", elapsed)
	}
	want := fmt.Sprintf("after 50ms: asked %d times", calls.Load())
	if r.fatal != want {
		t.Errorf("failure %q, want %q", r.fatal, want)
	}
}
