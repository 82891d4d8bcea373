package sessions

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// Turns that follow each other run on the goroutine that ran the one
// before; a turn handed over just as its goroutine gives up waiting still
// runs; and once done, the parked goroutines end.
func TestRunnersReuseTheirGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())

	var ids sync.Map // goroutine stack id → true
	var ran atomic.Int64
	one := func(*Turn) {
		buf := make([]byte, 64)
		ids.Store(string(buf[:runtime.Stack(buf, false)][:20]), true)
		ran.Add(1)
	}
	r := newRunners(ctx, 4, one)
	waitRan := func(n int64) {
		t.Helper()
		testkit.EventuallyWithin(t, 5*time.Second, func() (bool, string) {
			got := ran.Load()
			return got >= n, fmt.Sprintf("%d turns ran, want %d", got, n)
		})
	}
	for i := range 20 {
		r.run(&Turn{})
		waitRan(int64(i + 1))
		// Let the goroutine park before the next turn comes.
		for j := 0; ; j++ {
			r.mu.Lock()
			n := len(r.parked)
			r.mu.Unlock()
			if n == 1 || j > 1000 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	count := 0
	ids.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Fatalf("20 turns one after another ran on %d goroutines, want 1", count)
	}

	// Goroutines that wait 0 give up at once, racing each new turn.
	quick := newRunners(ctx, 4, one)
	quick.wait = 0
	for i := range 200 {
		quick.run(&Turn{})
		waitRan(int64(21 + i))
	}

	cancel()
	testkit.EventuallyWithin(t, 5*time.Second, func() (bool, string) {
		left := runtime.NumGoroutine()
		return left <= before, fmt.Sprintf("%d goroutines left after done, %d before", left, before)
	})
}
