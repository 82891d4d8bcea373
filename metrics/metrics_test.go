package metrics_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/metrics"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openSQLite opens a store on a fresh file with clk.
func openSQLite(t *testing.T, clk clock.Clock) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestStoreGaugesCountPendingAndDead(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t, clock.NewFake(t0))
	ob := db.Outbox()
	for range 3 {
		if _, _, err := ob.Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "slack", Chat: "C1"}, Text: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := ob.Claim(ctx, "w", []string{"slack"}, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	if err := ob.Dead(ctx, claimed[0], "channel_not_found"); err != nil {
		t.Fatal(err)
	}

	m := metrics.NewMetrics()
	g := metrics.NewStoreGauges(ob, nil, m, time.Hour, 0, quietLogger())
	g.Refresh(ctx)
	if p, d := testkit.MetricValue(t, m.Registry(), "herald_outbox_pending"), testkit.MetricValue(t, m.Registry(), "herald_outbox_dead"); p != 2 || d != 1 {
		t.Errorf("pending %v, dead %v; want 2, 1", p, d)
	}

	// The listing is capped.
	capped := metrics.NewStoreGauges(ob, nil, m, time.Hour, 1, quietLogger())
	if err := capped.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the capped refresh", func() bool { return testkit.MetricValue(t, m.Registry(), "herald_outbox_pending") == 1 })
	if err := capped.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestQueueDepthGauge(t *testing.T) {
	ctx := context.Background()
	db := openSQLite(t, clock.NewFake(t0))
	for _, text := range []string{"1", "2", "3"} {
		if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: "telegram:1", Sender: "1", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	q := db.Sessions()
	m := metrics.NewMetrics()
	metrics.NewStoreGauges(db.Outbox(), q, m, time.Hour, 0, quietLogger()).Refresh(ctx)
	if d := testkit.MetricValue(t, m.Registry(), "herald_queue_depth"); d != 3 {
		t.Errorf("herald_queue_depth %v, want 3", d)
	}
	metrics.NewStoreGauges(db.Outbox(), q, m, time.Hour, 2, quietLogger()).Refresh(ctx)
	if d := testkit.MetricValue(t, m.Registry(), "herald_queue_depth"); d != 2 {
		t.Errorf("herald_queue_depth %v with a cap of 2, want 2", d)
	}
}

// The delivery worker's and the streaming driver's hooks count on the
// gateway's metrics, under the names and labels the dashboards read.
func TestDeliveryHooksCount(t *testing.T) {
	m := metrics.NewMetrics()
	h := m.DeliveryHooks()
	h.Attempt("telegram", adapters.RateLimited)
	h.Resent("telegram")
	h.Acked(3 * time.Millisecond)
	h.StreamCall("slack", true, errs.E("test", errs.Invalid, "the message is gone"))
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"herald_delivery_attempts_total", []string{"platform=telegram", "result=rate_limited"}},
		{"herald_delivery_resends_total", []string{"platform=telegram"}},
		{"herald_delivery_ack_seconds", nil},
		{"herald_stream_calls_total", []string{"platform=slack", "call=edit", "result=refused"}},
	} {
		if got := testkit.MetricValue(t, m.Registry(), c.name, c.labels...); got != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, got)
		}
	}
}
