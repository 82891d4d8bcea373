package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
)

// heartbeat keeps the worker's heartbeat in the store (outbox.Store.Beat)
// renewed, and knows until when it holds: once it runs out another
// worker's claim ends this one's claims, so the senders send nothing
// past it.
type heartbeat struct {
	outbox  outbox.Store
	name    string
	ttl     time.Duration // how long one beat holds
	margin  time.Duration // the part of a beat kept free at its end, as claimMargin is of a claim
	clock   clock.Clock
	log     *slog.Logger
	renewer *lease.Renewer

	mu sync.Mutex
	// at is when the last write that kept the heartbeat (a Beat or a
	// Claim) began: once at+ttl has passed, another worker's claim may
	// have ended every claim of this one.
	at time.Time
}

func newHeartbeat(o outbox.Store, name string, ttl, margin time.Duration, clk clock.Clock, log *slog.Logger) (*heartbeat, error) {
	h := &heartbeat{outbox: o, name: name, ttl: ttl, margin: margin, clock: clk, log: log}
	var err error
	h.renewer, err = lease.NewRenewer(lease.RenewerOptions{
		Renew: func(ctx context.Context, held []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
			at := h.clock.Now()
			err := h.outbox.Beat(ctx, h.name, ttl)
			if err == nil {
				h.beaten(at)
			}
			// A failed beat loses nothing here: until it holds again,
			// the senders see it by at (see left).
			return held, err
		},
		TTL: ttl, Clock: clk, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	h.renewer.Hold(lease.Claim{Name: "heartbeat", Owner: name})
	return h, nil
}

// start beats once, before the first claim, and starts the renewer,
// which keeps it.
func (h *heartbeat) start(ctx context.Context) error {
	if err := h.renewer.RenewNow(ctx); err != nil {
		h.log.Warn("the delivery worker's first heartbeat failed; retrying", "err", err)
	}
	return h.renewer.Start(ctx)
}

// beaten records that a write that kept the heartbeat, begun at at,
// succeeded. A nil heartbeat records nothing.
func (h *heartbeat) beaten(at time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if at.After(h.at) {
		h.at = at
	}
	h.mu.Unlock()
}

// left is how long the heartbeat holds from now, as far as this worker
// knows.
func (h *heartbeat) left(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at.Add(h.ttl).Sub(now)
}

// end stops the renewer and tells the store this worker is gone; ctx's
// cancellation does not cut the write short.
func (h *heartbeat) end(ctx context.Context) {
	_ = h.renewer.Shutdown(context.Background())
	ctx, cancel := storeContext(ctx)
	defer cancel()
	if err := h.outbox.Beat(ctx, h.name, 0); err != nil {
		h.log.Warn("ending the delivery worker's heartbeat failed; it runs out", "err", err)
	}
}
