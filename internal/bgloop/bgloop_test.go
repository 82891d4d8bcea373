package bgloop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

func TestLoopStartsOnceAndStops(t *testing.T) {
	var l Loop
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop before Start = %v", err)
	}
	ended := make(chan struct{})
	if err := l.Start(context.Background(), "test", func(ctx context.Context) { <-ctx.Done(); close(ended) }); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background(), "test", func(context.Context) {}); !errs.Is(err, errs.Conflict) {
		t.Errorf("second Start = %v, want Conflict", err)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	select {
	case <-ended:
	default:
		t.Error("Stop returned before the loop ended")
	}
}

func TestStopGivesUpWhenItsContextEnds(t *testing.T) {
	var l Loop
	release := make(chan struct{})
	defer close(release)
	if err := l.Start(context.Background(), "test", func(context.Context) { <-release }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.Stop(ctx); err != context.DeadlineExceeded {
		t.Errorf("Stop of a loop that does not end = %v, want the deadline", err)
	}
}

func TestHaltWaitsForTheLoopHoweverLong(t *testing.T) {
	var l Loop
	l.Halt()
	release := make(chan struct{})
	ended := make(chan struct{})
	if err := l.Start(context.Background(), "test", func(ctx context.Context) {
		<-ctx.Done()
		<-release
		close(ended)
	}); err != nil {
		t.Fatal(err)
	}
	halted := make(chan struct{})
	go func() {
		l.Halt()
		close(halted)
	}()
	select {
	case <-halted:
		t.Fatal("Halt returned before the loop did")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-halted
	select {
	case <-ended:
	default:
		t.Error("Halt returned before the loop ended")
	}
}

func TestWaitGivesTheWorkUntilItsContextEnds(t *testing.T) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Go(func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := Wait(ctx, &wg); err != context.DeadlineExceeded {
		t.Errorf("Wait for work that does not end = %v, want the deadline", err)
	}
	close(release)
	if err := Wait(context.Background(), &wg); err != nil {
		t.Errorf("Wait for work that ended = %v", err)
	}
}
