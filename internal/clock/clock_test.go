package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
)

func TestSleep(t *testing.T) {
	if !clock.Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep of 1 ms = false, want true: its context did not end")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan bool, 1)
	go func() { done <- clock.Sleep(ctx, time.Hour) }()
	select {
	case passed := <-done:
		if passed {
			t.Error("Sleep with an ended context = true, want false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep of an hour did not return when its context had ended")
	}
}
