package sqlite

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// poolStore is the DB seen as an llm.PoolStore.
type poolStore struct{ d *DB }

var _ llm.PoolStore = poolStore{}

// Pools returns the store of the model's credential pools.
func (d *DB) Pools() llm.PoolStore { return poolStore{d: d} }

// A key is one row of pool_keys. A use takes the pool's next use number
// from the highest its keys hold (the primary key's range on the pool);
// a mark lengthens the three mark columns and keeps the counts; a
// revival clears them. A
// conversation's key is one row of pool_convs, read as a column of its
// key's row (one statement reads the pool and the conversation's key),
// written in the use's transaction; the rows past llm.StickyTTL are
// pruned every pruneEvery writes.
const (
	sqlPoolRead = `SELECT id, cooling_until, reason, dead_for, uses, last_use,
			id IS (SELECT id FROM pool_convs WHERE pool = ?1 AND conv = ?2 AND used_at > ?3)
		FROM pool_keys WHERE pool = ?1`
	sqlPoolStick = `INSERT INTO pool_convs (pool, conv, id, used_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (pool, conv) DO UPDATE SET id = excluded.id, used_at = excluded.used_at`
	sqlPoolPrune = `DELETE FROM pool_convs WHERE (pool, conv) IN
		(SELECT pool, conv FROM pool_convs WHERE used_at <= ?1 LIMIT ?2)`
	sqlPoolUse = `INSERT INTO pool_keys (pool, id, uses, last_use)
		VALUES (?1, ?2, 1, (SELECT coalesce(max(last_use), 0) + 1 FROM pool_keys WHERE pool = ?1))
		ON CONFLICT (pool, id) DO UPDATE SET uses = uses + 1, last_use = excluded.last_use`
	// A count of ?3 uses moves the pool's use number on by as many.
	sqlPoolCount = `INSERT INTO pool_keys (pool, id, uses, last_use)
		VALUES (?1, ?2, ?3, (SELECT coalesce(max(last_use), 0) + ?3 FROM pool_keys WHERE pool = ?1))
		ON CONFLICT (pool, id) DO UPDATE SET uses = uses + excluded.uses, last_use = excluded.last_use`
	// A mark only lengthens: the later of the two coolings, the dead mark
	// kept unless the new one sets it, the reason the new one's when it
	// kills the key or cools a live one longer. (Every right-hand side
	// reads the row as it was.)
	sqlPoolMark = `INSERT INTO pool_keys (pool, id, cooling_until, reason, dead_for) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (pool, id) DO UPDATE SET
			cooling_until = max(cooling_until, excluded.cooling_until),
			reason = CASE WHEN excluded.dead_for != '' OR (dead_for = '' AND excluded.cooling_until > cooling_until)
				THEN excluded.reason ELSE reason END,
			dead_for = CASE WHEN excluded.dead_for != '' THEN excluded.dead_for ELSE dead_for END`
	sqlPoolRevive = `UPDATE pool_keys SET cooling_until = 0, reason = '', dead_for = '' WHERE pool = ?1 AND id = ?2`
)

func (s poolStore) Now(ctx context.Context) (time.Time, error) {
	if err := s.d.check(ctx, "sqlite.pools.Now"); err != nil {
		return time.Time{}, err
	}
	t, _ := s.d.now()
	return t, nil
}

func (s poolStore) ReadPool(ctx context.Context, pool, conv string) (llm.PoolRead, error) {
	now, n := s.d.now()
	rows, err := readAll(ctx, s.d, "sqlite.pools.ReadPool", scanKeyState, sqlPoolRead, pool, conv, n-int64(llm.StickyTTL))
	r := llm.PoolRead{Now: now, Keys: make([]llm.KeyState, len(rows))}
	for i, row := range rows {
		r.Keys[i] = row.KeyState
		if row.sticky && conv != "" {
			r.Sticky = row.ID
		}
	}
	return r, err
}

// keyRow is a pool_keys row and whether it is the conversation's key.
type keyRow struct {
	llm.KeyState
	sticky bool
}

func scanKeyState(s scanner) (keyRow, error) {
	var r keyRow
	var until int64
	var reason string
	if err := s.Scan(&r.ID, &until, &reason, &r.DeadFor, &r.Uses, &r.LastUse, &r.sticky); err != nil {
		return r, err
	}
	r.Reason = llm.Class(reason)
	if until != 0 {
		r.CoolingUntil = fromNanos(until)
	}
	return r, nil
}

func (s poolStore) MarkKey(ctx context.Context, pool string, st llm.KeyState) error {
	const op = "sqlite.pools.MarkKey"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if pool == "" || st.ID == "" {
		return errs.E(op, errs.Invalid, "a pool key needs a pool name and an id")
	}
	var until int64
	if !st.CoolingUntil.IsZero() {
		until = nanos(st.CoolingUntil)
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlPoolMark, pool, st.ID, until, string(st.Reason), st.DeadFor)
		return err
	}))
}

func (s poolStore) ReviveKey(ctx context.Context, pool, id string) error {
	const op = "sqlite.pools.ReviveKey"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if pool == "" || id == "" {
		return errs.E(op, errs.Invalid, "a pool key needs a pool name and an id")
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlPoolRevive, pool, id)
		return err
	}))
}

func (s poolStore) UseKey(ctx context.Context, pool, id, conv string) error {
	const op = "sqlite.pools.UseKey"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if pool == "" || id == "" {
		return errs.E(op, errs.Invalid, "a pool key needs a pool name and an id")
	}
	// A use count lost to a power cut misleads least_used a little and
	// endangers nothing: bookkeeping.
	return d.fail(op, d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		if _, err := t.st.poolUse.Exec(pool, id); err != nil || conv == "" {
			return err
		}
		_, now := d.now()
		if _, err := t.st.poolStick.Exec(pool, conv, id, now); err != nil {
			return err
		}
		if d.pruneDue() {
			_, err := t.st.poolPrune.Exec(now-int64(llm.StickyTTL), pruneBatch)
			return err
		}
		return nil
	}))
}

func (s poolStore) CountUses(ctx context.Context, pool string, uses []llm.KeyUses) error {
	const op = "sqlite.pools.CountUses"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := llm.CheckUses(op, pool, uses); err != nil {
		return err
	}
	return d.fail(op, d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		for _, u := range uses {
			if _, err := t.st.poolCount.Exec(pool, u.ID, u.N); err != nil {
				return err
			}
		}
		return nil
	}))
}
