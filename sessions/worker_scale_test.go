//go:build !race

// The race detector caps a program at 8128 live goroutines, under what
// this test runs.

package sessions_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// sleepRunner answers every turn after a fixed delay, as a slow model
// would.
type sleepRunner struct {
	delay   time.Duration
	started atomic.Int64
	running atomic.Int64
	peak    atomic.Int64
}

func (r *sleepRunner) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	r.started.Add(1)
	n := r.running.Add(1)
	defer r.running.Add(-1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if r.delay > 0 {
		t := time.NewTimer(r.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return &sessions.TurnOutput{End: sessions.TurnInterrupted}, context.Cause(ctx)
		}
	}
	return &sessions.TurnOutput{
		History: []chat.Message{{Role: "user", Content: in.Entry.Text}, {Role: "assistant", Content: "ok"}},
		Outbox:  []outbox.Message{{Target: in.Origin, Text: "ok", Kind: "reply"}},
		End:     sessions.TurnDone,
	}, nil
}

// Ten thousand conversations each send a message to a model that takes
// two seconds: the turns wait on the model together, so all are answered
// in little more than two seconds on an idle machine.
func TestManyConcurrentTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs ten thousand turns")
	}
	const convs, delay = 10_000, 2 * time.Second
	run := &sleepRunner{delay: delay}
	g := startGateway(t, gatewayOptions{runner: run, worker: sessions.TurnWorkerOptions{Turns: convs}})

	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	sem := make(chan struct{}, 256)
	for i := range convs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			in := sessions.Inbound{Conv: fmt.Sprintf("api:c%d", i), Text: "hi", MessageID: "m1"}
			if err := g.router.Deliver(context.Background(), in); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d deliveries failed", n)
	}
	delivered := time.Since(start)
	testkit.Eventually(t, "every turn started", func() bool { return run.started.Load() == convs })
	allStarted := time.Since(start)
	testkit.Eventually(t, "every reply", func() bool {
		return g.metrics.get(func(c *counters) int { return c.finished[sessions.TurnDone] }) == convs
	})
	took := time.Since(start)
	t.Logf("%d turns of %s: delivered in %s, all running after %s, all answered in %s, at most %d at once",
		convs, delay, delivered.Round(time.Millisecond), allStarted.Round(time.Millisecond), took.Round(time.Millisecond), run.peak.Load())
	// Time on a shared machine says little, so it is only logged; that
	// thousands of turns waited on the model at once is what must hold.
	if peak := run.peak.Load(); peak < convs/10 {
		t.Errorf("at most %d turns ran at once, want thousands", peak)
	}
	msgs, err := g.outbox.Pending(context.Background(), 2*convs)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != convs {
		t.Errorf("%d replies in the outbox, want %d", len(msgs), convs)
	}
}
