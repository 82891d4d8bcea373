package sqlite

import (
	"context"
	"encoding/json"
	"time"

	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/errs"
)

// instanceStore is the DB seen as an instances.Store. An instance is one
// row of instances, kept whole with its last_seen; a beat replaces it
// and drops the rows that ran out. A beat comes every few seconds from
// each process, so the statements are not kept prepared.
type instanceStore struct{ d *DB }

var _ instances.Store = instanceStore{}

// Instances returns the roll of gateway processes.
func (d *DB) Instances() instances.Store { return instanceStore{d: d} }

const (
	sqlInstBeat = `INSERT INTO instances (id, expires, body) VALUES (?1, ?2, ?3)
		ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, body = excluded.body`
	sqlInstPrune = `DELETE FROM instances WHERE expires <= ?1`
	sqlInstLeave = `DELETE FROM instances WHERE id = ?1`
	sqlInstList  = `SELECT body FROM instances WHERE expires > ?1 ORDER BY id`
)

func (s instanceStore) Beat(ctx context.Context, in instances.Instance, ttl time.Duration) error {
	const op = "sqlite.instances.Beat"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := instances.CheckBeat(op, in, ttl); err != nil {
		return err
	}
	now, n := d.now()
	in.LastSeen = now
	body, err := json.Marshal(in)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	// A beat lost to a power cut is made good by the next one.
	return d.fail(op, d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		if _, err := t.exec(sqlInstPrune, n); err != nil {
			return err
		}
		_, err := t.exec(sqlInstBeat, in.ID, n+ttl.Nanoseconds(), body)
		return err
	}))
}

func (s instanceStore) Leave(ctx context.Context, id string) error {
	const op = "sqlite.instances.Leave"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := instances.CheckID(op, id); err != nil {
		return err
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlInstLeave, id)
		return err
	}))
}

func (s instanceStore) Instances(ctx context.Context) ([]instances.Instance, error) {
	_, n := s.d.now()
	return readAll(ctx, s.d, "sqlite.instances.Instances", scanJSON[instances.Instance], sqlInstList, n)
}
