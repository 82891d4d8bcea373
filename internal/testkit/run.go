package testkit

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// stopTimeout bounds how long Run waits for a loop to return after its
// context ended.
const stopTimeout = 10 * time.Second

// Run calls run in a goroutine with a context that ends when the test
// ends, then checks that run returned nil within 10 s of that: how a test
// runs an adapter's Run, or any loop that stops with its context.
func Run(t testing.TB, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v when its context ended; want nil", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("Run did not return within %s of its context ending", stopTimeout)
		}
	})
}

// LogBuffer collects log lines written from many goroutines, for a test
// to read with String.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger is a text logger at debug level writing to l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
