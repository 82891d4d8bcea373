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
// TTL while Run runs, ends Run when a renewal fails, finds another holder
// or a new token (the lease lapsed in between), then waits again, and
// releases the lease when Run returns. Run's context checks the grant's
// fencing token in the store (adapters.CheckOwner) before each call only
// the owner makes.
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
		token := o.wait(ctx)
		if token == 0 {
			return nil
		}
		lost, err := o.hold(ctx, token, run)
		if !lost {
			return err
		}
		o.log.Warn("the adapter lost its lease and stopped; waiting to take it again")
	}
}

// wait takes the lease, trying again every tenth of its TTL while another
// process holds it or the store does not answer, and returns the grant's
// token, or 0 when ctx ended first. It logs once that it waits, and when
// it takes over.
func (o *owner) wait(ctx context.Context) int64 {
	waited, failing := false, false
	for {
		actx, cancel := context.WithTimeout(ctx, o.every)
		token, err := o.leases.Acquire(actx, o.name, o.holder, o.ttl)
		cancel()
		switch {
		case ctx.Err() != nil:
			return 0
		case err != nil:
			if !failing {
				o.log.Warn("the adapter's lease cannot be read; trying again", "err", err)
			}
			failing = true
		case token > 0:
			if waited {
				o.log.Info("took the adapter's lease over; running it here", "token", token)
			} else {
				o.log.Info("holds the adapter's lease; running it here", "token", token)
			}
			return token
		case !waited:
			o.log.Info("another process runs the adapter; waiting for its lease", "ttl_ms", o.ttl.Milliseconds())
			waited = true
		}
		if !clock.Sleep(ctx, o.poll) {
			return 0
		}
	}
}

// hold runs run, under the grant token, while renewing the lease. lost
// reports that run ended because the lease was lost while ctx still runs;
// otherwise the lease is released.
func (o *owner) hold(ctx context.Context, token int64, run func(context.Context) error) (lost bool, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { o.renew(runCtx, cancel, token, stop) })
	o.owned.Set(1)
	err = run(adapters.WithOwner(runCtx, o.checker(cancel, token)))
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

// checker is what adapters.CheckOwner calls in Run: it checks in the
// store that this process holds the lease under token, unexpired, and
// when it does not, cancels Run's context with errLeaseLost and returns
// that. A store that does not answer (within a third of the TTL) is an
// error too, without ending Run: the adapter waits and checks again, and
// the renewals decide.
func (o *owner) checker(cancel context.CancelCauseFunc, token int64) func(context.Context) error {
	return func(ctx context.Context) error {
		cctx, ccancel := context.WithTimeout(ctx, o.every)
		held, err := o.leases.Check(cctx, o.name, o.holder, token)
		ccancel()
		switch {
		case err != nil:
			return err
		case !held:
			o.log.Warn("the adapter's lease is no longer this process's; stopping it before its next platform call", "token", token)
			cancel(errLeaseLost)
			return errLeaseLost
		}
		return nil
	}
}

// renew renews the lease every third of its TTL until stop is closed or
// ctx ends, and cancels ctx with errLeaseLost when a renewal fails, finds
// another holder, or gets a token other than the grant's (the lease
// lapsed in between, and another process may have run the adapter). Each
// renewal is bounded by a third of the TTL, so a hung store is noticed
// before the lease runs out.
func (o *owner) renew(ctx context.Context, cancel context.CancelCauseFunc, token int64, stop <-chan struct{}) {
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
		got, err := o.leases.Acquire(rctx, o.name, o.holder, o.ttl)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			o.log.Warn("renewing the adapter's lease failed; stopping it", "err", err)
		case got == 0:
			o.log.Warn("another process took the adapter's lease; stopping it here")
		case got != token:
			o.log.Warn("the adapter's lease lapsed before its renewal; stopping it here", "token", token, "new_token", got)
		default:
			continue
		}
		cancel(errLeaseLost)
		return
	}
}
