package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// A summary row: the conversation, its activity, its queue's length (the
// entries_queue index counts it), its lease as written, and its metadata
// as one JSON object. ?1 is now: a lease that ran out by then is none.
const sqlConvSummary = `SELECT c.conv, c.active_at,
		(SELECT count(*) FROM entries WHERE conv = c.conv),
		CASE WHEN c.lease_expires > ?1 THEN c.lease_worker ELSE '' END,
		CASE WHEN c.lease_expires > ?1 THEN c.lease_expires ELSE 0 END,
		(SELECT json_group_object(key, value) FROM meta WHERE conv = c.conv)
	FROM conversations AS c`

const (
	// The conversations_active index gives them newest first, from the
	// start (?2 the limit) or after the cursor (?3, ?4).
	sqlConvList = sqlConvSummary + `
	WHERE c.active_at > 0 ORDER BY c.active_at DESC, c.conv DESC LIMIT ?2`
	sqlConvListBefore = sqlConvSummary + `
	WHERE c.active_at > 0 AND (c.active_at, c.conv) < (?3, ?4)
	ORDER BY c.active_at DESC, c.conv DESC LIMIT ?2`
	sqlConvOne = sqlConvSummary + `
	WHERE c.conv = ?2 AND c.active_at > 0`

	// The last ?2 messages of a history, newest first, through the
	// (conv, id) index, and how many it holds.
	sqlHistoryTail  = `SELECT body FROM history WHERE conv = ?1 ORDER BY id DESC LIMIT ?2`
	sqlHistoryCount = `SELECT count(*) FROM history WHERE conv = ?1`
)

// convStore is the DB seen as sessions.Conversations.
type convStore struct{ d *DB }

var _ sessions.Conversations = convStore{}

// Conversations lists the conversations by their last activity.
func (d *DB) Conversations() sessions.Conversations { return convStore{d: d} }

func (s convStore) Conversations(ctx context.Context, q sessions.ConvQuery) ([]sessions.ConvSummary, error) {
	const op = "sqlite.Conversations"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := q.Check(op); err != nil {
		return nil, err
	}
	_, now := d.now()
	var (
		rows *sql.Rows
		err  error
	)
	if q.Before == "" {
		rows, err = d.reads.convList.QueryContext(ctx, now, q.Limit)
	} else {
		at, conv, ok := parseConvCursor(q.Before)
		if !ok {
			return nil, errs.E(op, errs.Invalid, "%q is not a conversations cursor", q.Before)
		}
		rows, err = d.reads.convListBefore.QueryContext(ctx, now, q.Limit, at, conv)
	}
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	out := []sessions.ConvSummary{}
	for rows.Next() {
		c, err := scanConv(op, rows)
		if err != nil {
			return nil, d.fail(op, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s convStore) Conversation(ctx context.Context, conv string) (sessions.ConvSummary, error) {
	const op = "sqlite.Conversation"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return sessions.ConvSummary{}, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return sessions.ConvSummary{}, err
	}
	_, now := d.now()
	c, err := scanConv(op, d.reads.convOne.QueryRowContext(ctx, now, conv))
	if errors.Is(err, sql.ErrNoRows) {
		return c, errs.E(op, errs.NotFound, "no conversation %q", conv)
	}
	return c, d.fail(op, err)
}

// scanConv reads one summary row.
func scanConv(op string, row interface{ Scan(...any) error }) (sessions.ConvSummary, error) {
	var (
		c       sessions.ConvSummary
		at, exp int64
		meta    sql.NullString
	)
	if err := row.Scan(&c.Conv, &at, &c.Queued, &c.Worker, &exp, &meta); err != nil {
		return c, err
	}
	c.LastActive = fromNanos(at)
	if exp > 0 {
		c.Expires = fromNanos(exp)
	}
	if meta.Valid && meta.String != "" {
		if err := json.Unmarshal([]byte(meta.String), &c.Meta); err != nil {
			return c, errs.Wrap(op, errs.Internal, err)
		}
		// A running-turn mark an older version stored (see Meta).
		delete(c.Meta, sessions.ConvMetaTurn)
	}
	c.Cursor = strconv.FormatInt(at, 10) + ":" + c.Conv
	return c, nil
}

// parseConvCursor reads a cursor scanConv made: the activity in
// nanoseconds, a colon, the conversation.
func parseConvCursor(s string) (int64, string, bool) {
	n, conv, ok := strings.Cut(s, ":")
	at, err := strconv.ParseInt(n, 10, 64)
	return at, conv, ok && err == nil && at > 0 && conv != ""
}

func (s convStore) RecentHistory(ctx context.Context, conv string, n int) ([]chat.Message, int, error) {
	const op = "sqlite.RecentHistory"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, 0, err
	}
	if err := sessions.CheckRecent(op, conv, n); err != nil {
		return nil, 0, err
	}
	// One read transaction, so the count and the messages agree.
	tx, err := d.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, d.fail(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	var total int
	if err := tx.StmtContext(ctx, d.reads.historyCount).QueryRowContext(ctx, conv).Scan(&total); err != nil {
		return nil, 0, d.fail(op, err)
	}
	rows, err := tx.StmtContext(ctx, d.reads.historyTail).QueryContext(ctx, conv, n)
	if err != nil {
		return nil, 0, d.fail(op, err)
	}
	out, err := d.readMessages(op, rows)
	if err != nil {
		return nil, 0, err
	}
	slices.Reverse(out)
	return out, total, nil
}
