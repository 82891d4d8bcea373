package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// kanbanStore is the DB seen as a kanban.Store.
type kanbanStore struct{ d *DB }

var _ kanban.Store = kanbanStore{}

// Kanban returns the store of kanban boards.
func (d *DB) Kanban() kanban.Store { return kanbanStore{d: d} }

// A card is one row of kanban_cards: its encoding (without its links,
// which are rows of kanban_links) beside the columns it is selected and
// ordered by; the version column is the compare-and-set Apply checks.
// An event's cursor is its seq.
const (
	sqlKbBoardPut = `INSERT INTO kanban_boards (slug, board) VALUES (?1, ?2)
		ON CONFLICT (slug) DO UPDATE SET board = excluded.board`
	sqlKbBoardGet = `SELECT board FROM kanban_boards WHERE slug = ?1`
	sqlKbBoards   = `SELECT board FROM kanban_boards ORDER BY slug`

	sqlKbCardInsert = `INSERT INTO kanban_cards (id, board, status, priority, created_at, idem_key, version, card)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)`
	sqlKbCardUpdate = `UPDATE kanban_cards SET board = ?2, status = ?3, priority = ?4, created_at = ?5, idem_key = ?6,
		version = ?7, card = ?8 WHERE id = ?1 AND version = ?9`
	// A card that keeps its board and idempotency key (nearly every
	// write) leaves them out of the SET: SQLite rewrites an index whose
	// columns a SET names, values the same or not, so the full update
	// also deletes and re-checks the card's entry in the unique index
	// of its key. When it matches no row (the board or key changed, or
	// the version moved on), the full update decides.
	sqlKbCardUpdateKept = `UPDATE kanban_cards SET status = ?3, priority = ?4, created_at = ?5,
		version = ?7, card = ?8 WHERE id = ?1 AND version = ?9 AND board = ?2 AND idem_key = ?6`
	sqlKbCardVersion = `SELECT version FROM kanban_cards WHERE id = ?1`
	// A card read by its id is one statement, so one read transaction:
	// its row and its links, as JSON arrays.
	sqlKbCardGet = `SELECT version, card,
		(SELECT json_group_array(parent) FROM (SELECT parent FROM kanban_links WHERE child = ?1 ORDER BY parent)),
		(SELECT json_group_array(child) FROM (SELECT child FROM kanban_links WHERE parent = ?1 ORDER BY child))
		FROM kanban_cards WHERE id = ?1`
	sqlKbCardByKey  = `SELECT version, card FROM kanban_cards WHERE board = ?1 AND idem_key = ?2 AND idem_key != ''`
	sqlKbCardsOrder = ` ORDER BY priority DESC, created_at, id`

	sqlKbLink       = `INSERT OR IGNORE INTO kanban_links (parent, child) VALUES (?1, ?2)`
	sqlKbUnlink     = `DELETE FROM kanban_links WHERE parent = ?1 AND child = ?2`
	sqlKbParents    = `SELECT parent FROM kanban_links WHERE child = ?1 ORDER BY parent`
	sqlKbChildren   = `SELECT child FROM kanban_links WHERE parent = ?1 ORDER BY child`
	sqlKbComment    = `INSERT INTO kanban_comments (id, card, at, comment) VALUES (?1, ?2, ?3, ?4)`
	sqlKbComments   = `SELECT comment FROM kanban_comments WHERE card = ?1 ORDER BY at, id`
	sqlKbAttach     = `INSERT INTO kanban_attachments (card, name, created_at, attachment) VALUES (?1, ?2, ?3, ?4)`
	sqlKbAttached   = `SELECT attachment FROM kanban_attachments WHERE card = ?1 ORDER BY created_at, name`
	sqlKbStatus     = `SELECT status FROM kanban_cards WHERE id = ?1`
	sqlKbEventsFrom = `SELECT seq, event FROM kanban_events WHERE board = ?1 AND seq > ?2`

	sqlKbSubInsert = `INSERT INTO kanban_subscriptions (id, board, version, sub) VALUES (?1, ?2, 1, ?3)`
	sqlKbSubUpdate = `UPDATE kanban_subscriptions SET board = ?2, version = ?3, sub = ?4 WHERE id = ?1 AND version = ?5`
	sqlKbSubExists = `SELECT 1 FROM kanban_subscriptions WHERE id = ?1`
	sqlKbSubs      = `SELECT version, sub FROM kanban_subscriptions WHERE (?1 = '' OR board = ?1) ORDER BY board, id`
	sqlKbSubDelete = `DELETE FROM kanban_subscriptions WHERE id = ?1`

	sqlKbLaneInsert = `INSERT INTO kanban_lanes (lane, version, state) VALUES (?1, 1, ?2)`
	sqlKbLaneUpdate = `UPDATE kanban_lanes SET version = ?2, state = ?3 WHERE lane = ?1 AND version = ?4`
	sqlKbLaneExists = `SELECT 1 FROM kanban_lanes WHERE lane = ?1`
	sqlKbLanes      = `SELECT version, state FROM kanban_lanes ORDER BY lane`
)

// A card's runs and events are found by its row (card_row), then its id;
// a run or event of no card has row 0 (see schema 30).
var (
	sqlKbRunPut = `INSERT INTO kanban_runs (card_row, card, id, started, run) VALUES (` + kbCardRow("?2") + `, ?2, ?1, ?3, ?4)
		ON CONFLICT (card_row, card, id) DO UPDATE SET started = excluded.started, run = excluded.run`
	sqlKbRuns  = `SELECT run FROM kanban_runs WHERE ` + kbOfCard("?1") + ` ORDER BY started, id`
	sqlKbEvent = `INSERT INTO kanban_events (board, card, card_row, event) VALUES (?1, ?2, ` + kbCardRow("?2") + `, ?3)`
)

// kbCardRow is the row of the card whose id is the parameter p, 0 when
// there is no such card.
func kbCardRow(p string) string {
	return `COALESCE((SELECT row FROM kanban_cards WHERE id = ` + p + `), 0)`
}

// kbOfCard matches the runs or events of the card whose id is the
// parameter p.
func kbOfCard(p string) string { return `card_row = ` + kbCardRow(p) + ` AND card = ` + p }

func (s kanbanStore) Now(ctx context.Context) (time.Time, error) {
	if err := s.d.check(ctx, "sqlite.kanban.Now"); err != nil {
		return time.Time{}, err
	}
	t, _ := s.d.now()
	return t, nil
}

func (s kanbanStore) PutBoard(ctx context.Context, b kanban.Board) error {
	const op = "sqlite.kanban.PutBoard"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := kanban.CheckSlug(op, b.Slug); err != nil {
		return err
	}
	body, err := json.Marshal(b)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlKbBoardPut, b.Slug, body)
		return err
	}))
}

func (s kanbanStore) Boards(ctx context.Context) ([]kanban.Board, error) {
	const op = "sqlite.kanban.Boards"
	return readAll(ctx, s.d, op, scanJSON[kanban.Board], sqlKbBoards)
}

func (s kanbanStore) Board(ctx context.Context, slug string) (kanban.Board, error) {
	const op = "sqlite.kanban.Board"
	bs, err := readAll(ctx, s.d, op, scanJSON[kanban.Board], sqlKbBoardGet, slug)
	if err == nil && len(bs) == 0 {
		err = errs.E(op, errs.NotFound, "no board %q", slug)
	}
	if err != nil {
		return kanban.Board{}, err
	}
	return bs[0], nil
}

// encodeCard encodes k as stored: without its links and its version,
// which have columns and rows of their own.
func encodeCard(op string, k kanban.Card) ([]byte, error) {
	k.Parents, k.Children, k.Version = nil, nil, 0
	b, err := json.Marshal(k)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	return b, nil
}

func (s kanbanStore) Apply(ctx context.Context, c kanban.Change) ([]kanban.Event, error) {
	const op = "sqlite.kanban.Apply"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := kanban.CheckChange(op, c); err != nil {
		return nil, err
	}
	if c.Stamp {
		// The store's clock is the process's: read as the write is
		// handed to the writer, before the encoding that carries it.
		t, _ := d.now()
		c = c.Stamped(t)
	}
	// A claim commits without waiting for the disk; the next durable
	// commit carries it (see bookkeeping).
	mode := durable
	if c.Bookkeeping {
		mode = bookkeeping
	}
	bodies := make([][]byte, len(c.Cards))
	for i, w := range c.Cards {
		b, err := encodeCard(op, w.Card)
		if err != nil {
			return nil, err
		}
		bodies[i] = b
	}
	var events []kanban.Event
	err := d.w.do(ctx, op, mode, func(t *tx) error {
		events = nil
		nowT, now := d.now()
		for i, w := range c.Cards {
			k := w.Card
			args := []any{k.ID, k.Board, string(k.Status), k.Priority, nanos(k.CreatedAt), k.IdempotencyKey, w.From + 1, bodies[i], w.From}
			if w.From == 0 {
				if _, err := t.st.kbCardInsert.Exec(args[:8]...); err != nil {
					return conflict(op, err, "card %s exists, or another card of board %s has idempotency key %q", k.ID, k.Board, k.IdempotencyKey)
				}
				continue
			}
			n, err := rowsOf(t.st.kbCardUpdateKept.Exec(args...))
			if err == nil && n == 0 {
				n, err = rowsOf(t.st.kbCardUpdate.Exec(args...))
			}
			if err != nil {
				return conflict(op, err, "another card of board %s has idempotency key %q", k.Board, k.IdempotencyKey)
			}
			if n == 0 {
				return errs.E(op, errs.Conflict, "card %s moved on from version %d: read it again", k.ID, w.From)
			}
		}
		for _, v := range c.Check {
			var cur int64
			err := t.st.kbCardVersion.QueryRow(v.ID).Scan(&cur)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && cur != v.Version) {
				return errs.E(op, errs.Conflict, "card %s moved on from version %d: read it again", v.ID, v.Version)
			}
			if err != nil {
				return err
			}
		}
		for _, l := range c.Link {
			if _, err := t.exec(sqlKbLink, l.Parent, l.Child); err != nil {
				return err
			}
		}
		for _, l := range c.Unlink {
			if _, err := t.exec(sqlKbUnlink, l.Parent, l.Child); err != nil {
				return err
			}
		}
		for _, cm := range c.Comments {
			if cm.At.IsZero() {
				cm.At = nowT
			}
			b, err := json.Marshal(cm)
			if err != nil {
				return errs.Wrap(op, errs.Invalid, err)
			}
			if _, err := t.exec(sqlKbComment, cm.ID, cm.Card, nanos(cm.At), b); err != nil {
				return conflict(op, err, "comment %s exists", cm.ID)
			}
		}
		for _, a := range c.Attachments {
			if err := attachable(t, op, a); err != nil {
				return err
			}
			if a.CreatedAt.IsZero() {
				a.CreatedAt = nowT
			}
			a.Path = ""
			b, err := json.Marshal(a)
			if err != nil {
				return errs.Wrap(op, errs.Invalid, err)
			}
			if _, err := t.exec(sqlKbAttach, a.Card, a.Name, nanos(a.CreatedAt), b); err != nil {
				return conflict(op, err, "card %s has an attachment named %s", a.Card, a.Name)
			}
		}
		for _, r := range c.Runs {
			b, err := json.Marshal(r)
			if err != nil {
				return errs.Wrap(op, errs.Invalid, err)
			}
			if _, err := t.st.kbRunPut.Exec(r.ID, r.Card, nanos(r.Started), b); err != nil {
				return err
			}
		}
		for _, e := range c.Events {
			if e.At.IsZero() {
				e.At = fromNanos(now)
			}
			e.Cursor = ""
			b, err := json.Marshal(e)
			if err != nil {
				return errs.Wrap(op, errs.Invalid, err)
			}
			res, err := t.st.kbEvent.Exec(e.Board, e.Card, b)
			if err != nil {
				return err
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return err
			}
			e.Cursor = formatID(seq)
			events = append(events, e)
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return events, nil
}

// attachable refuses, with Invalid, an attachment of a card that is not
// there or is archived, as the transaction has left it so far (the
// change's cards are written first).
func attachable(t *tx, op string, a kanban.Attachment) error {
	var status string
	err := t.queryRow(sqlKbStatus, a.Card).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return errs.E(op, errs.Invalid, "attachment %s: no card %s", a.Name, a.Card)
	case err != nil:
		return err
	case kanban.Status(status) == kanban.StatusArchived:
		return errs.E(op, errs.Invalid, "attachment %s: card %s is archived", a.Name, a.Card)
	}
	return nil
}

func (s kanbanStore) Card(ctx context.Context, id string) (kanban.Card, error) {
	const op = "sqlite.kanban.Card"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return kanban.Card{}, err
	}
	var k kanban.Card
	var version int64
	var body, parents, children []byte
	err := d.reads.kbCardGet.QueryRowContext(ctx, id).Scan(&version, &body, &parents, &children)
	if errors.Is(err, sql.ErrNoRows) {
		return k, errs.E(op, errs.NotFound, "no card %s", id)
	}
	if err != nil {
		return k, d.fail(op, err)
	}
	if err := json.Unmarshal(body, &k); err != nil {
		return k, errs.Wrap(op, errs.Internal, err)
	}
	k.Version = version
	if k.Parents, err = linkIDs(parents); err == nil {
		k.Children, err = linkIDs(children)
	}
	if err != nil {
		return k, errs.Wrap(op, errs.Internal, err)
	}
	return k, nil
}

// linkIDs decodes a JSON array of card ids: nil for none.
func linkIDs(b []byte) ([]string, error) {
	if string(b) == "[]" {
		return nil, nil
	}
	var ids []string
	return ids, json.Unmarshal(b, &ids)
}

func (s kanbanStore) CardByKey(ctx context.Context, board, key string) (kanban.Card, error) {
	const op = "sqlite.kanban.CardByKey"
	cards, err := s.cards(ctx, op, sqlKbCardByKey, board, key)
	if err == nil && len(cards) == 0 {
		err = errs.E(op, errs.NotFound, "no card of board %s with key %s", board, key)
	}
	if err != nil {
		return kanban.Card{}, err
	}
	return cards[0], nil
}

func (s kanbanStore) Cards(ctx context.Context, q kanban.Query) ([]kanban.Card, error) {
	const op = "sqlite.kanban.Cards"
	if q.Board == "" {
		return nil, errs.E(op, errs.Invalid, "a card query needs a board")
	}
	statuses := q.StatusList()
	query := `SELECT version, card FROM kanban_cards WHERE board = ? AND status IN (?` + strings.Repeat(`, ?`, len(statuses)-1) + `)`
	args := []any{q.Board}
	for _, st := range statuses {
		args = append(args, string(st))
	}
	all, err := s.cards(ctx, op, query+sqlKbCardsOrder, args...)
	if err != nil {
		return nil, err
	}
	return q.Trim(all), nil
}

// cards reads the cards query selects, and their links, as they stood
// at one instant (one read transaction). A card's own reads and writes
// are prepared once: parsing them was a third of a card's cost in
// herald's CPU.
func (s kanbanStore) cards(ctx context.Context, op string, query string, args ...any) ([]kanban.Card, error) {
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	tx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, query, args...)
	cards, err := scanRows(scanCard)(rows, err)
	if err != nil {
		return nil, d.fail(op, err)
	}
	parents, children := tx.StmtContext(ctx, d.reads.kbParents), tx.StmtContext(ctx, d.reads.kbChildren)
	for i := range cards {
		k := &cards[i]
		if k.Parents, err = scanRows(scanString)(parents.QueryContext(ctx, k.ID)); err != nil {
			return nil, d.fail(op, err)
		}
		if k.Children, err = scanRows(scanString)(children.QueryContext(ctx, k.ID)); err != nil {
			return nil, d.fail(op, err)
		}
	}
	return cards, nil
}

func scanCard(s scanner) (kanban.Card, error) {
	var k kanban.Card
	var version int64
	var body []byte
	if err := s.Scan(&version, &body); err != nil {
		return k, err
	}
	if err := json.Unmarshal(body, &k); err != nil {
		return k, err
	}
	k.Version = version
	return k, nil
}

// scanJSON reads a row of one encoded value.
func scanJSON[T any](s scanner) (T, error) {
	var v T
	var body []byte
	if err := s.Scan(&body); err != nil {
		return v, err
	}
	return v, json.Unmarshal(body, &v)
}

// readAll runs query on the read pool and reads each row with scan.
func readAll[T any](ctx context.Context, d *DB, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	out, err := scanRows(scan)(d.rdb.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s kanbanStore) Comments(ctx context.Context, card string) ([]kanban.Comment, error) {
	return readAll(ctx, s.d, "sqlite.kanban.Comments", scanJSON[kanban.Comment], sqlKbComments, card)
}

func (s kanbanStore) Attachments(ctx context.Context, card string) ([]kanban.Attachment, error) {
	return readAll(ctx, s.d, "sqlite.kanban.Attachments", scanJSON[kanban.Attachment], sqlKbAttached, card)
}

func (s kanbanStore) Runs(ctx context.Context, card string) ([]kanban.Run, error) {
	return readAll(ctx, s.d, "sqlite.kanban.Runs", scanJSON[kanban.Run], sqlKbRuns, card)
}

func (s kanbanStore) Events(ctx context.Context, q kanban.EventQuery) ([]kanban.Event, error) {
	const op = "sqlite.kanban.Events"
	if q.Board == "" {
		return nil, errs.E(op, errs.Invalid, "an event query needs a board")
	}
	var after int64
	if q.After != "" {
		n, ok := parseID(q.After)
		if !ok {
			return nil, errs.E(op, errs.Invalid, "cursor %q is not one this store gave", q.After)
		}
		after = n
	}
	query, args := sqlKbEventsFrom, []any{q.Board, after}
	if q.Card != "" {
		query += ` AND ` + kbOfCard("?3")
		args = append(args, q.Card)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 500
	}
	query += ` ORDER BY seq LIMIT ` + formatID(int64(limit))
	return readAll(ctx, s.d, op, func(s scanner) (kanban.Event, error) {
		var e kanban.Event
		var seq int64
		var body []byte
		if err := s.Scan(&seq, &body); err != nil {
			return e, err
		}
		err := json.Unmarshal(body, &e)
		e.Cursor = formatID(seq)
		return e, err
	}, query, args...)
}

func (s kanbanStore) PutSubscription(ctx context.Context, sub kanban.Subscription) (kanban.Subscription, error) {
	const op = "sqlite.kanban.PutSubscription"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return sub, err
	}
	if err := kanban.CheckSubscription(op, sub); err != nil {
		return sub, err
	}
	from := sub.Version
	sub.Version = 0
	body, err := json.Marshal(sub)
	if err != nil {
		return sub, errs.Wrap(op, errs.Invalid, err)
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		if from == 0 {
			_, err := t.exec(sqlKbSubInsert, sub.ID, sub.Board, body)
			return conflict(op, err, "subscription %s exists", sub.ID)
		}
		n, err := rowsOf(t.exec(sqlKbSubUpdate, sub.ID, sub.Board, from+1, body, from))
		if err != nil || n == 1 {
			return err
		}
		var one int
		if err := t.queryRow(sqlKbSubExists, sub.ID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "no subscription %s", sub.ID)
		} else if err != nil {
			return err
		}
		return errs.E(op, errs.Conflict, "subscription %s moved on from version %d: read it again", sub.ID, from)
	})
	if err != nil {
		return sub, d.fail(op, err)
	}
	sub.Version = from + 1
	return sub, nil
}

func (s kanbanStore) Subscriptions(ctx context.Context, board string) ([]kanban.Subscription, error) {
	return readAll(ctx, s.d, "sqlite.kanban.Subscriptions", func(s scanner) (kanban.Subscription, error) {
		var sub kanban.Subscription
		var version int64
		var body []byte
		if err := s.Scan(&version, &body); err != nil {
			return sub, err
		}
		err := json.Unmarshal(body, &sub)
		sub.Version = version
		return sub, err
	}, sqlKbSubs, board)
}

func (s kanbanStore) RemoveSubscription(ctx context.Context, id string) error {
	const op = "sqlite.kanban.RemoveSubscription"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	return d.fail(op, d.w.do(ctx, op, durable, func(t *tx) error {
		n, err := rowsOf(t.exec(sqlKbSubDelete, id))
		if err == nil && n == 0 {
			err = errs.E(op, errs.NotFound, "no subscription %s", id)
		}
		return err
	}))
}

func (s kanbanStore) PutLane(ctx context.Context, l kanban.LaneState) (kanban.LaneState, error) {
	const op = "sqlite.kanban.PutLane"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return l, err
	}
	if err := kanban.CheckLaneState(op, l); err != nil {
		return l, err
	}
	from := l.Version
	l.Version = 0
	body, err := json.Marshal(l)
	if err != nil {
		return l, errs.Wrap(op, errs.Invalid, err)
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		if from == 0 {
			_, err := t.exec(sqlKbLaneInsert, l.Lane, body)
			return conflict(op, err, "lane %s has a state", l.Lane)
		}
		n, err := rowsOf(t.exec(sqlKbLaneUpdate, l.Lane, from+1, body, from))
		if err != nil || n == 1 {
			return err
		}
		var one int
		if err := t.queryRow(sqlKbLaneExists, l.Lane).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "lane %s has no state", l.Lane)
		} else if err != nil {
			return err
		}
		return errs.E(op, errs.Conflict, "lane %s moved on from version %d: read it again", l.Lane, from)
	})
	if err != nil {
		return l, d.fail(op, err)
	}
	l.Version = from + 1
	return l, nil
}

func (s kanbanStore) Lanes(ctx context.Context) ([]kanban.LaneState, error) {
	return readAll(ctx, s.d, "sqlite.kanban.Lanes", func(s scanner) (kanban.LaneState, error) {
		var l kanban.LaneState
		var version int64
		var body []byte
		if err := s.Scan(&version, &body); err != nil {
			return l, err
		}
		err := json.Unmarshal(body, &l)
		l.Version = version
		return l, err
	}, sqlKbLanes)
}
