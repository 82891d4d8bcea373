package lease

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// RenewFunc renews claims for ttl in one call to the store and returns
// those still held, renewed. A claim left out was lost: its thing is
// someone else's now, or ended.
type RenewFunc func(ctx context.Context, claims []Claim, ttl time.Duration) ([]Claim, error)

// RenewerOptions configure NewRenewer.
type RenewerOptions struct {
	Renew RenewFunc     // required
	TTL   time.Duration // how long each renewal holds; required
	// Lost is told of each claim a renewal found lost, once; the holder
	// stops what it runs under it. Called on the renewer's goroutine.
	Lost func(Claim)
	// Every is how often the claims are renewed; 0, or more than a
	// third of TTL, means a third of TTL. A holder whose renewals carry
	// what it is doing (a sub-agent's progress) renews more often.
	Every  time.Duration
	Clock  clock.Clock  // nil means the wall clock
	Logger *slog.Logger // nil means slog.Default()
}

// Renewer keeps one process's claims alive: every TTL/3 by its clock it
// renews all it holds with one call to the store, retrying sooner when
// the store does not answer, so a slow holder that is alive is never
// taken for a dead one. It is a component: Start, Shutdown.
type Renewer struct {
	renew RenewFunc
	ttl   time.Duration
	every time.Duration
	lost  func(Claim)
	clock clock.Clock
	log   *slog.Logger

	mu   sync.Mutex
	held map[string]Claim
	loop bgloop.Loop
}

// NewRenewer returns a renewer holding nothing. Errors: Invalid (no
// Renew, TTL not positive).
func NewRenewer(opts RenewerOptions) (*Renewer, error) {
	const op = "lease.NewRenewer"
	if opts.Renew == nil {
		return nil, errs.E(op, errs.Invalid, "no renew function")
	}
	if opts.TTL <= 0 {
		return nil, errs.E(op, errs.Invalid, "claim ttl %s is not positive", opts.TTL)
	}
	r := &Renewer{renew: opts.Renew, ttl: opts.TTL, every: opts.TTL / 3, lost: opts.Lost, clock: opts.Clock, log: opts.Logger, held: map[string]Claim{}}
	if opts.Every > 0 && opts.Every < r.every {
		r.every = opts.Every
	}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// TTL is how long each renewal holds a claim.
func (r *Renewer) TTL() time.Duration { return r.ttl }

// Hold adds c to the claims renewed (or replaces the one of its name).
func (r *Renewer) Hold(c Claim) {
	r.mu.Lock()
	r.held[c.Name] = c
	r.mu.Unlock()
}

// Drop stops renewing the claim of name: its holder ended what it ran.
func (r *Renewer) Drop(name string) {
	r.mu.Lock()
	delete(r.held, name)
	r.mu.Unlock()
}

// Current returns the claim of name as last renewed, if held.
func (r *Renewer) Current(name string) (Claim, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.held[name]
	return c, ok
}

// Start runs the renewals until Shutdown or ctx ends. Errors: Conflict
// (started before).
func (r *Renewer) Start(ctx context.Context) error {
	return r.loop.Start(ctx, "lease.Renewer.Start", r.run)
}

// Shutdown stops renewing. The claims held are left to run out: a
// holder that ends what it runs drops or ends its claim itself.
func (r *Renewer) Shutdown(ctx context.Context) error { return r.loop.Stop(ctx) }

func (r *Renewer) run(ctx context.Context) {
	every := r.every
	wait := every
	for {
		if !clock.SleepOn(ctx, r.clock, wait) {
			return
		}
		wait = every
		if err := r.RenewNow(ctx); err != nil {
			// The store may be back before the claims run out.
			r.log.Warn("renewing claims failed; retrying", "err", err)
			wait = every / 3
		}
	}
}

// RenewNow renews every claim held at once, telling Lost of those the
// store no longer gives this process.
func (r *Renewer) RenewNow(ctx context.Context) error {
	r.mu.Lock()
	claims := make([]Claim, 0, len(r.held))
	for _, c := range r.held {
		claims = append(claims, c)
	}
	r.mu.Unlock()
	if len(claims) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.ttl/3)
	defer cancel()
	kept, err := r.renew(ctx, claims, r.ttl)
	if err != nil {
		return err
	}
	// By name: a scheduler may hold thousands of claims at once.
	renewed := make(map[string]Claim, len(kept))
	for _, k := range kept {
		renewed[k.Name] = k
	}
	var lost []Claim
	r.mu.Lock()
	for _, c := range claims {
		k, ok := renewed[c.Name]
		cur, still := r.held[c.Name]
		switch {
		case !still || cur.Token != c.Token:
			// Dropped or replaced while the renewal ran.
		case ok:
			r.held[c.Name] = k
		default:
			delete(r.held, c.Name)
			lost = append(lost, c)
		}
	}
	r.mu.Unlock()
	for _, c := range lost {
		r.log.Warn("a claim was lost; its holder stops", "name", c.Name, "token", c.Token)
		if r.lost != nil {
			r.lost(c)
		}
	}
	return nil
}
