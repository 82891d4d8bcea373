package sqlite

import (
	"context"
	"database/sql"
)

// A gateway that knows no other process uses the file
// (gateway/sole_unix.go) calls ExpireHeld as it starts: what the file
// says is held was held by processes that are gone, and making it run out
// now, rather than when its lease or claim would have, is what those
// processes' deaths would have come to anyway. Claims and takeovers then
// go their usual way: tokens move on, deliveries are counted, nothing is
// acked for the dead.
const (
	// A held conversation is due at its lease's expiry, so the partial
	// index on due finds the held ones without a scan of every
	// conversation ever seen.
	sqlExpireLeases = `UPDATE conversations SET lease_expires = ?1, due = ?1, due_seq = 0
		WHERE due > ?1 AND lease_expires > ?1`
	sqlExpireClaims    = `UPDATE outbox SET claim_expires = ?1 WHERE state = 'claimed' AND claim_expires > ?1`
	sqlExpireOwnership = `UPDATE leases SET expires = ?1 WHERE expires > ?1`
)

// Expired counts what ExpireHeld made run out.
type Expired struct {
	Leases    int64 // conversation leases
	Claims    int64 // outbox claims
	Ownership int64 // ownership leases of exclusive adapters
}

// ExpireHeld makes every conversation lease, outbox claim and ownership
// lease in the file expire now. Only a caller that knows no live process
// holds any may call it: a live holder would lose its lease to the next
// claim (its commits then refused) and its claimed messages could be sent
// twice.
func (d *DB) ExpireHeld(ctx context.Context) (Expired, error) {
	const op = "sqlite.ExpireHeld"
	var out Expired
	if err := d.check(ctx, op); err != nil {
		return out, err
	}
	// It only moves leases and claims, as Renew and Claim do.
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		out = Expired{}
		_, now := d.now()
		for _, s := range []struct {
			stmt *sql.Stmt
			n    *int64
		}{
			{t.st.expireLeases, &out.Leases},
			{t.st.expireClaims, &out.Claims},
			{t.st.expireOwnership, &out.Ownership},
		} {
			r, err := s.stmt.Exec(now)
			if err != nil {
				return err
			}
			if *s.n, err = r.RowsAffected(); err != nil {
				return err
			}
		}
		return nil
	})
	return out, d.fail(op, err)
}
