package redis

import (
	"context"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// notesKey is a user's notes stream. The user goes in a hash tag, escaped
// like a conversation, so that no two users share a key.
func (db *DB) notesKey(user string) string { return db.prefix + "notes:{" + convTag(user) + "}" }

func (s *sessionStore) AddNote(ctx context.Context, user, text string) (sessions.Note, error) {
	const op = "redis.AddNote"
	if err := sessions.CheckNote(op, user, text, s.db.lim); err != nil {
		return sessions.Note{}, err
	}
	v, err := s.db.run(ctx, op, scriptNoteAdd, []string{s.db.notesKey(user)}, text, s.db.nowArg())
	if err != nil {
		return sessions.Note{}, err
	}
	if len(v) != 2 {
		return sessions.Note{}, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return sessions.Note{ID: str(v[0]), Text: text, At: msTime(v[1])}, nil
}

func (s *sessionStore) Notes(ctx context.Context, user string) ([]sessions.Note, error) {
	const op = "redis.Notes"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := sessions.ValidateUser(op, user); err != nil {
		return nil, err
	}
	raw, err := xrange(ctx, s.db.client, s.db.notesKey(user), "-", 0)
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	out := make([]sessions.Note, len(raw))
	for i, m := range raw {
		out[i] = sessions.Note{ID: m.ID, Text: field(m, "t"), At: msTime(field(m, "at"))}
	}
	return out, nil
}

func (s *sessionStore) DeleteNote(ctx context.Context, user, id string) error {
	const op = "redis.DeleteNote"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := sessions.ValidateUser(op, user); err != nil {
		return err
	}
	// An id that is no stream id names no note; Redis would refuse it.
	if !isStreamID(id) {
		return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
	}
	n, err := s.db.client.XDel(ctx, s.db.notesKey(user), id).Result()
	if err != nil {
		return s.db.fail(op, err)
	}
	if n == 0 {
		return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
	}
	return nil
}
