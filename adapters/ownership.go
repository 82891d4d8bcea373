package adapters

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
)

// leaseCallTimeout bounds the release of an ownership lease as Run ends,
// which runs on a context of its own since the gateway's may have ended.
const leaseCallTimeout = 5 * time.Second

// errLeaseLost ends an exclusive adapter's Run when its lease is gone.
var errLeaseLost = errors.New("the adapter's ownership lease was lost")

// ExclusiveName is the lease name a's Run needs, or "" when a may run in
// every process at once.
func ExclusiveName(a Adapter) string {
	if ex, ok := a.(Exclusive); ok {
		return ex.Exclusive()
	}
	return ""
}

// OwnerOptions configure an Owner.
type OwnerOptions struct {
	Leases lease.Store
	Name   string // the adapter's exclusive name; its lease is "adapter:" + Name
	Holder string // this process
	TTL    time.Duration
	// Renew is the pause between renewals; zero: a third of TTL.
	Renew time.Duration
	// Poll is the pause between a waiting process's tries; zero: a tenth
	// of TTL. The lease lapses at most TTL after its owner dies (it
	// renewed at most a third before), and the waiter takes it within a
	// tenth more.
	Poll time.Duration
	// Owned is set to 1 while Run runs here, else 0
	// (herald_adapter_owned); a prometheus.Gauge is one. Nil: none.
	Owned interface{ Set(float64) }
	// Logger logs waiting, taking over and losing the lease; nil: the
	// default.
	Logger *slog.Logger
}

// Owner runs an exclusive adapter in this process only while the process
// holds its lease: it waits for the lease, renews it every third of its
// TTL while Run runs, ends Run when a renewal fails, finds another holder
// or a new token (the lease lapsed in between), then waits again, and
// releases the lease when Run returns. Run's context checks the grant's
// fencing token in the store (CheckOwner) before each call only the owner
// makes.
type Owner struct {
	leases lease.Store
	name   string // the lease: "adapter:" + the adapter's exclusive name
	holder string // this process
	ttl    time.Duration
	every  time.Duration // the pause between renewals
	poll   time.Duration // the pause between a waiting process's tries
	log    *slog.Logger
	owned  interface{ Set(float64) }
}

// NewOwner returns the owner of the adapter opts.Name; Run runs it.
func NewOwner(opts OwnerOptions) *Owner {
	name := "adapter:" + opts.Name
	return &Owner{
		leases: opts.Leases,
		name:   name,
		holder: opts.Holder,
		ttl:    opts.TTL,
		every:  cmp.Or(opts.Renew, max(opts.TTL/3, time.Millisecond)),
		poll:   cmp.Or(opts.Poll, max(opts.TTL/10, time.Millisecond)),
		log:    cmp.Or(opts.Logger, slog.Default()).With("lease", name),
		owned:  opts.Owned,
	}
}

// Run calls run each time this process takes the lease, until ctx ends
// (nil) or run returns by itself (run's error).
func (o *Owner) Run(ctx context.Context, run func(context.Context) error) error {
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
func (o *Owner) wait(ctx context.Context) int64 {
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
func (o *Owner) hold(ctx context.Context, token int64, run func(context.Context) error) (lost bool, err error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { o.renew(runCtx, cancel, token, stop) })
	o.setOwned(1)
	err = run(withOwner(runCtx, o.checker(cancel, token)))
	o.setOwned(0)
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

func (o *Owner) setOwned(v float64) {
	if o.owned != nil {
		o.owned.Set(v)
	}
}

// checker is what CheckOwner calls in Run: it checks in the
// store that this process holds the lease under token, unexpired, and
// when it does not, cancels Run's context with errLeaseLost and returns
// that. A store that does not answer (within a third of the TTL) is an
// error too, without ending Run: the adapter waits and checks again, and
// the renewals decide.
func (o *Owner) checker(cancel context.CancelCauseFunc, token int64) func(context.Context) error {
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
func (o *Owner) renew(ctx context.Context, cancel context.CancelCauseFunc, token int64, stop <-chan struct{}) {
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
