package delivery

import (
	"context"
	"log/slog"
	"slices"
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
	names   *names
	ttl     time.Duration // how long one beat holds
	margin  time.Duration // the part of a beat kept free at its end, as claimMargin is of a claim
	clock   clock.Clock
	log     *slog.Logger
	renewer *lease.Renewer

	mu sync.Mutex
	// at is, by name, when the last write that kept its heartbeat (a
	// Beat or a Claim) began: once at+ttl has passed, another worker's
	// claim may have ended every claim made under it. A name claimed
	// under before (names) is beaten beside the current one.
	at map[string]time.Time
}

func newHeartbeat(o outbox.Store, ns *names, ttl, margin time.Duration, clk clock.Clock, log *slog.Logger) (*heartbeat, error) {
	h := &heartbeat{outbox: o, names: ns, ttl: ttl, margin: margin, clock: clk, log: log, at: map[string]time.Time{}}
	var err error
	h.renewer, err = lease.NewRenewer(lease.RenewerOptions{
		Renew: func(ctx context.Context, held []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
			at := h.clock.Now()
			var failed error
			for _, name := range h.names.alive(at) {
				if err := h.outbox.Beat(ctx, name, ttl); err != nil {
					failed = err
					continue
				}
				h.beaten(name, at)
			}
			// A failed beat loses nothing here: until it holds again,
			// the senders see it by at (see left).
			return held, failed
		},
		TTL: ttl, Clock: clk, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	h.renewer.Hold(lease.Claim{Name: "heartbeat", Owner: ns.base})
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

// beaten records that a write that kept name's heartbeat, begun at at,
// succeeded. A nil heartbeat records nothing.
func (h *heartbeat) beaten(name string, at time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if at.After(h.at[name]) {
		h.at[name] = at
	}
	h.mu.Unlock()
}

// left is how long the heartbeat holds from now, as far as this worker
// knows: that of the name beaten longest ago among those alive, as a
// message held under any of them is sent only while it holds. A name
// never beaten (one taken since the last beat) has no heartbeat in the
// store to run out.
func (h *heartbeat) left(now time.Time) time.Duration {
	alive := h.names.alive(now)
	h.mu.Lock()
	defer h.mu.Unlock()
	var first time.Time
	for name, at := range h.at {
		switch {
		case !slices.Contains(alive, name):
			delete(h.at, name)
		case first.IsZero() || at.Before(first):
			first = at
		}
	}
	return first.Add(h.ttl).Sub(now)
}

// end stops the renewer and tells the store this worker is gone; ctx's
// cancellation does not cut the write short.
func (h *heartbeat) end(ctx context.Context) {
	_ = h.renewer.Shutdown(context.Background())
	ctx, cancel := storeContext(ctx)
	defer cancel()
	for _, name := range h.names.alive(h.clock.Now()) {
		if err := h.outbox.Beat(ctx, name, 0); err != nil {
			h.log.Warn("ending the delivery worker's heartbeat failed; it runs out", "name", name, "err", err)
		}
	}
}
