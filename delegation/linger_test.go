package delegation_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/tools"
)

// deafModel's first call ignores its context until released; the
// others answer at once.
type deafModel struct {
	started chan string
	release chan struct{}
}

func (m deafModel) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	goal := req.Messages[len(req.Messages)-1].Content
	m.started <- goal
	if strings.Contains(goal, "hang") {
		<-m.release
	}
	return &llm.Response{Message: chat.Message{Role: "assistant", Content: "done"}}, nil
}

// TestStalledChildKeepsItsPlaceUntilItsCallReturns is a child the stall
// monitor leaves behind (its model call ignores the stop): its result is
// recorded as stalled, but its place under the process cap stays taken
// until the call returns, so a runner of one place starts nothing else
// meanwhile.
func TestStalledChildKeepsItsPlaceUntilItsCallReturns(t *testing.T) {
	const quiet, grace = 60 * time.Second, 30 * time.Second
	db := openStore(t)
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	model := deafModel{started: make(chan string, 2), release: make(chan struct{})}
	defer func() {
		select {
		case <-model.release:
		default:
			close(model.release)
		}
	}()
	spawner := delegation.NewSpawner(delegation.SpawnerOptions{Client: model, Model: "m", Clock: clk,
		StallQuiet: quiet, StallTool: quiet, StallGrace: grace, Logger: slog.New(slog.DiscardHandler)})
	set, err := tools.NewRegistry().Set(nil)
	if err != nil {
		t.Fatal(err)
	}
	spawner.SetTools(set)
	ended := make(chan struct{}, 2)
	runner, err := delegation.NewRunner(delegation.RunnerOptions{
		Store: db.Delegations(), Spawner: spawner, Name: "here", Max: 1, Poll: time.Hour, OwnerTTL: time.Hour, Clock: clk,
		Ended: func() { ended <- struct{}{} }, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Shutdown(context.Background()) })
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner, Clock: clk}
	hung, err := svc.Start(ctx, delegation.Request{Conv: "api:stall", Goal: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	<-model.started
	// The stall monitor's ticker and the runner's poll timer, then the
	// grace beside them.
	if err := clk.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(quiet)
	if err := clk.BlockUntil(ctx, 4); err != nil {
		t.Fatal(err)
	}
	clk.Advance(grace)
	<-ended
	c, err := db.Delegations().Child(ctx, hung.Children[0].ID)
	if err != nil || c.Status != delegation.StatusStalled {
		t.Fatalf("the hung child = %s (%v), want stalled", c.Status, err)
	}
	// Ended is called as the end is recorded, a moment before the child
	// leaves the running set: its place then passes to the lingering count.
	testkit.Eventually(t, "the stalled child leaving the running set", func() bool { return runner.Busy() < 2 })
	if n := runner.Busy(); n != 1 {
		t.Errorf("Busy = %d with the stalled child's call still running, want 1", n)
	}
	passes := runner.ClaimPasses()
	next, err := svc.Start(ctx, delegation.Request{Conv: "api:stall", Goal: "next"})
	if err != nil {
		t.Fatal(err)
	}
	// Start woke the claim loop; a second wake once that pass is done
	// makes a pass that surely began after the next child was written.
	waitPasses(t, runner, passes+1)
	runner.Wake()
	waitPasses(t, runner, passes+2)
	if c, _ := db.Delegations().Child(ctx, next.Children[0].ID); c.Status != delegation.StatusPending {
		t.Errorf("the next child is %s while the stalled call runs, want pending", c.Status)
	}
	select {
	case goal := <-model.started:
		t.Fatalf("the model was called for %q while the stalled call holds the only place", goal)
	default:
	}
	close(model.release)
	if goal := <-model.started; !strings.Contains(goal, "next") {
		t.Errorf("the model's next call was for %q, want the next child", goal)
	}
	<-ended
}

// waitPasses waits until the runner's claim loop has made n passes.
func waitPasses(t *testing.T, r *delegation.Runner, n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("the claim loop's pass %d", n), func() bool { return r.ClaimPasses() >= n })
}
