package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// heldByTheDead leaves in cfg's SQLite file what a process killed mid-work
// leaves: a turn's lease and a claimed reply to platform, both good for a
// minute.
func heldByTheDead(t *testing.T, cfg config.Config, platform string) {
	t.Helper()
	ctx := context.Background()
	db, err := OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := sessions.Inbound{Conv: "api:dead", Sender: "api", MessageID: "m1", Text: "are you there?", Meta: map[string]string{"target": "api:dead"}}
	if _, turn, err := db.Sessions().AppendClaim(ctx, in, "dead-process", time.Minute); err != nil || turn == nil {
		t.Fatalf("AppendClaim as the dead process = %v, %v", turn, err)
	}
	if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: platform, Chat: "sent"}, Conv: "api:sent", Text: "committed before the crash", Kind: "reply"}); err != nil {
		t.Fatal(err)
	}
	if c, err := db.Outbox().Claim(ctx, "dead-process", []string{platform}, 1, time.Minute); err != nil || len(c) != 1 {
		t.Fatalf("Claim as the dead process = %v, %v", c, err)
	}
}

// A gateway that is the only one on its SQLite file takes over at once
// what a killed process held, rather than when its lease and claim run
// out.
func TestGatewayTakesOverWhatTheDeadHeld(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	heldByTheDead(t, cfg, "api")
	model.Script(testkit.Reply("yes"))
	h := startGateway(t, cfg, Options{})
	ctx := context.Background()
	for conv, want := range map[string]string{"api:dead": "yes", "api:sent": "committed before the crash"} {
		// Within testkit.Eventually's 20 s: long before the minute its lease or
		// claim had left.
		testkit.Eventually(t, conv+"'s "+want, func() bool {
			items, err := h.g.Store().Timeline().ReadTimeline(ctx, conv, "", 10)
			return err == nil && len(items) == 1 && items[0].Text == want
		})
	}
	if !strings.Contains(h.logs.String(), "took over what stopped processes held") {
		t.Errorf("the takeover was not logged: %s", h.logs)
	}
}

// With another gateway running on the file, a starting one cannot tell a
// dead holder from that one's, and leaves every lease and claim to run
// its course. The dead process's reply is to a platform neither gateway
// sends to, so the running one cannot claim it first; whether the claim
// still holds is asked of the store.
func TestGatewayLeavesHoldingsWhileAnotherRuns(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	startGateway(t, cfg, Options{Name: "running"})
	heldByTheDead(t, cfg, "elsewhere")
	h := startGateway(t, cfg, Options{Name: "starting"})
	time.Sleep(time.Second)
	if n := model.Count(); n != 0 {
		t.Errorf("%d model requests: a lease with a minute left was taken over", n)
	}
	ctx := context.Background()
	if items, err := h.g.Store().Timeline().ReadTimeline(ctx, "api:dead", "", 10); err != nil || len(items) != 0 {
		t.Errorf("api:dead's timeline %+v, %v; want nothing yet", items, err)
	}
	if c, err := h.g.Store().Outbox().Claim(ctx, "probe", []string{"elsewhere"}, 1, time.Minute); err != nil || len(c) != 0 {
		t.Errorf("Claim of the dead process's reply = %+v, %v; want it still held", c, err)
	}
	if strings.Contains(h.logs.String(), "took over") {
		t.Errorf("the second gateway took over: %s", h.logs)
	}
}
