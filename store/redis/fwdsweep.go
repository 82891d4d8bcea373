package redis

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// fwdSweeper applies again the forwarded writes (forward.go) a Finish
// recorded and did not get to apply at their homes, a process having
// stopped in between: every sweepEvery it reads each shard's records
// older than forwardAge. It runs in the sharded layout only, from Open
// to Close, in every process: two that apply the same record apply the
// same idempotent writes.
type fwdSweeper struct {
	db      *DB
	every   time.Duration
	loop    bgloop.Loop
	applied atomic.Int64 // records applied again, for tests and logs
}

// Forwarded-write sweep defaults: a sweep every sweepEvery reads at
// most sweepBatch records of each shard.
const (
	sweepEvery = 5 * time.Second
	sweepBatch = 100
)

func newFwdSweeper(db *DB) *fwdSweeper { return &fwdSweeper{db: db, every: sweepEvery} }

// start runs the sweep until shutdown.
func (w *fwdSweeper) start() {
	_ = w.loop.Start(context.Background(), "redis.fwdSweeper", w.run)
}

// shutdown stops the sweep and waits for a sweep under way.
func (w *fwdSweeper) shutdown() { w.loop.Halt() }

func (w *fwdSweeper) run(ctx context.Context) {
	clk := w.db.clk // a test's clock; the wall clock else
	if clk == nil {
		clk = clock.Real{}
	}
	t := clk.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			w.sweep(ctx)
		}
	}
}

// sweep applies what every shard left, and logs what it did and what
// failed.
func (w *fwdSweeper) sweep(ctx context.Context) {
	n, err := w.db.sweepForwarded(ctx, sweepBatch)
	w.applied.Add(int64(n))
	if n > 0 {
		slog.Info("redis store: applied forwarded writes a commit left", "records", n)
	}
	if err != nil && ctx.Err() == nil && !errs.Is(err, errs.Closed) {
		slog.Warn("redis store: applying forwarded writes failed; the next sweep tries again", "err", err)
	}
}
