package gateway

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// The gateway's idle check, which a heartbeat fires only when it passes:
// a conversation is busy while a turn of it runs here, or while another
// process's turn worker has marked it running; else idle.
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
		testkit.Eventually(t, "the turn's end", func() bool {
			_, running := g.turns.RunningTurn(conv)
			return !running
		})
		if g.convBusy(ctx, conv) {
			t.Errorf("a conversation whose turn ended is busy")
		}

		// Another process's turn is known by the mark its worker leaves.
		if err := g.db.Sessions().SetMeta(ctx, conv, sessions.ConvMetaTurn, `{"entry":"e9"}`); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
		if !g.convBusy(ctx, conv) {
			t.Errorf("a conversation another process marked running is idle")
		}
		if err := g.db.Sessions().SetMeta(ctx, conv, sessions.ConvMetaTurn, ""); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
		if g.convBusy(ctx, conv) {
			t.Errorf("a conversation whose mark was cleared is busy")
		}
	})
}
