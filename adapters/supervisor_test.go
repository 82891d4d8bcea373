package adapters_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
)

// runAdapter is an adapter whose Run is run.
type runAdapter func(ctx context.Context) error

func (runAdapter) Platform() string { return "fake" }

func (r runAdapter) Run(ctx context.Context, _ adapters.Inbox) error { return r(ctx) }

func (runAdapter) Send(context.Context, outbox.Message) adapters.SendResult {
	return adapters.SendResult{Outcome: adapters.Accepted}
}

// An adapter that panics, then fails, is run again after a pause of a
// second, then two, on the supervisor's clock; its route is up during
// each run; Shutdown ends the run that lasts.
func TestSupervisorRestartsAStoppedAdapter(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var runs, ups, downs atomic.Int32
	a := runAdapter(func(ctx context.Context) error {
		switch runs.Add(1) {
		case 1:
			panic("boom")
		case 2:
			return errors.New("the platform refused")
		}
		<-ctx.Done()
		return nil
	})
	var logs testkit.LogBuffer
	s := adapters.NewSupervisor(adapters.SupervisorOptions{
		Adapter: a,
		Up:      func() { ups.Add(1) },
		Down:    func() { downs.Add(1) },
		Clock:   clk,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, pause := range []time.Duration{time.Second, 2 * time.Second} {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("no pause after run %d: %v", i+1, err)
		}
		if got := runs.Load(); got != int32(i+1) {
			t.Fatalf("%d runs before pause %d, want %d", got, i+1, i+1)
		}
		clk.Advance(pause)
	}
	testkit.Eventually(t, "the third run", func() bool { return runs.Load() == 3 })
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if u, d := ups.Load(), downs.Load(); u != 3 || d != 3 {
		t.Errorf("route up %d and down %d times, want 3 each", u, d)
	}
	got := logs.String()
	for _, want := range []string{"the fake adapter panicked: boom", "in=1s", "the platform refused", "in=2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("logs %q, want %q in them", got, want)
		}
	}
	if err := s.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
}
