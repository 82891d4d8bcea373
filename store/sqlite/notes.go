package sqlite

import (
	"context"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

const (
	sqlNoteInsert = `INSERT INTO notes (user_key, text, at) VALUES (?1, ?2, ?3)`
	sqlNoteDelete = `DELETE FROM notes WHERE id = ?1 AND user_key = ?2`
	sqlNotesList  = `SELECT id, text, at FROM notes WHERE user_key = ?1 ORDER BY id`
)

func (s *sessionStore) AddNote(ctx context.Context, user, text string) (sessions.Note, error) {
	const op = "sqlite.AddNote"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return sessions.Note{}, err
	}
	if err := sessions.CheckNote(op, user, text, d.lim); err != nil {
		return sessions.Note{}, err
	}
	var note sessions.Note
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now := d.now()
		r, err := t.st.noteInsert.Exec(user, text, now)
		if err != nil {
			return err
		}
		id, err := r.LastInsertId()
		if err != nil {
			return err
		}
		note = sessions.Note{ID: formatID(id), Text: text, At: fromNanos(now)}
		return nil
	})
	if err != nil {
		return sessions.Note{}, d.fail(op, err)
	}
	return note, nil
}

func (s *sessionStore) Notes(ctx context.Context, user string) ([]sessions.Note, error) {
	const op = "sqlite.Notes"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := sessions.ValidateUser(op, user); err != nil {
		return nil, err
	}
	rows, err := d.reads.notesList.QueryContext(ctx, user)
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	var out []sessions.Note
	for rows.Next() {
		var id, at int64
		var n sessions.Note
		if err := rows.Scan(&id, &n.Text, &at); err != nil {
			return nil, d.fail(op, err)
		}
		n.ID, n.At = formatID(id), fromNanos(at)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s *sessionStore) DeleteNote(ctx context.Context, user, id string) error {
	const op = "sqlite.DeleteNote"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := sessions.ValidateUser(op, user); err != nil {
		return err
	}
	noteID, ok := parseID(id)
	if !ok {
		return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		r, err := t.st.noteDelete.Exec(noteID, user)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errs.E(op, errs.NotFound, "user %q has no note %q", user, id)
		}
		return nil
	})
	return d.fail(op, err)
}
