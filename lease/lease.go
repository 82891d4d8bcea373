// Package lease is herald's named ownership leases: a piece of work that
// may run in one process only among all those sharing a store (a Telegram
// long poll, a Discord gateway shard) is run by the process holding its
// lease. A holder renews its lease while it works; a holder that dies
// stops renewing, and another process takes the lease over once it
// expires. Expiry is decided by the store's clock, never by comparing two
// processes' clocks.
//
// Each grant carries a fencing token: a number that grows with every
// grant that is not a renewal of an unexpired holding, by any holder. The
// holder checks its token (Check) right before each platform call only
// the owner may make (a Telegram getUpdates, a Discord gateway
// connection), so a holder that stalled past its lease while another took
// it over makes no such call when it wakes; what is left is a call
// already on its way when the holder stalled. A token is never given
// twice for one name, whatever was released or expired in between.
package lease

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// MaxName bounds a lease's name and holder, in bytes: they are keys, not
// data.
const MaxName = 256

// Store keeps ownership leases. Both store backends implement it.
type Store interface {
	// Acquire takes the lease name for holder for ttl when it is free or
	// expired, or renews it for ttl when holder has it already, and
	// returns the grant's fencing token (more than 0); it returns 0,
	// changing nothing, while another holder has it. A renewal of an
	// unexpired holding keeps its token; any other grant, the same
	// holder's after its lease lapsed included, gets a greater one.
	// Errors: Invalid (empty or overlong name or holder, ttl not
	// positive), Closed, Unavailable.
	Acquire(ctx context.Context, name, holder string, ttl time.Duration) (token int64, err error)
	// Check reports whether holder holds name under token now, unexpired
	// by the store's clock. It writes nothing. Errors: Invalid, Closed,
	// Unavailable.
	Check(ctx context.Context, name, holder string, token int64) (bool, error)
	// Release frees the lease name if holder has it, so another may take
	// it at once; a lease held by another, expired or never taken is left
	// as it is. Errors: Invalid, Closed, Unavailable.
	Release(ctx context.Context, name, holder string) error
}

// CheckAcquire validates Acquire's arguments for a backend; op names
// the backend's operation.
func CheckAcquire(op, name, holder string, ttl time.Duration) error {
	if ttl <= 0 {
		return errs.E(op, errs.Invalid, "lease ttl %s is not positive", ttl)
	}
	return CheckRelease(op, name, holder)
}

// CheckRelease validates Release's arguments for a backend.
func CheckRelease(op, name, holder string) error {
	switch {
	case name == "":
		return errs.E(op, errs.Invalid, "empty lease name")
	case holder == "":
		return errs.E(op, errs.Invalid, "empty lease holder")
	case len(name) > MaxName:
		return errs.E(op, errs.Invalid, "lease name of %d bytes, over %d", len(name), MaxName)
	case len(holder) > MaxName:
		return errs.E(op, errs.Invalid, "lease holder of %d bytes, over %d", len(holder), MaxName)
	}
	return nil
}
