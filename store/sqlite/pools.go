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
// a mark writes the three mark columns and keeps the counts.
const (
	sqlPoolRead = `SELECT id, cooling_until, reason, dead_for, uses, last_use FROM pool_keys WHERE pool = ?1`
	sqlPoolUse  = `INSERT INTO pool_keys (pool, id, uses, last_use)
		VALUES (?1, ?2, 1, (SELECT coalesce(max(last_use), 0) + 1 FROM pool_keys WHERE pool = ?1))
		ON CONFLICT (pool, id) DO UPDATE SET uses = uses + 1, last_use = excluded.last_use`
	sqlPoolMark = `INSERT INTO pool_keys (pool, id, cooling_until, reason, dead_for) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (pool, id) DO UPDATE SET cooling_until = excluded.cooling_until,
			reason = excluded.reason, dead_for = excluded.dead_for`
)

func (s poolStore) Now(ctx context.Context) (time.Time, error) {
	if err := s.d.check(ctx, "sqlite.pools.Now"); err != nil {
		return time.Time{}, err
	}
	t, _ := s.d.now()
	return t, nil
}

func (s poolStore) KeyStates(ctx context.Context, pool string) (time.Time, []llm.KeyState, error) {
	now, _ := s.d.now()
	states, err := readAll(ctx, s.d, "sqlite.pools.KeyStates", scanKeyState, sqlPoolRead, pool)
	return now, states, err
}

func scanKeyState(s scanner) (llm.KeyState, error) {
	var st llm.KeyState
	var until int64
	var reason string
	if err := s.Scan(&st.ID, &until, &reason, &st.DeadFor, &st.Uses, &st.LastUse); err != nil {
		return st, err
	}
	st.Reason = llm.Class(reason)
	if until != 0 {
		st.CoolingUntil = fromNanos(until)
	}
	return st, nil
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

func (s poolStore) UseKey(ctx context.Context, pool, id string) error {
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
		_, err := t.st.poolUse.Exec(pool, id)
		return err
	}))
}
