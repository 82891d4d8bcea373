package sqlite

import (
	"context"
	"time"

	"github.com/heraldgw/herald/lease"
)

// An ownership lease is one row of leases, expiring at expires (Unix
// nanoseconds by the store's clock). Acquire is one upsert whose update
// applies only for the holder itself or over an expired lease, so taking
// and renewing are one statement and a refusal writes nothing.
const (
	sqlLeaseAcquire = `
INSERT INTO leases (name, holder, expires) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
WHERE leases.holder = excluded.holder OR leases.expires <= ?4`
	sqlLeaseRelease = `DELETE FROM leases WHERE name = ?1 AND holder = ?2`
)

// Leases returns the ownership lease store.
func (d *DB) Leases() lease.Store { return leaseStore{d: d} }

type leaseStore struct{ d *DB }

var _ lease.Store = leaseStore{}

func (s leaseStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	const op = "sqlite.AcquireLease"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return false, err
	}
	if err := lease.CheckAcquire(op, name, holder, ttl); err != nil {
		return false, err
	}
	var held bool
	// Ownership leases move rarely (a renewal every few seconds per
	// adapter), so their statements are not kept prepared; the writer's
	// connection runs them inside its transaction. A lost grant costs
	// nothing on a power cut (see bookkeeping).
	err := d.w.do(ctx, op, bookkeeping, func(*tx) error {
		_, now := d.now()
		r, err := d.wconn.ExecContext(context.Background(), sqlLeaseAcquire, name, holder, now+ttl.Nanoseconds(), now)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		held = n == 1
		return err
	})
	if err != nil {
		return false, d.fail(op, err)
	}
	return held, nil
}

func (s leaseStore) Release(ctx context.Context, name, holder string) error {
	const op = "sqlite.ReleaseLease"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return err
	}
	err := d.w.do(ctx, op, bookkeeping, func(*tx) error {
		_, err := d.wconn.ExecContext(context.Background(), sqlLeaseRelease, name, holder)
		return err
	})
	return d.fail(op, err)
}
