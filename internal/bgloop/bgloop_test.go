package bgloop

import (
	"context"
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
