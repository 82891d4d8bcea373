package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

const (
	// The item id is unique per conversation: a conflict is the resend
	// of an item already there, which adds nothing.
	sqlTimelineInsert = `INSERT INTO timeline (conv, item_id, kind, text, at, reply_to, meta, files) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
		ON CONFLICT (conv, item_id) DO NOTHING`
	sqlTimelineCursor = `SELECT cursor FROM timeline WHERE conv = ?1 AND item_id = ?2`
	// The oldest items from the (keep+1)th newest back, found through
	// the (conv, cursor) index, at most 1000 of them: a bound set on a
	// long timeline is reached over several appends, none of which holds
	// the write lock for long.
	sqlTimelineTrim = `DELETE FROM timeline WHERE cursor IN (SELECT cursor FROM timeline
		WHERE conv = ?1 AND cursor <= (SELECT cursor FROM timeline WHERE conv = ?1 ORDER BY cursor DESC LIMIT 1 OFFSET ?2)
		ORDER BY cursor LIMIT 1000)`
	sqlTimelineRead = `SELECT cursor, item_id, kind, text, at, reply_to, meta, files FROM timeline
		WHERE conv = ?1 AND cursor > ?2 ORDER BY cursor LIMIT ?3`
	sqlTimelineEnd = `SELECT cursor FROM timeline WHERE conv = ?1 ORDER BY cursor DESC LIMIT 1`
)

// timelineStore is what was delivered to the local API's conversations
// (sessions.Timeline).
type timelineStore struct{ d *DB }

var _ sessions.Timeline = timelineStore{}

// Timeline returns the local API's conversations' timelines.
func (d *DB) Timeline() sessions.Timeline { return timelineStore{d: d} }

func (s timelineStore) AppendTimeline(ctx context.Context, item sessions.TimelineItem) (string, error) {
	const op = "sqlite.AppendTimeline"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return "", err
	}
	if err := item.Check(op, d.lim); err != nil {
		return "", err
	}
	var cursor int64
	meta, files := sessions.EncodeMeta(item.Meta), sessions.EncodeFiles(item.Files)
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now := d.now()
		r, err := t.st.timelineInsert.Exec(item.Conv, item.ID, item.Kind, item.Text, now, item.ReplyTo, meta, files)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		if n == 1 {
			if cursor, err = r.LastInsertId(); err != nil || d.lim.TimelineMax <= 0 {
				return err
			}
			_, err = t.st.timelineTrim.Exec(item.Conv, d.lim.TimelineMax)
			return err
		}
		return t.st.timelineCursor.QueryRow(item.Conv, item.ID).Scan(&cursor)
	})
	if err != nil {
		return "", d.fail(op, err)
	}
	return formatID(cursor), nil
}

func (s timelineStore) ReadTimeline(ctx context.Context, conv, after string, count int) ([]sessions.TimelineItem, error) {
	const op = "sqlite.ReadTimeline"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	var from int64
	if after != "" {
		var ok bool
		if from, ok = parseID(after); !ok {
			return nil, errs.E(op, errs.Invalid, "%q is not a timeline cursor", after)
		}
	}
	rows, err := d.reads.timelineRead.QueryContext(ctx, conv, from, limit(count))
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	var out []sessions.TimelineItem
	for rows.Next() {
		var (
			cursor, at  int64
			meta, files string
			it          = sessions.TimelineItem{Conv: conv}
		)
		if err := rows.Scan(&cursor, &it.ID, &it.Kind, &it.Text, &at, &it.ReplyTo, &meta, &files); err != nil {
			return nil, d.fail(op, err)
		}
		// Meta or files that cannot be read are left out: the item
		// still shows.
		it.Meta, _ = sessions.DecodeMeta(meta)
		it.Files, _ = sessions.DecodeFiles(files)
		it.Cursor, it.At = formatID(cursor), fromNanos(at)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s timelineStore) TimelineEnd(ctx context.Context, conv string) (string, error) {
	const op = "sqlite.TimelineEnd"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return "", err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return "", err
	}
	var cursor int64
	err := d.reads.timelineEnd.QueryRowContext(ctx, conv).Scan(&cursor)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", d.fail(op, err)
	}
	return formatID(cursor), nil
}
