package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/heraldgw/herald/lease"
)

// An ownership lease is one row of leases, expiring at expires (Unix
// nanoseconds by the store's clock), with its fencing token. Acquire is
// one upsert whose update applies only for the holder itself or over an
// expired lease, so taking and renewing are one statement and a refusal
// writes nothing (and returns no row); the token stays for a renewal of
// an unexpired holding and grows for any other grant. Release expires
// the row rather than deleting it, so the token is never given again.
const (
	sqlLeaseAcquire = `
INSERT INTO leases (name, holder, expires, token) VALUES (?1, ?2, ?3, 1)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires,
	token = CASE WHEN leases.holder = excluded.holder AND leases.expires > ?4 AND leases.token > 0 THEN leases.token ELSE leases.token + 1 END
WHERE leases.holder = excluded.holder OR leases.expires <= ?4
RETURNING token`
	sqlLeaseCheck   = `SELECT count(*) FROM leases WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires > ?4`
	sqlLeaseRelease = `UPDATE leases SET expires = 0 WHERE name = ?1 AND holder = ?2`
)

// Leases returns the ownership lease store.
func (d *DB) Leases() lease.Store { return leaseStore{d: d} }

type leaseStore struct{ d *DB }

var _ lease.Store = leaseStore{}

func (s leaseStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (int64, error) {
	const op = "sqlite.AcquireLease"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return 0, err
	}
	if err := lease.CheckAcquire(op, name, holder, ttl); err != nil {
		return 0, err
	}
	var token int64
	// Ownership leases move rarely (a renewal every few seconds per
	// adapter), so their statements are not kept prepared; the writer's
	// connection runs them inside its transaction. A lost grant costs
	// nothing on a power cut (see bookkeeping).
	err := d.w.do(ctx, op, bookkeeping, func(*tx) error {
		_, now := d.now()
		err := d.wconn.QueryRowContext(context.Background(), sqlLeaseAcquire, name, holder, now+ttl.Nanoseconds(), now).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			token = 0
			return nil
		}
		return err
	})
	if err != nil {
		return 0, d.fail(op, err)
	}
	return token, nil
}

func (s leaseStore) Check(ctx context.Context, name, holder string, token int64) (bool, error) {
	const op = "sqlite.CheckLease"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return false, err
	}
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return false, err
	}
	_, now := d.now()
	var n int
	if err := d.rdb.QueryRowContext(ctx, sqlLeaseCheck, name, holder, token, now).Scan(&n); err != nil {
		return false, d.fail(op, err)
	}
	return n == 1, nil
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
