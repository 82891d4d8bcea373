package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
)

// A file's bytes (media.Store) are one string, P file:<id>, in the shard
// of its id (P{label}:file:<id> in the sharded layout). Files are put
// once a file a person uploads or the agent sends, and read once a turn
// or a send, so they are plain commands. A turn's media.ReleaseFiles is a
// DEL of them per shard, which q_finish runs or, for files of another
// shard than the conversation's, forwards (writes.go, forward.go).

// Files returns the store of file bytes.
func (db *DB) Files() media.Store { return fileStore{db: db} }

func (db *DB) fileKey(id string) string { return db.pfxOf(id) + "file:" + id }

type fileStore struct{ db *DB }

var _ media.Store = fileStore{}

func (s fileStore) PutFile(ctx context.Context, id string, data []byte) error {
	const op = "redis.PutFile"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := media.CheckFile(op, id, data); err != nil {
		return err
	}
	return s.db.fail(op, s.db.client.Set(ctx, s.db.fileKey(id), data, 0).Err())
}

func (s fileStore) File(ctx context.Context, id string) ([]byte, error) {
	const op = "redis.File"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := media.CheckFileID(op, id); err != nil {
		return nil, err
	}
	data, err := s.db.client.Get(ctx, s.db.fileKey(id)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, errs.E(op, errs.NotFound, "no file %q", id)
	}
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	return data, nil
}

func (s fileStore) DeleteFile(ctx context.Context, id string) error {
	const op = "redis.DeleteFile"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := media.CheckFileID(op, id); err != nil {
		return err
	}
	return s.db.fail(op, s.db.client.Del(ctx, s.db.fileKey(id)).Err())
}
