package sqlite

import (
	"context"
	"time"

	"github.com/heraldgw/herald/adapters"
)

// A cursor is one row of cursors. Cursors are put at most about once a
// second per channel (the adapter spaces them), so their statements are
// not kept prepared.
const (
	sqlCursorPut = `INSERT INTO cursors (platform, channel, value, at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (platform, channel) DO UPDATE SET value = excluded.value, at = excluded.at`
	sqlCursorsSince = `SELECT channel, value FROM cursors WHERE platform = ?1 AND at > ?2`
)

// Cursors returns the adapters' receive cursors.
func (d *DB) Cursors() adapters.Cursors { return cursorStore{d: d} }

type cursorStore struct{ d *DB }

var _ adapters.Cursors = cursorStore{}

func (s cursorStore) PutCursor(ctx context.Context, platform, channel, value string) error {
	const op = "sqlite.PutCursor"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := adapters.CheckCursor(op, platform, channel, value); err != nil {
		return err
	}
	// A cursor lost on a power cut costs a backfill that reads further
	// back, which the dedupe keys make harmless (see bookkeeping).
	err := d.w.do(ctx, op, bookkeeping, func(*tx) error {
		_, now := d.now()
		_, err := d.wconn.ExecContext(context.Background(), sqlCursorPut, platform, channel, value, now)
		return err
	})
	return d.fail(op, err)
}

func (s cursorStore) Cursors(ctx context.Context, platform string, within time.Duration) (map[string]string, error) {
	const op = "sqlite.Cursors"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := adapters.CheckCursors(op, platform, within); err != nil {
		return nil, err
	}
	_, now := d.now()
	rows, err := d.rdb.QueryContext(ctx, sqlCursorsSince, platform, now-within.Nanoseconds())
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var channel, value string
		if err := rows.Scan(&channel, &value); err != nil {
			return nil, d.fail(op, err)
		}
		out[channel] = value
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}
