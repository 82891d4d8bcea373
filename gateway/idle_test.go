package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// The gateway's idle check, which a heartbeat fires only when it passes:
// a conversation is busy while a turn of it runs here, or while another
// process's lease holds it with an entry handed out; else idle.
func TestGatewayIdleCheck(t *testing.T) {
	onEachStore(t, func(t *testing.T, model *testkit.ModelServer, cfg config.Config) {
		ctx := context.Background()
		gate := testkit.NewGate()
		model.Script(testkit.Hang(gate))
		h := startGateway(t, cfg, Options{})
		g := h.g
		const conv = "telegram:4242"
		if g.convBusy(ctx, conv) {
			t.Fatalf("a conversation that never ran a turn is busy")
		}

		if err := g.Router().Deliver(ctx, sessions.Inbound{Conv: conv, Sender: "u1", MessageID: "m1", Text: "hi"}); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		model.WaitRequests(1)
		if !g.convBusy(ctx, conv) {
			t.Errorf("a conversation whose turn runs here is idle")
		}
		gate.Release()
		// Once its runner returned, the turn is no longer this process's
		// running turn, but it holds the lease until its commit.
		testkit.Eventually(t, "the turn's commit", func() bool { return !g.convBusy(ctx, conv) })
		if _, running := g.turns.RunningTurn(conv); running {
			t.Errorf("a conversation whose turn committed runs a turn here")
		}

		// Another process's turn is known by its lease.
		in := sessions.Inbound{Conv: conv, Sender: "u1", MessageID: "m2", Text: "elsewhere"}
		_, turn, err := g.db.Sessions().AppendClaim(ctx, in, "another-process", time.Hour)
		if err != nil || turn == nil {
			t.Fatalf("AppendClaim for another process = %v, %v; want its turn", turn, err)
		}
		if !g.convBusy(ctx, conv) {
			t.Errorf("a conversation whose turn runs in another process is idle")
		}
		if err := g.db.Sessions().Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if g.convBusy(ctx, conv) {
			t.Errorf("a conversation whose turn in another process ended is busy")
		}
	})
}
