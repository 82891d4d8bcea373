package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// onceStore is the DB seen as a lease.OnceStore.
type onceStore struct{ d *DB }

var _ lease.OnceStore = onceStore{}

// Once returns the store of once-only claims on fires.
func (d *DB) Once() lease.OnceStore { return onceStore{d: d} }

// A fire is one row of once_fires: the claim (owner, token, expires, in
// Unix nanoseconds by the store's clock) and, once done, when (done_at).
// A done fire counts for the dedupe window (Limits.DedupeWindow) from
// done_at; past it the fire is forgotten, claimable as a new one, and
// the writes that remember keys drop such rows now and then (pruneDue),
// through the partial index of the done ones. A fire's claim takes its
// token from one counter, so a fire forgotten and claimed again still
// gets a token above every earlier one.
const (
	sqlOnceGet   = `SELECT owner, token, expires, done, done_at FROM once_fires WHERE id = ?1`
	sqlOnceToken = `INSERT INTO claim_tokens (name, token) VALUES ('once', 1)
		ON CONFLICT (name) DO UPDATE SET token = token + 1 RETURNING token`
	sqlOnceClaim = `INSERT INTO once_fires (id, owner, token, expires) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, token = excluded.token,
			expires = excluded.expires, done = 0, done_at = 0`
	// Renewals and the done mark match the claim's token on a fire not
	// done: a claim that ran out and was taken by another matches nothing.
	sqlOnceRenew = `UPDATE once_fires SET expires = ?3 WHERE id = ?1 AND token = ?2 AND done = 0`
	sqlOnceDone  = `UPDATE once_fires SET done = 1, done_at = ?3 WHERE id = ?1 AND token = ?2 AND done = 0`
	sqlOncePrune = `DELETE FROM once_fires WHERE id IN
		(SELECT id FROM once_fires WHERE done = 1 AND done_at <= ?1 LIMIT ?2)`
	// Stale fires come from the partial index of the fires not done, in
	// expiry order; the prefix is matched on the way.
	sqlOnceStale = `SELECT id FROM once_fires WHERE done = 0 AND expires <= ?1 AND substr(id, 1, length(?2)) = ?2
		ORDER BY expires, id LIMIT ?3`
)

// fireRow is a row of once_fires.
type fireRow struct {
	claim  lease.Claim
	done   bool
	doneAt int64
}

// readFire reads the fire id's row; ok is false when there is none.
func readFire(row *sql.Row, id string) (f fireRow, ok bool, err error) {
	var exp int64
	err = row.Scan(&f.claim.Owner, &f.claim.Token, &exp, &f.done, &f.doneAt)
	if errors.Is(err, sql.ErrNoRows) {
		return f, false, nil
	}
	f.claim.Name, f.claim.Expires = id, fromNanos(exp)
	return f, err == nil, err
}

// state is what a ClaimOnce at now finds f in, or claimable when it may
// take it: a done fire counts for window from its end, a claim until it
// expires.
func (f fireRow) state(now int64, window time.Duration) (lease.Claim, lease.OnceState, bool) {
	switch {
	case f.done && f.doneAt > now-int64(window):
		return lease.Claim{}, lease.OnceDone, false
	case !f.done && nanos(f.claim.Expires) > now:
		return f.claim, lease.OnceHeld, false
	}
	return lease.Claim{}, "", true
}

func (s onceStore) ClaimOnce(ctx context.Context, id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState, error) {
	const op = "sqlite.once.ClaimOnce"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return lease.Claim{}, "", err
	}
	if err := lease.CheckClaimOnce(op, id, owner, ttl); err != nil {
		return lease.Claim{}, "", err
	}
	// Every instance tries each fire; all but the first find it held or
	// done, which the read pool tells without waiting for the writer.
	f, ok, err := readFire(d.reads.onceGet.QueryRowContext(ctx, id), id)
	if err != nil {
		return lease.Claim{}, "", d.fail(op, err)
	}
	if ok {
		_, now := d.now()
		if c, st, claimable := f.state(now, d.lim.DedupeWindow); !claimable {
			return c, st, nil
		}
	}
	var c lease.Claim
	var st lease.OnceState
	// A claim only moves a claim around, as Renew does (see bookkeeping):
	// a lost one leaves the fire to be claimed again, its holder gone too.
	err = d.w.do(ctx, op, bookkeeping, func(t *tx) (err error) {
		c, st, err = d.claimFire(t, id, owner, ttl)
		return err
	})
	if err != nil {
		return lease.Claim{}, "", d.fail(op, err)
	}
	return c, st, nil
}

// claimFire claims fire id for owner for ttl in t when it is claimable
// (fireRow.state), and otherwise returns what holds it.
func (d *DB) claimFire(t *tx, id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState, error) {
	nowT, now := d.now()
	f, ok, err := readFire(t.st.onceGet.QueryRow(id), id)
	if err != nil {
		return lease.Claim{}, "", err
	}
	if ok {
		if c, st, claimable := f.state(now, d.lim.DedupeWindow); !claimable {
			return c, st, nil
		}
	}
	c := lease.Claim{Name: id, Owner: owner, Expires: nowT.Add(ttl)}
	if err := t.st.onceToken.QueryRow().Scan(&c.Token); err != nil {
		return lease.Claim{}, "", err
	}
	if _, err := t.st.onceClaim.Exec(id, owner, c.Token, nanos(c.Expires)); err != nil {
		return lease.Claim{}, "", err
	}
	return c, lease.OnceClaimed, nil
}

func (s onceStore) RenewOnce(ctx context.Context, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	const op = "sqlite.once.RenewOnce"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, errs.E(op, errs.Invalid, "renewal ttl %v, want more than 0", ttl)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	var held []lease.Claim
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		held = nil
		nowT, _ := d.now()
		exp := nowT.Add(ttl)
		for _, c := range claims {
			n, err := rowsOf(t.st.onceRenew.Exec(c.Name, c.Token, nanos(exp)))
			if err != nil {
				return err
			}
			if n == 1 {
				c.Expires = exp
				held = append(held, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return held, nil
}

func (s onceStore) DoneOnce(ctx context.Context, c lease.Claim) error {
	const op = "sqlite.once.DoneOnce"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error { return d.doneFire(t, op, c) })
	return d.fail(op, err)
}

// doneFire marks c's fire done in t, and now and then forgets fires done
// longer ago than the dedupe window.
func (d *DB) doneFire(t *tx, op string, c lease.Claim) error {
	_, now := d.now()
	n, err := rowsOf(t.st.onceDone.Exec(c.Name, c.Token, now))
	if err != nil {
		return err
	}
	if n == 0 {
		f, ok, err := readFire(t.st.onceGet.QueryRow(c.Name), c.Name)
		switch {
		case err != nil:
			return err
		case !ok:
			return errs.E(op, errs.NotFound, "no fire %q", c.Name)
		case f.done && f.claim.Token == c.Token:
			// Done under this very claim already: a retried call.
			return nil
		}
		return errs.E(op, errs.LeaseLost, "fire %q is not held by claim %d any more", c.Name, c.Token)
	}
	if d.pruneDue() {
		_, err = t.st.oncePrune.Exec(now-int64(d.lim.DedupeWindow), pruneBatch)
	}
	return err
}

func (s onceStore) StaleOnce(ctx context.Context, prefix string, n int) ([]string, error) {
	const op = "sqlite.once.StaleOnce"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errs.E(op, errs.Invalid, "stale fires limit %d, want at least 1", n)
	}
	_, now := d.now()
	ids, err := scanRows(scanString)(d.reads.onceStale.QueryContext(ctx, now, prefix, n))
	if err != nil {
		return nil, d.fail(op, err)
	}
	return ids, nil
}

func scanString(s scanner) (string, error) {
	var v string
	err := s.Scan(&v)
	return v, err
}
