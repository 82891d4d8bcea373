package sqlite

import (
	"context"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
)

const (
	// A note is named by its key; its row id keeps the order.
	sqlNoteInsert = `INSERT INTO notes (user_key, key, text, at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (user_key, key) DO NOTHING`
	sqlNoteDelete = `DELETE FROM notes WHERE user_key = ?1 AND key = ?2`
	sqlNotesList  = `SELECT key, text, at FROM notes WHERE user_key = ?1 ORDER BY id`
)

// noteStore is the users' notes (notes.Store).
type noteStore struct{ d *DB }

var _ notes.Store = noteStore{}

// Notes returns the users' notes.
func (d *DB) Notes() notes.Store { return noteStore{d: d} }

func (s noteStore) AddNote(ctx context.Context, user, text string) (notes.Note, error) {
	const op = "sqlite.AddNote"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return notes.Note{}, err
	}
	if err := notes.Check(op, user, text, d.lim.MaxEntryBytes); err != nil {
		return notes.Note{}, err
	}
	note := notes.Note{ID: notes.NewID(), Text: text}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now := d.now()
		note.At = fromNanos(now)
		return addNote(t, user, note.ID, text, now)
	})
	if err != nil {
		return notes.Note{}, d.fail(op, err)
	}
	return note, nil
}

// addNote writes user's note id, unless user has a note of that id.
func addNote(t *tx, user, id, text string, now int64) error {
	_, err := t.st.noteInsert.Exec(user, id, text, now)
	return err
}

func (s noteStore) Notes(ctx context.Context, user string) ([]notes.Note, error) {
	const op = "sqlite.Notes"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := chat.ValidateUser(op, user); err != nil {
		return nil, err
	}
	rows, err := d.reads.notesList.QueryContext(ctx, user)
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	var out []notes.Note
	for rows.Next() {
		var at int64
		var n notes.Note
		if err := rows.Scan(&n.ID, &n.Text, &at); err != nil {
			return nil, d.fail(op, err)
		}
		n.At = fromNanos(at)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s noteStore) DeleteNote(ctx context.Context, user, id string) error {
	const op = "sqlite.DeleteNote"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := chat.ValidateUser(op, user); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		n, err := deleteNote(t, user, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
		}
		return nil
	})
	return d.fail(op, err)
}

// deleteNote removes user's note id and says how many it removed.
func deleteNote(t *tx, user, id string) (int64, error) {
	r, err := t.st.noteDelete.Exec(user, id)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}
