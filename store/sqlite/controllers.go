package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
)

// controllersStore is the DB seen as a controllers.Store.
type controllersStore struct{ d *DB }

var _ controllers.Store = controllersStore{}

// Controllers returns the store of the session controllers' states.
func (d *DB) Controllers() controllers.Store { return controllersStore{d: d} }

// A state is one row of controllers, its Data kept as it was given; the
// version column is the compare-and-set, and due_at (Unix nanoseconds,
// NULL when the state does not fire on time) is what the partial index
// DueControllers reads orders.
const (
	sqlCtlInsert = `INSERT INTO controllers (conv, kind, id, data, due_at, version, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)`
	// The update matches only the version the writer read.
	sqlCtlUpdate = `UPDATE controllers SET data = ?4, due_at = ?5, version = version + 1, updated_at = ?6
		WHERE conv = ?1 AND kind = ?2 AND id = ?3 AND version = ?7`
	// A commit's write of a state none is stored for skips one stored
	// since.
	sqlCtlInsertIfNone = sqlCtlInsert + ` ON CONFLICT DO NOTHING`
	sqlCtlDelete       = `DELETE FROM controllers WHERE conv = ?1 AND kind = ?2 AND id = ?3 AND version = ?4`
	sqlCtlVersion      = `SELECT version FROM controllers WHERE conv = ?1 AND kind = ?2 AND id = ?3`

	sqlCtlSelect = `SELECT conv, kind, id, data, due_at, version, updated_at FROM controllers`
	sqlCtlGet    = sqlCtlSelect + ` WHERE conv = ?1 AND kind = ?2 AND id = ?3`
	sqlCtlConv   = sqlCtlSelect + ` WHERE conv = ?1 ORDER BY kind, id`
	sqlCtlDue    = sqlCtlSelect + ` WHERE due_at <= ?1 ORDER BY due_at, conv, kind, id LIMIT ?2`
)

func (s controllersStore) Now(ctx context.Context) (time.Time, error) {
	if err := s.d.check(ctx, "sqlite.controllers.Now"); err != nil {
		return time.Time{}, err
	}
	t, _ := s.d.now()
	return t, nil
}

func (s controllersStore) Controller(ctx context.Context, k controllers.Key) (controllers.State, error) {
	const op = "sqlite.controllers.Controller"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return controllers.State{}, err
	}
	st, err := scanController(d.reads.ctlGet.QueryRowContext(ctx, k.Conv, string(k.Kind), k.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return controllers.State{}, errs.E(op, errs.NotFound, "%s has no %s", k.Conv, k.Name())
	}
	if err != nil {
		return controllers.State{}, d.fail(op, err)
	}
	return st, nil
}

func (s controllersStore) Controllers(ctx context.Context, conv string) ([]controllers.State, error) {
	return readAll(ctx, s.d, "sqlite.controllers.Controllers", scanController, sqlCtlConv, conv)
}

func (s controllersStore) DueControllers(ctx context.Context, at time.Time, n int) ([]controllers.State, error) {
	return readAll(ctx, s.d, "sqlite.controllers.DueControllers", scanController, sqlCtlDue, nanos(at), limit(n))
}

func (s controllersStore) PutController(ctx context.Context, st controllers.State) (controllers.State, error) {
	const op = "sqlite.controllers.PutController"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return st, err
	}
	if err := st.Check(op); err != nil {
		return st, err
	}
	k, from := st.Key(), st.Version
	due := dueNanos(st.DueAt)
	var now int64
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now = d.now()
		if from == 0 {
			_, err := t.st.ctlInsert.Exec(k.Conv, string(k.Kind), k.ID, []byte(st.Data), due, now)
			return conflict(op, err, "%s has a %s already: read it and write over its version", k.Conv, k.Name())
		}
		n, err := rowsOf(t.st.ctlUpdate.Exec(k.Conv, string(k.Kind), k.ID, []byte(st.Data), due, now, from))
		if err != nil || n == 1 {
			return err
		}
		cur, err := ctlVersion(t, k)
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.Conflict, "%s's %s was removed after version %d: read it again", k.Conv, k.Name(), from)
		}
		if err != nil {
			return err
		}
		return ctlMovedOn(op, k, from, cur)
	})
	if err != nil {
		return st, d.fail(op, err)
	}
	st.Version, st.UpdatedAt = from+1, fromNanos(now)
	return st, nil
}

func (s controllersStore) DeleteController(ctx context.Context, k controllers.Key, version int64) error {
	const op = "sqlite.controllers.DeleteController"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		n, err := rowsOf(t.exec(sqlCtlDelete, k.Conv, string(k.Kind), k.ID, version))
		if err != nil || n == 1 {
			return err
		}
		cur, err := ctlVersion(t, k)
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "%s has no %s", k.Conv, k.Name())
		}
		if err != nil {
			return err
		}
		return ctlMovedOn(op, k, version, cur)
	}))
}

// putControllerIf writes st inside a turn's commit (controllers.Put)
// when the stored version is still st.Version, and skips it otherwise.
func putControllerIf(t *tx, st controllers.State, now int64) error {
	k := st.Key()
	if st.Version == 0 {
		_, err := t.exec(sqlCtlInsertIfNone, k.Conv, string(k.Kind), k.ID, []byte(st.Data), dueNanos(st.DueAt), now)
		return err
	}
	_, err := t.st.ctlUpdate.Exec(k.Conv, string(k.Kind), k.ID, []byte(st.Data), dueNanos(st.DueAt), now, st.Version)
	return err
}

// dueNanos is a due time as its column keeps it: NULL for none.
func dueNanos(at time.Time) sql.NullInt64 {
	if at.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: nanos(at), Valid: true}
}

// ctlVersion is the version of k's state as the transaction sees it.
func ctlVersion(t *tx, k controllers.Key) (int64, error) {
	var v int64
	err := t.queryRow(sqlCtlVersion, k.Conv, string(k.Kind), k.ID).Scan(&v)
	return v, err
}

// ctlMovedOn is the Conflict of a write over version when the stored
// state is at cur.
func ctlMovedOn(op string, k controllers.Key, version, cur int64) error {
	return errs.E(op, errs.Conflict, "%s's %s moved on from version %d to %d: read it again", k.Conv, k.Name(), version, cur)
}

// scanController reads a row of sqlCtlSelect's columns.
func scanController(s scanner) (controllers.State, error) {
	var st controllers.State
	var kind string
	var data []byte
	var due sql.NullInt64
	var updated int64
	if err := s.Scan(&st.Conv, &kind, &st.ID, &data, &due, &st.Version, &updated); err != nil {
		return st, err
	}
	st.Kind, st.Data, st.UpdatedAt = controllers.Kind(kind), data, fromNanos(updated)
	if due.Valid {
		st.DueAt = fromNanos(due.Int64)
	}
	return st, nil
}
