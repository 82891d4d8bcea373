package lease

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// OnceState is what ClaimOnce found.
type OnceState string

const (
	// OnceClaimed: the caller holds the fire now and runs it.
	OnceClaimed OnceState = "claimed"
	// OnceHeld: another process holds it, until the claim's Expires.
	OnceHeld OnceState = "held"
	// OnceDone: it has run; nobody runs it again.
	OnceDone OnceState = "done"
)

// OnceStore keeps once-only claims on fires: things that must happen
// once among every process sharing the store (a cron job's fire at its
// scheduled time, a controller's tick). A fire is named by its identity
// (what fires and when it was due, e.g. "cron:job_1f:1767225600"); the
// first process to claim it runs it, holding the claim with a Renewer
// while it does, and marks it done at the end. A claim whose holder died
// runs out by the store's clock, and the fire can be claimed again;
// StaleOnce finds such fires, so a survivor finishes what the dead
// process began. Both store backends implement it; done fires are kept
// for the store's dedupe window and then forgotten.
//
// Every method may return errs.Closed after Close and errs.Unavailable
// when the backend cannot be reached.
type OnceStore interface {
	// ClaimOnce claims the fire id for owner for ttl when nobody holds
	// it (it is new, or its last claim ran out and it is not done) and
	// returns the claim (Name id, a token above every earlier claim of
	// it) with OnceClaimed. A fire another holds returns that claim
	// with OnceHeld; a done fire returns OnceDone and a zero claim.
	// Errors: Invalid (empty or overlong id or owner, ttl ≤ 0).
	ClaimOnce(ctx context.Context, id, owner string, ttl time.Duration) (Claim, OnceState, error)

	// RenewOnce extends each claim to ttl from now and returns those
	// still held, renewed; one that is not current any more is left out
	// (not an error). Its shape is a RenewFunc.
	RenewOnce(ctx context.Context, claims []Claim, ttl time.Duration) ([]Claim, error)

	// DoneOnce marks c's fire done. Errors: LeaseLost (c is not the
	// fire's current claim: it ran out and another took it), NotFound.
	DoneOnce(ctx context.Context, c Claim) error

	// StaleOnce lists up to limit fires whose identity starts with
	// prefix, claimed once and not done, whose claim has run out:
	// their holder died or stalled mid-fire. Oldest claim first.
	StaleOnce(ctx context.Context, prefix string, limit int) ([]string, error)
}

// CheckClaimOnce validates ClaimOnce's arguments for a backend.
func CheckClaimOnce(op, id, owner string, ttl time.Duration) error {
	if id == "" {
		return errs.E(op, errs.Invalid, "empty fire id")
	}
	return CheckAcquire(op, id, owner, ttl)
}
