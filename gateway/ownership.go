package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
)

// leaseCallTimeout bounds the release of an ownership lease as Run ends,
// which runs on a context of its own since the gateway's may have ended.
const leaseCallTimeout = 5 * time.Second

// errLeaseLost ends an exclusive adapter's Run when its lease is gone.
var errLeaseLost = errors.New("the adapter's ownership lease was lost")

// exclusiveName is the lease name a's Run needs, or "" when a may run in
// every process at once.
func exclusiveName(a adapters.Adapter) string {
	if ex, ok := a.(adapters.Exclusive); ok {
		return ex.Exclusive()
	}
	return ""
}

// ownedGauge is herald_adapter_owned: 1 while this process holds an
// exclusive adapter's lease and runs it, else 0.
func ownedGauge(m *Metrics) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_adapter_owned",
		Help: "Exclusive adapters (a long poll, a gateway shard) this process holds the lease of and runs, by platform.",
	}, []string{"platform"})
	m.Registry().MustRegister(g)
	return g
}

// adapterRun is how runAdapter runs a once: Run, behind the adapter's
// lease when it is exclusive.
func (g *Gateway) adapterRun(a adapters.Adapter) func(context.Context) error {
	run := func(ctx context.Context) error { return g.runOnce(ctx, a) }
	name := exclusiveName(a)
	if name == "" {
		return run
	}
	o := g.newOwner(a, name)
	return func(ctx context.Context) error { return o.run(ctx, run) }
}

// owner runs an exclusive adapter in this process only while the process
// holds its lease: it waits for the lease, renews it every third of its
// TTL while Run runs, ends Run when a renewal fails or finds another
// holder (then waits again), and releases the lease when Run returns.
type owner struct {
	leases lease.Store
	name   string // the lease: "adapter:" + the adapter's exclusive name
	holder string // this process
	ttl    time.Duration
	every  time.Duration // a third of ttl: the pause between renewals
	// poll is the pause between a waiting process's tries, a tenth of
	// ttl: the lease lapses at most ttl after its owner dies (it renewed
	// at most a third before), and the waiter takes it within a tenth
	// more.
	poll  time.Duration
	log   *slog.Logger
	owned prometheus.Gauge
}

func (g *Gateway) newOwner(a adapters.Adapter, name string) *owner {
	return &owner{
		leases: g.db.Leases(),
		name:   "adapter:" + name,
		holder: g.opts.Name,
		ttl:    g.cfg.Store.LeaseTTL,
		every:  max(g.cfg.Store.LeaseTTL/3, time.Millisecond),
		poll:   max(g.cfg.Store.LeaseTTL/10, time.Millisecond),
		log:    g.log.With("platform", a.Platform(), "lease", "adapter:"+name),
		owned:  g.owned.WithLabelValues(a.Platform()),
	}
}

// run calls run each time this process takes the lease, until ctx ends
// (nil) or run returns by itself (run's error).
func (o *owner) run(ctx context.Context, run func(context.Context) error) error {
	for {
		if !o.wait(ctx) {
			return nil
		}
		lost, err := o.hold(ctx, run)
		if !lost {
			return err
		}
		o.log.Warn("the adapter lost its lease and stopped; waiting to take it again")
	}
}

// wait takes the lease, trying again every tenth of its TTL while another
// process holds it or the store does not answer, and reports false when
// ctx ended first. It logs once that it waits, and when it takes over.
func (o *owner) wait(ctx context.Context) bool {
	waited, failing := false, false
	for {
		actx, cancel := context.WithTimeout(ctx, o.every)
		held, err := o.leases.Acquire(actx, o.name, o.holder, o.ttl)
		cancel()
		switch {
		case ctx.Err() != nil:
			return false
		case err != nil:
			if !failing {
				o.log.Warn("the adapter's lease cannot be read; trying again", "err", err)
			}
			failing = true
		case held:
			if waited {
				o.log.Info("took the adapter's lease over; running it here")
			} else {
				o.log.Info("holds the adapter's lease; running it here")
			}
			return true
		case !waited:
			o.log.Info("another process runs the adapter; waiting for its lease", "ttl_ms", o.ttl.Milliseconds())
			waited = true
		}
		if !clock.Sleep(ctx, o.poll) {
			return false
		}
	}
}

// hold runs run while renewing the lease. lost reports that run ended
// because the lease was lost while ctx still runs; otherwise the lease is
// released.
func (o *owner) hold(ctx context.Context, run func(context.Context) error) (lost bool, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { o.renew(runCtx, cancel, stop) })
	o.owned.Set(1)
	err = run(runCtx)
	o.owned.Set(0)
	close(stop)
	wg.Wait()
	if ctx.Err() == nil && errors.Is(context.Cause(runCtx), errLeaseLost) {
		// Not released: it is another's, or the store did not answer and
		// the next Acquire finds out.
		return true, err
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), leaseCallTimeout)
	defer rcancel()
	if rerr := o.leases.Release(rctx, o.name, o.holder); rerr != nil {
		o.log.Warn("releasing the adapter's lease failed; it expires by itself", "err", rerr, "ttl_ms", o.ttl.Milliseconds())
	}
	return false, err
}

// renew renews the lease every third of its TTL until stop is closed or
// ctx ends, and cancels ctx with errLeaseLost when a renewal fails or
// finds another holder. Each renewal is bounded by a third of the TTL, so
// a hung store is noticed before the lease runs out.
func (o *owner) renew(ctx context.Context, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, rcancel := context.WithTimeout(ctx, o.every)
		held, err := o.leases.Acquire(rctx, o.name, o.holder, o.ttl)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			o.log.Warn("renewing the adapter's lease failed; stopping it", "err", err)
		case !held:
			o.log.Warn("another process took the adapter's lease; stopping it here")
		default:
			continue
		}
		cancel(errLeaseLost)
		return
	}
}
