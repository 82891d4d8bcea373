package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/outbox"
)

// Defaults for the store gauges.
const (
	DefaultGaugeInterval = 30 * time.Second
	// DefaultGaugeCap bounds each listing: the gauges read "at least this
	// many" beyond it, which is all an alert needs, and a large backlog
	// does not make every refresh read it whole.
	DefaultGaugeCap = 1000
)

// refreshTimeout bounds one refresh's reads of the store.
const refreshTimeout = 10 * time.Second

// StoreGauges refreshes herald_outbox_pending and herald_outbox_dead from
// the store's listings now and then, and herald_queue_depth from its turn
// queues. Every process of a cluster reports the same cluster-wide
// numbers; aggregate them with max, not sum.
type StoreGauges struct {
	outbox   outbox.Store
	queue    QueueCounter // nil: no queue gauge
	metrics  *Metrics
	interval time.Duration
	cap      int
	log      *slog.Logger

	loop bgloop.Loop
}

// QueueCounter counts the turn queues' entries (sessions.Store has it).
type QueueCounter interface {
	QueueDepth(ctx context.Context, limit int) (int, error)
}

// NewStoreGauges returns the refresher; Start runs it. q counts the turn
// queues, when not nil. Zero interval or limit take the defaults.
func NewStoreGauges(o outbox.Store, q QueueCounter, m *Metrics, interval time.Duration, limit int, log *slog.Logger) *StoreGauges {
	if interval <= 0 {
		interval = DefaultGaugeInterval
	}
	if limit <= 0 {
		limit = DefaultGaugeCap
	}
	if log == nil {
		log = slog.Default()
	}
	return &StoreGauges{outbox: o, queue: q, metrics: m, interval: interval, cap: limit, log: log}
}

// Start refreshes once and then every interval until Shutdown or ctx ends.
func (g *StoreGauges) Start(ctx context.Context) error {
	if g.loop.Started() {
		return nil
	}
	return g.loop.Start(ctx, "metrics.StoreGauges.Start", func(ctx context.Context) {
		tick := time.NewTicker(g.interval)
		defer tick.Stop()
		for {
			g.Refresh(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// Shutdown stops the refresher and waits for it.
func (g *StoreGauges) Shutdown(ctx context.Context) error { return g.loop.Stop(ctx) }

// Refresh lists the outbox and counts the queues once, and sets the
// gauges.
func (g *StoreGauges) Refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	if g.queue != nil {
		if depth, err := g.queue.QueueDepth(ctx, g.cap); err == nil {
			g.metrics.queue(depth)
		} else if ctx.Err() == nil {
			g.log.Warn("counting the turn queues for the metrics failed", "err", err)
		}
	}
	pending, err := g.outbox.Pending(ctx, g.cap)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("listing pending outbox messages for the metrics failed", "err", err)
		}
		return
	}
	dead, err := g.outbox.DeadLetters(ctx, g.cap)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("listing dead-lettered outbox messages for the metrics failed", "err", err)
		}
		return
	}
	g.metrics.outbox(len(pending), len(dead))
}
