package redis

import (
	"cmp"
	"context"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
)

// notesKey is a user's notes stream, in the user's shard. The user goes
// in braces, escaped like a conversation, so that no two users share a
// key (in the sharded layout the shard's tag comes first and is the one
// hashed).
func (db *DB) notesKey(user string) string { return db.pfxOf(user) + "notes:{" + convTag(user) + "}" }

// noteStore is the users' notes (notes.Store).
type noteStore struct{ db *DB }

var _ notes.Store = noteStore{}

// Notes returns the users' notes.
func (db *DB) Notes() notes.Store { return noteStore{db: db} }

func (s noteStore) AddNote(ctx context.Context, user, text string) (notes.Note, error) {
	const op = "redis.AddNote"
	if err := notes.Check(op, user, text, s.db.lim.MaxEntryBytes); err != nil {
		return notes.Note{}, err
	}
	id := notes.NewID()
	v, err := s.db.run(ctx, op, scriptNoteAdd, []string{s.db.notesKey(user)}, id, text, s.db.nowArg())
	if err != nil {
		return notes.Note{}, err
	}
	if len(v) != 1 {
		return notes.Note{}, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return notes.Note{ID: id, Text: text, At: msTime(v[0])}, nil
}

func (s noteStore) Notes(ctx context.Context, user string) ([]notes.Note, error) {
	const op = "redis.Notes"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := chat.ValidateUser(op, user); err != nil {
		return nil, err
	}
	raw, err := xrange(ctx, s.db.client, s.db.notesKey(user), "-", 0)
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	out := make([]notes.Note, len(raw))
	for i, m := range raw {
		// A note written before notes were named is named by its entry.
		id := cmp.Or(field(m, "k"), m.ID)
		out[i] = notes.Note{ID: id, Text: field(m, "t"), At: msTime(field(m, "at"))}
	}
	return out, nil
}

func (s noteStore) DeleteNote(ctx context.Context, user, id string) error {
	const op = "redis.DeleteNote"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := chat.ValidateUser(op, user); err != nil {
		return err
	}
	v, err := s.db.run(ctx, op, scriptNoteDel, []string{s.db.notesKey(user)}, id)
	if err != nil {
		return err
	}
	if len(v) != 1 || num(v[0]) == 0 {
		return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
	}
	return nil
}
