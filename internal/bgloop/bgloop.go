// Package bgloop runs a component's background loop: one goroutine,
// started once, stopped by cancelling its context and waited for. A
// component whose loop starts work of its own (fires, children, workers)
// halts the loop, so that the work stops growing, then waits for it.
package bgloop

import (
	"context"
	"sync"

	"github.com/heraldgw/herald/internal/errs"
)

// Loop is one background goroutine. The zero Loop is ready to Start.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run on a goroutine of its own, with a context that ends
// when ctx does or Stop is called. A Loop starts once. Errors: Conflict
// (started before), op naming the caller.
func (l *Loop) Start(ctx context.Context, op string, run func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return errs.E(op, errs.Conflict, "started before")
	}
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(ctx)
	}()
	return nil
}

// Started reports whether Start was called.
func (l *Loop) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done != nil
}

// Stop ends the loop's context and waits for run to return, until ctx
// ends (its error then). A Loop never started stops at once.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Halt ends the loop's context and waits for run to return, however
// long that takes: for a component that next waits for the work its
// loop started, which must not grow meanwhile. A Loop never started
// halts at once.
func (l *Loop) Halt() { _ = l.Stop(context.Background()) }

// Wait waits for wg until ctx ends (its error then): how a Shutdown gives
// the work its halted loop started until its own deadline.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
