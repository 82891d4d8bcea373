package delivery

import (
	"context"
	"sync"

	"github.com/heraldgw/herald/internal/errs"
)

// turnFollower is what the drivers that show running turns in their chats
// (Presence, Streaming) share: one goroutine per turn followed, started
// only between Start and Shutdown, and a context that cuts their platform
// calls off when the driver stops.
type turnFollower struct {
	op string // the driver's name in errors, e.g. "delivery.Presence"

	mu       sync.Mutex
	started  bool
	stopping bool
	ctx      context.Context // ends the platform calls when the driver stops
	cancel   context.CancelFunc
	turns    sync.WaitGroup
}

// Start lets the driver follow turns until Shutdown or until ctx ends,
// which also cuts the platform calls in flight. Errors: Conflict
// (started before).
func (f *turnFollower) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errs.E(f.op+".Start", errs.Conflict, "started before")
	}
	f.started = true
	f.ctx, f.cancel = context.WithCancel(ctx)
	return nil
}

// Shutdown follows no new turns and waits, within ctx, for the goroutines
// of the turns followed to end; past ctx, what still runs is cut off.
func (f *turnFollower) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	f.stopping = true
	started := f.started
	f.mu.Unlock()
	if !started {
		return nil
	}
	done := make(chan struct{})
	go func() {
		f.turns.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	f.cancel()
	<-done
	return err
}

// follow runs run on a goroutine of its own, and reports false, running
// nothing, while the driver is not running.
func (f *turnFollower) follow(run func()) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.stopping {
		return false
	}
	f.turns.Go(run)
	return true
}
