package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
)

// A file is one row of files. Files are put once a file a person uploads
// or the agent sends, so their statements are not kept prepared.
const (
	sqlFilePut    = `INSERT INTO files (id, data, at) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET data = excluded.data, at = excluded.at`
	sqlFileGet    = `SELECT data FROM files WHERE id = ?1`
	sqlFileDelete = `DELETE FROM files WHERE id = ?1`
)

// Files returns the store of file bytes.
func (d *DB) Files() media.Store { return fileStore{d: d} }

type fileStore struct{ d *DB }

var _ media.Store = fileStore{}

func (s fileStore) PutFile(ctx context.Context, id string, data []byte) error {
	const op = "sqlite.PutFile"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := media.CheckFile(op, id, data); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(*tx) error {
		_, now := d.now()
		_, err := d.wconn.ExecContext(context.Background(), sqlFilePut, id, data, now)
		return err
	})
	return d.fail(op, err)
}

func (s fileStore) File(ctx context.Context, id string) ([]byte, error) {
	const op = "sqlite.File"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := media.CheckFileID(op, id); err != nil {
		return nil, err
	}
	var data []byte
	err := d.rdb.QueryRowContext(ctx, sqlFileGet, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.E(op, errs.NotFound, "no file %q", id)
	}
	if err != nil {
		return nil, d.fail(op, err)
	}
	return data, nil
}

func (s fileStore) DeleteFile(ctx context.Context, id string) error {
	const op = "sqlite.DeleteFile"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := media.CheckFileID(op, id); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(*tx) error {
		_, err := d.wconn.ExecContext(context.Background(), sqlFileDelete, id)
		return err
	})
	return d.fail(op, err)
}
