package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// sessionStore is the DB seen as a sessions.Store.
type sessionStore struct{ d *DB }

var _ sessions.Store = (*sessionStore)(nil)

// nextSeq is the tie-break for a conversation becoming due at time ?N: one
// past the last conversation due at exactly that time. Real clocks rarely
// tie; a simulated clock standing still ties all the time, and the queue
// must stay first come, first served then too. The (due, due_seq) index
// answers it with one seek.
func nextSeq(param string) string {
	return `(SELECT COALESCE(MAX(due_seq), 0) + 1 FROM conversations WHERE due = ` + param + `)`
}

// The entry Claim and Next hand out: the one delivered before and never
// acked, else the first of the lowest non-empty lane. c is the
// conversation row.
const sqlEntryOf = `LEFT JOIN entries AS e ON e.id = COALESCE(
	(SELECT id FROM entries WHERE id = c.delivered),
	(SELECT id FROM entries WHERE conv = c.conv ORDER BY lane, id LIMIT 1))`

// sqlGrant leases a conversation row: to worker ?2 until ?3, under the
// next token, due again at the expiry so a dead holder's conversation
// comes back, with entry ?4 handed out for the ?5th time at ?6, now.
// Claim and AppendClaim grant with it, so the two give out the same
// lease.
var sqlGrant = `lease_worker = ?2, lease_token = lease_token + 1,
	lease_expires = ?3, due = ?3, due_seq = ` + nextSeq("?3") + `,
	delivered = ?4, deliveries = ?5, delivered_at = ?6`

// Statements are vars, not consts, only because nextSeq builds some.
var (
	sqlDedupeGet = `SELECT entry_id FROM dedupe WHERE conv = ?1 AND message_id = ?2 AND seen_at > ?3`
	sqlDedupePut = `INSERT INTO dedupe (conv, message_id, entry_id, seen_at) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (conv, message_id) DO UPDATE SET entry_id = excluded.entry_id, seen_at = excluded.seen_at`
	sqlDedupePrune = `DELETE FROM dedupe WHERE (conv, message_id) IN
		(SELECT conv, message_id FROM dedupe WHERE seen_at <= ?1 LIMIT ?2)`

	sqlEntryInsert = `INSERT INTO entries (conv, lane, enqueued_at, body) VALUES (?1, ?2, ?3, ?4)`
	sqlEntryDelete = `DELETE FROM entries WHERE id = ?1`
	// An absorbed entry is a queued one of the conversation, never the
	// entry the same Finish acks.
	sqlEntryAbsorb = `DELETE FROM entries WHERE id = ?1 AND conv = ?2 AND id <> ?3`

	// A conversation nobody holds and that was not ready becomes ready
	// now. A held one keeps due = its lease expiry, so it is found again
	// if its holder dies.
	// Either way the append is its activity (active_at).
	sqlConvReady = `INSERT INTO conversations (conv, due, due_seq, active_at) VALUES (?1, ?2, ` + nextSeq("?2") + `, ?2)
		ON CONFLICT (conv) DO UPDATE SET due = COALESCE(due, excluded.due),
			due_seq = CASE WHEN due IS NULL THEN excluded.due_seq ELSE due_seq END,
			active_at = excluded.active_at`

	sqlReadyAny = `SELECT 1 FROM conversations WHERE due <= ?1 LIMIT 1`

	// sqlConvHeld: a live lease holds the conversation ?1 at ?2, now.
	sqlConvHeld = `SELECT COALESCE(lease_expires > ?2, 0) FROM conversations WHERE conv = ?1`

	sqlClaimPick = `SELECT c.conv, c.delivered, c.deliveries, e.id, e.enqueued_at, e.body
		FROM (SELECT conv, delivered, deliveries FROM conversations
			WHERE due <= ?1 ORDER BY due, due_seq LIMIT 1) AS c
		` + sqlEntryOf
	sqlClaimGrant = `UPDATE conversations SET ` + sqlGrant + `
		WHERE conv = ?1 RETURNING lease_token`
	// AppendClaim's grant: the conversation of the entry ?4 just inserted
	// is leased as Claim leases it, but only when that entry stands alone
	// (no other entry queued or delivered and unacked) and no lease is
	// live at ?6, now. A conversation seen for the first time has no row
	// yet and gets the first token. When the grant does not apply, no
	// row comes back and nothing is written. With the first token it
	// also says whether the conversation has no controllers' state (the
	// first lease has no history to read either); with a later one it
	// looks for none.
	sqlAppendGrant = `INSERT INTO conversations
			(conv, lease_worker, lease_token, lease_expires, due, due_seq, delivered, deliveries, delivered_at, active_at)
		VALUES (?1, ?2, 1, ?3, ?3, ` + nextSeq("?3") + `, ?4, ?5, ?6, ?6)
		ON CONFLICT (conv) DO UPDATE SET ` + sqlGrant + `, active_at = ?6
		WHERE (lease_expires IS NULL OR lease_expires <= ?6)
			AND NOT EXISTS (SELECT 1 FROM entries WHERE conv = ?1 AND id <> ?4)
		RETURNING lease_token, CASE WHEN lease_token = 1 THEN NOT EXISTS (SELECT 1 FROM controllers WHERE conv = ?1) ELSE 0 END`
	// A due conversation without entries (its holder drained it, then
	// died or stalled) is simply not ready any more. Its lease stays as it
	// was: nobody took it over, so a holder that was only slow may still
	// renew it, and an Append makes the conversation ready again.
	sqlClaimSkip = `UPDATE conversations SET due = NULL WHERE conv = ?1`

	sqlNextPick = `SELECT c.delivered, c.deliveries, e.id, e.enqueued_at, e.body
		FROM conversations AS c
		` + sqlEntryOf + `
		WHERE c.conv = ?1 AND c.lease_token = ?2 AND c.lease_expires IS NOT NULL`
	sqlNextMark = `UPDATE conversations SET delivered = ?2, deliveries = 1, delivered_at = ?3 WHERE conv = ?1`

	// Every write under a lease matches the token and a held lease, in
	// the same statement or transaction as the write: a lease taken over
	// or released commits nothing.
	sqlLeaseHeld = `SELECT 1 FROM conversations WHERE conv = ?1 AND lease_token = ?2 AND lease_expires IS NOT NULL`

	sqlRenew = `UPDATE conversations SET lease_expires = ?3, due = ?3, due_seq = ` + nextSeq("?3") + `
		WHERE conv = ?1 AND lease_token = ?2 AND lease_expires IS NOT NULL`
	sqlRelease = `UPDATE conversations SET lease_worker = '', lease_expires = NULL,
			due = CASE WHEN EXISTS (SELECT 1 FROM entries WHERE conv = ?1) THEN ?3 END,
			due_seq = ` + nextSeq("?3") + `
		WHERE conv = ?1 AND lease_token = ?2 AND lease_expires IS NOT NULL`
	// sqlEntriesLeft: the conversation ?1 has entries besides ?3, the one
	// a finish acks. A released conversation with some is due again, and
	// both finishes return it, for FinishAndClaim's ClaimIfLeft.
	sqlEntriesLeft = `EXISTS (SELECT 1 FROM entries WHERE conv = ?1 AND id <> ?3)`
	// A commit is the conversation's activity (active_at).
	sqlFinishRelease = `UPDATE conversations SET delivered = NULL, deliveries = 0, active_at = ?4,
			lease_worker = '', lease_expires = NULL,
			due = CASE WHEN ` + sqlEntriesLeft + ` THEN ?4 END,
			due_seq = ` + nextSeq("?4") + `
		WHERE conv = ?1 AND lease_token = ?2 AND lease_expires IS NOT NULL AND delivered = ?3
		RETURNING due IS NOT NULL`
	sqlFinishKeep = `UPDATE conversations SET delivered = NULL, deliveries = 0, active_at = ?4
		WHERE conv = ?1 AND lease_token = ?2 AND lease_expires IS NOT NULL AND delivered = ?3
		RETURNING ` + sqlEntriesLeft

	sqlHistoryInsert = `INSERT INTO history (conv, body) VALUES (?1, ?2)`
	sqlHistoryClear  = `DELETE FROM history WHERE conv = ?1`
	sqlHistoryDrop   = `DELETE FROM history WHERE id IN
		(SELECT id FROM history WHERE conv = ?1 ORDER BY id LIMIT ?2)`
	sqlHistoryList = `SELECT body FROM history WHERE conv = ?1 ORDER BY id`
	// A claimed turn's read: whether the conversation has no session
	// controller's state, on every row, with the history's rows (their
	// ids in order, as the index gives them) or, for none, one row of
	// NULLs; a LEFT JOIN that keeps the index's order where an ORDER BY
	// would sort.
	sqlTurnHistory = `SELECT c.none, h.id, h.body
		FROM (SELECT NOT EXISTS (SELECT 1 FROM controllers WHERE conv = ?1) AS none) AS c
		LEFT JOIN history AS h ON h.conv = ?1`

	sqlMetaSet = `INSERT INTO meta (conv, key, value) VALUES (?1, ?2, ?3)
		ON CONFLICT (conv, key) DO UPDATE SET value = excluded.value`
	sqlMetaDelete = `DELETE FROM meta WHERE conv = ?1 AND key = ?2`
	sqlMetaList   = `SELECT key, value FROM meta WHERE conv = ?1`
	// sqlTurnRunning: the entry a live lease holds the conversation ?1
	// with at ?2, now, when it was handed out, and its body.
	sqlTurnRunning = `SELECT c.delivered, COALESCE(c.delivered_at, 0), e.body
		FROM conversations AS c JOIN entries AS e ON e.id = c.delivered
		WHERE c.conv = ?1 AND c.lease_expires > ?2`
)

func (s *sessionStore) Append(ctx context.Context, in sessions.Inbound) (sessions.AppendResult, error) {
	res, _, err := s.appendEntry(ctx, "sqlite.Append", in, nil)
	return res, err
}

func (s *sessionStore) AppendClaim(ctx context.Context, in sessions.Inbound, worker string, ttl time.Duration) (sessions.AppendResult, *sessions.Turn, error) {
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	return s.appendEntry(ctx, "sqlite.AppendClaim", in, &claimer{worker: worker, ttl: ttl})
}

// claimer is who AppendClaim leases the conversation to, and for how long.
type claimer struct {
	worker string
	ttl    time.Duration
}

// encodeEntry checks the store is open and encodes *in for its row,
// which it leaves as the row keeps it. It is apart from appendEntry so
// that its locals are off the goroutine's stack while the append waits
// for the writer.
func (s *sessionStore) encodeEntry(ctx context.Context, op string, in *sessions.Inbound) ([]byte, error) {
	if err := s.d.check(ctx, op); err != nil {
		return nil, err
	}
	enc, body, err := sessions.EncodeInbound(op, *in, s.d.lim)
	if err != nil {
		return nil, err
	}
	*in = enc
	return body, nil
}

// appendEntry is Append, and with a claimer AppendClaim: one transaction
// that inserts the entry and then either leases its conversation to c or
// leaves it ready as Append does.
func (s *sessionStore) appendEntry(ctx context.Context, op string, in sessions.Inbound, c *claimer) (sessions.AppendResult, *sessions.Turn, error) {
	d := s.d
	body, err := s.encodeEntry(ctx, op, &in)
	if err != nil {
		return sessions.AppendResult{}, nil, err
	}
	var (
		res  sessions.AppendResult
		turn *sessions.Turn
	)
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		turn = nil
		nowT, now := d.now()
		var id int64
		var err error
		res, id, err = insertEntry(t, d, in, body, now)
		if err != nil || res.Duplicate {
			return err
		}
		if c != nil {
			if turn, err = grantAlone(t, in, id, *c, nowT); err != nil || turn != nil {
				return err
			}
		}
		// No row: the conversation's first entry, which no lease holds.
		err = t.st.convHeld.QueryRow(in.Conv, now).Scan(&res.Held)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = t.st.convReady.Exec(in.Conv, now)
		return err
	})
	if err != nil {
		return sessions.AppendResult{}, nil, d.fail(op, err)
	}
	if !res.Duplicate && turn == nil {
		// The entry is durable whatever this read does; without the
		// metadata the router uses the defaults.
		res.Meta, _ = s.Meta(ctx, in.Conv)
	}
	d.withHistory(ctx, turn)
	return res, turn, nil
}

// insertEntry queues in, encoded as body, unless its message id was seen
// within the dedupe window, and returns what Append answers (without the
// metadata) and the new entry's id.
func insertEntry(t *tx, d *DB, in sessions.Inbound, body []byte, now int64) (sessions.AppendResult, int64, error) {
	if in.MessageID != "" {
		var first int64
		err := t.st.dedupeGet.QueryRow(in.Conv, in.MessageID, now-int64(d.lim.DedupeWindow)).Scan(&first)
		if err == nil {
			return sessions.AppendResult{EntryID: formatID(first), Duplicate: true}, 0, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return sessions.AppendResult{}, 0, err
		}
	}
	r, err := t.st.entryInsert.Exec(in.Conv, in.Lane(), now, body)
	if err != nil {
		return sessions.AppendResult{}, 0, err
	}
	id, err := r.LastInsertId()
	if err != nil {
		return sessions.AppendResult{}, 0, err
	}
	if in.MessageID != "" {
		if _, err := t.st.dedupePut.Exec(in.Conv, in.MessageID, id, now); err != nil {
			return sessions.AppendResult{}, 0, err
		}
		if d.pruneDue() {
			if _, err := t.st.dedupePrune.Exec(now-int64(d.lim.DedupeWindow), pruneBatch); err != nil {
				return sessions.AppendResult{}, 0, err
			}
		}
	}
	return sessions.AppendResult{EntryID: formatID(id)}, id, nil
}

// grantAlone leases in's conversation to c with in, the entry just
// inserted as id, as its turn, when that entry is all the conversation
// has and no lease on it is live; otherwise it writes nothing and returns
// nil. The turn's entry is in itself, not a decoding of what was stored.
func grantAlone(t *tx, in sessions.Inbound, id int64, c claimer, nowT time.Time) (*sessions.Turn, error) {
	expires := nowT.Add(c.ttl)
	var (
		token int64
		none  bool
	)
	err := t.st.appendGrant.QueryRow(in.Conv, c.worker, nanos(expires), id, 1, nanos(nowT)).Scan(&token, &none)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	turn := &sessions.Turn{
		Lease: sessions.Lease{Conv: in.Conv, Worker: c.worker, Token: token, Expires: expires},
		Entry: sessions.Entry{Inbound: in, ID: formatID(id), EnqueuedAt: fromNanos(nanos(nowT)), Deliveries: 1},
	}
	// The first lease of a conversation is token 1, given as its row is
	// made; history is written only under a lease, so it has none, and
	// the turn needs no read of it.
	if token == 1 {
		turn.HistoryRead, turn.Uncontrolled = true, none
	}
	return turn, nil
}

func (s *sessionStore) Claim(ctx context.Context, worker string, ttl time.Duration) (*sessions.Turn, error) {
	turns, err := s.claim(ctx, "sqlite.Claim", worker, 1, ttl)
	if err != nil || len(turns) == 0 {
		return nil, err
	}
	return turns[0], nil
}

func (s *sessionStore) ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	return s.claim(ctx, "sqlite.ClaimMany", worker, n, ttl)
}

// claim claims up to n turns in one write transaction.
func (s *sessionStore) claim(ctx context.Context, op, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	d := s.d
	if err := d.check(ctx, op); err != nil || n <= 0 {
		return nil, err
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	// Idle workers poll; answering "nothing ready" from the read pool
	// keeps them off the write lock.
	_, now := d.now()
	var one int
	switch err := d.reads.readyAny.QueryRowContext(ctx, now).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, d.fail(op, err)
	}
	var turns []*sessions.Turn
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		turns = turns[:0]
		for range n {
			turn, err := claimIn(t, d, op, worker, ttl)
			if err != nil || turn == nil {
				return err
			}
			turns = append(turns, turn)
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	for _, turn := range turns {
		d.withHistory(ctx, turn)
	}
	return turns, nil
}

// withHistory reads the claimed conversation's history into turn from
// the read pool, after the claim committed, so the read keeps no other
// writer waiting, and in the same statement whether it has a session
// controller's state (Turn.Uncontrolled). A failed read leaves
// turn.HistoryRead unset: the claim stands, and the worker reads the
// history itself.
func (d *DB) withHistory(ctx context.Context, turn *sessions.Turn) {
	if turn == nil || turn.HistoryRead {
		return
	}
	rows, err := d.reads.turnHistory.QueryContext(ctx, turn.Lease.Conv)
	if err != nil {
		return
	}
	defer rows.Close()
	type row struct {
		id   int64
		body []byte
	}
	var (
		read []row
		none bool
	)
	for rows.Next() {
		var (
			id   sql.NullInt64
			body []byte
		)
		if err := rows.Scan(&none, &id, &body); err != nil {
			return
		}
		if id.Valid {
			read = append(read, row{id.Int64, body})
		}
	}
	if rows.Err() != nil {
		return
	}
	// The join gives the rows in the index's order; were a plan to give
	// them otherwise, they are put in order here.
	if !slices.IsSortedFunc(read, func(a, b row) int { return cmp.Compare(a.id, b.id) }) {
		slices.SortFunc(read, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	}
	h := make([]chat.Message, 0, len(read))
	for _, r := range read {
		var m chat.Message
		if json.Unmarshal(r.body, &m) != nil {
			return // the worker reads it itself, and says what is wrong
		}
		h = append(h, m)
	}
	turn.History, turn.HistoryRead, turn.Uncontrolled = h, true, none
}

// claimIn is Claim inside the write transaction t.
func claimIn(t *tx, d *DB, op, worker string, ttl time.Duration) (*sessions.Turn, error) {
	nowT, now := d.now()
	for {
		var (
			conv       string
			delivered  sql.NullInt64
			deliveries int
			row        entryRow
		)
		err := t.st.claimPick.QueryRow(now).Scan(&conv, &delivered, &deliveries, &row.id, &row.enqueuedAt, &row.body)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !row.id.Valid {
			if _, err := t.st.claimSkip.Exec(conv); err != nil {
				return nil, err
			}
			continue
		}
		count := 1
		if delivered.Valid && delivered.Int64 == row.id.Int64 {
			count = deliveries + 1
		}
		expires := nowT.Add(ttl)
		var token int64
		if err := t.st.claimGrant.QueryRow(conv, worker, nanos(expires), row.id.Int64, count, nanos(nowT)).Scan(&token); err != nil {
			return nil, err
		}
		return row.turn(op, sessions.Lease{Conv: conv, Worker: worker, Token: token, Expires: expires}, count)
	}
}

func (s *sessionStore) Next(ctx context.Context, l sessions.Lease) (*sessions.Entry, error) {
	const op = "sqlite.Next"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return nil, err
	}
	var entry *sessions.Entry
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		entry = nil
		var (
			delivered  sql.NullInt64
			deliveries int
			row        entryRow
		)
		err := t.st.nextPick.QueryRow(l.Conv, l.Token).Scan(&delivered, &deliveries, &row.id, &row.enqueuedAt, &row.body)
		if errors.Is(err, sql.ErrNoRows) {
			return leaseLost(op, l)
		}
		if err != nil {
			return err
		}
		if !row.id.Valid {
			return nil
		}
		if !delivered.Valid || delivered.Int64 != row.id.Int64 {
			deliveries = 1
			_, now := d.now()
			if _, err := t.st.nextMark.Exec(l.Conv, row.id.Int64, now); err != nil {
				return err
			}
		}
		entry, err = row.entry(op, deliveries)
		return err
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return entry, nil
}

func (s *sessionStore) Renew(ctx context.Context, l sessions.Lease, ttl time.Duration) (sessions.Lease, error) {
	const op = "sqlite.Renew"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return sessions.Lease{}, err
	}
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return sessions.Lease{}, err
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	renewed := l
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		nowT, _ := d.now()
		renewed.Expires = nowT.Add(ttl)
		r, err := t.st.renew.Exec(l.Conv, l.Token, nanos(renewed.Expires))
		if err != nil {
			return err
		}
		return affectedOrLost(op, l, r)
	})
	if err != nil {
		return sessions.Lease{}, d.fail(op, err)
	}
	return renewed, nil
}

func (s *sessionStore) Release(ctx context.Context, l sessions.Lease) error {
	const op = "sqlite.Release"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return err
	}
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		_, now := d.now()
		r, err := t.st.leaseRelease.Exec(l.Conv, l.Token, now)
		if err != nil {
			return err
		}
		return affectedOrLost(op, l, r)
	})
	return d.fail(op, err)
}

func (s *sessionStore) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	const op = "sqlite.Finish"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	p, err := prepareFinish(d, op, l, f)
	if err != nil {
		return err
	}
	var handed []outbox.Claimed
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		var err error
		handed, _, err = finishIn(t, d, op, l, f, p)
		return err
	})
	if err != nil {
		return d.fail(op, err)
	}
	f.Handoff.Give(handed)
	return nil
}

func (s *sessionStore) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	const op = "sqlite.FinishAndClaim"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	p, err := prepareFinish(d, op, l, f)
	if err != nil {
		return nil, err
	}
	var turn *sessions.Turn
	var handed []outbox.Claimed
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		turn = nil
		var err error
		var left bool
		if handed, left, err = finishIn(t, d, op, l, f, p); err != nil || f.ClaimIfLeft && !left {
			return err
		}
		turn, err = claimIn(t, d, op, worker, ttl)
		return err
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	f.Handoff.Give(handed)
	d.withHistory(ctx, turn)
	return turn, nil
}

// finishPlan is a Finish checked and encoded before its transaction.
type finishPlan struct {
	history  [][]byte
	bodies   [][]byte // the outbox messages
	absorbed []string
	entryID  int64
	idOK     bool
}

func prepareFinish(d *DB, op string, l sessions.Lease, f sessions.Finish) (finishPlan, error) {
	var p finishPlan
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return p, err
	}
	var err error
	if p.history, err = sessions.EncodeMessages(op, f.History, d.lim); err != nil {
		return p, err
	}
	p.bodies = make([][]byte, len(f.Outbox))
	for i := range f.Outbox {
		if p.bodies[i], err = outbox.Encode(op, &f.Outbox[i], d.lim.MaxEntryBytes); err != nil {
			return p, err
		}
	}
	if p.absorbed, err = absorbedIDs(op, f); err != nil {
		return p, err
	}
	if err := sessions.ValidateMeta(op, f.Meta, d.lim); err != nil {
		return p, err
	}
	if err := sessions.CheckDropHistory(op, f); err != nil {
		return p, err
	}
	if err := d.checkWrites(op, f.Writes); err != nil {
		return p, err
	}
	p.entryID, p.idOK = parseID(f.EntryID)
	return p, nil
}

// finishIn is Finish inside the write transaction t; it reports whether
// the conversation has entries left. With f.Handoff, the outbox messages
// due now are claimed for its worker as they are enqueued, and their
// claims returned.
func finishIn(t *tx, d *DB, op string, l sessions.Lease, f sessions.Finish, p finishPlan) (handed []outbox.Claimed, left bool, err error) {
	nowT, now := d.now()
	// The absorbed entries go first, so that the ready index the finish
	// statements compute no longer counts them.
	if err := absorb(t, op, l, p.entryID, p.absorbed); err != nil {
		return nil, false, err
	}
	switch {
	case !p.idOK:
		return nil, false, notDelivered(t, op, l, f.EntryID)
	case f.Release:
		err = t.st.finishRelease.QueryRow(l.Conv, l.Token, p.entryID, now).Scan(&left)
	default:
		err = t.st.finishKeep.QueryRow(l.Conv, l.Token, p.entryID, now).Scan(&left)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, notDelivered(t, op, l, f.EntryID)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := t.st.entryDelete.Exec(p.entryID); err != nil {
		return nil, false, err
	}
	if f.DropHistory > 0 {
		if _, err := t.st.historyDrop.Exec(l.Conv, f.DropHistory); err != nil {
			return nil, false, err
		}
	}
	for _, b := range p.history {
		if _, err := t.st.historyInsert.Exec(l.Conv, b); err != nil {
			return nil, false, err
		}
	}
	var hold *handoffHold
	if f.Handoff.Active() {
		hold = &handoffHold{worker: f.Handoff.Worker, expires: nowT.Add(f.Handoff.ClaimTTL())}
	}
	for i, m := range f.Outbox {
		_, _, c, err := d.enqueue(t, m, p.bodies[i], nowT, hold)
		if err != nil {
			return nil, false, err
		}
		if c != nil {
			handed = append(handed, *c)
		}
	}
	for k, v := range f.Meta {
		if err := setMeta(t, l.Conv, k, v); err != nil {
			return nil, false, err
		}
	}
	for _, w := range f.Writes {
		if err := d.applyWrite(t, op, w, nowT); err != nil {
			return nil, false, err
		}
	}
	return handed, left, nil
}

// setMeta writes one metadata key; an empty value deletes it.
func setMeta(t *tx, conv, key, value string) error {
	var err error
	if value == "" {
		_, err = t.st.metaDelete.Exec(conv, key)
	} else {
		_, err = t.st.metaSet.Exec(conv, key, value)
	}
	return err
}

// absorbedIDs checks f.Absorbed and drops repeats: an id named twice is
// still one entry taken in. The entry being acked is no absorbed entry,
// so naming it is a malformed Finish.
func absorbedIDs(op string, f sessions.Finish) ([]string, error) {
	if len(f.Absorbed) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(f.Absorbed))
	for _, id := range f.Absorbed {
		if id == f.EntryID {
			return nil, errs.E(op, errs.Invalid, "entry %q is both acked and absorbed", id)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// absorb deletes the queued entries a turn took in. Any of them missing
// (never issued, acked, absorbed before, the one being acked, another
// conversation's) fails the whole Finish.
func absorb(t *tx, op string, l sessions.Lease, entryID int64, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// A lost lease is the answer that matters, whatever the entries.
	if err := checkLease(t, op, l); err != nil {
		return err
	}
	for _, s := range ids {
		id, ok := parseID(s)
		if !ok {
			return notQueued(op, l, s)
		}
		r, err := t.st.entryAbsorb.Exec(id, l.Conv, entryID)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notQueued(op, l, s)
		}
	}
	return nil
}

func notQueued(op string, l sessions.Lease, id string) error {
	return errs.E(op, errs.NotFound, "absorbed entry %q is not queued in %q", id, l.Conv)
}

// notDelivered explains why a Finish matched nothing: the lease is gone,
// or the entry is not the one the lease holder was handed.
func notDelivered(t *tx, op string, l sessions.Lease, entryID string) error {
	if err := checkLease(t, op, l); err != nil {
		return err
	}
	return errs.E(op, errs.NotFound, "entry %q is not the unacked entry of %q", entryID, l.Conv)
}

func (s *sessionStore) AppendHistory(ctx context.Context, l sessions.Lease, msgs ...chat.Message) error {
	const op = "sqlite.AppendHistory"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return err
	}
	history, err := sessions.EncodeMessages(op, msgs, d.lim)
	if err != nil {
		return err
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		if err := checkLease(t, op, l); err != nil {
			return err
		}
		for _, b := range history {
			if _, err := t.st.historyInsert.Exec(l.Conv, b); err != nil {
				return err
			}
		}
		return nil
	})
	return d.fail(op, err)
}

// sqlQueueDepth counts queued entries up to a limit: every row of entries
// is one, waiting or being run, until its finish deletes it.
const sqlQueueDepth = `SELECT count(*) FROM (SELECT 1 FROM entries LIMIT ?1)`

func (s *sessionStore) QueueDepth(ctx context.Context, limit int) (int, error) {
	const op = "sqlite.QueueDepth"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return 0, err
	}
	if err := sessions.CheckQueueLimit(op, limit); err != nil {
		return 0, err
	}
	var n int
	if err := d.reads.queueDepth.QueryRowContext(ctx, limit).Scan(&n); err != nil {
		return 0, d.fail(op, err)
	}
	return n, nil
}

func (s *sessionStore) History(ctx context.Context, conv string) ([]chat.Message, error) {
	const op = "sqlite.History"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	return d.history(ctx, op, conv)
}

// history reads conv's history from the read pool.
func (d *DB) history(ctx context.Context, op, conv string) ([]chat.Message, error) {
	rows, err := d.reads.historyList.QueryContext(ctx, conv)
	if err != nil {
		return nil, d.fail(op, err)
	}
	return d.readMessages(op, rows)
}

// readMessages decodes the history messages rows hold, one encoded
// message a row, and closes rows.
func (d *DB) readMessages(op string, rows *sql.Rows) ([]chat.Message, error) {
	defer rows.Close()
	var out []chat.Message
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, d.fail(op, err)
		}
		var m chat.Message
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s *sessionStore) ClearHistory(ctx context.Context, conv string) error {
	const op = "sqlite.ClearHistory"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.st.historyClear.Exec(conv)
		return err
	})
	return d.fail(op, err)
}

func (s *sessionStore) Meta(ctx context.Context, conv string) (map[string]string, error) {
	const op = "sqlite.Meta"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	rows, err := d.reads.metaList.QueryContext(ctx, conv)
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, d.fail(op, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	// The running turn is told by the live lease and its entry. A mark
	// stored is dropped: the migration to schema version 31 deleted
	// those stored before, but a process of an older version sharing the
	// file can still write one, and one it left behind, dying, would
	// otherwise tell a turn for ever (SetMeta here refuses the key).
	delete(out, sessions.ConvMetaTurn)
	var (
		id, at int64
		body   []byte
	)
	_, now := d.now()
	err = d.reads.turnRunning.QueryRowContext(ctx, conv, now).Scan(&id, &at, &body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, d.fail(op, err)
	default:
		var since time.Time
		if at != 0 {
			since = fromNanos(at)
		}
		if mark := sessions.TurnMarkOf(formatID(id), since, body); mark != "" {
			out[sessions.ConvMetaTurn] = mark
		}
	}
	return out, nil
}

func (s *sessionStore) SetMeta(ctx context.Context, conv, key, value string) error {
	const op = "sqlite.SetMeta"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return err
	}
	if err := sessions.ValidateMeta(op, map[string]string{key: value}, d.lim); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		return setMeta(t, conv, key, value)
	})
	return d.fail(op, err)
}

// entryRow is an entry as Claim and Next read it; id is NULL when the
// conversation has no entry.
type entryRow struct {
	id         sql.NullInt64
	enqueuedAt sql.NullInt64
	body       []byte
}

func (r entryRow) entry(op string, deliveries int) (*sessions.Entry, error) {
	e := &sessions.Entry{
		ID:         formatID(r.id.Int64),
		EnqueuedAt: fromNanos(r.enqueuedAt.Int64),
		Deliveries: deliveries,
	}
	if err := json.Unmarshal(r.body, &e.Inbound); err != nil {
		return nil, errs.Wrap(op, errs.Internal, err)
	}
	return e, nil
}

// turn is the turn of the entry r granted under l, handed out for the
// deliveries-th time; the history is read after the grant commits.
func (r entryRow) turn(op string, l sessions.Lease, deliveries int) (*sessions.Turn, error) {
	e, err := r.entry(op, deliveries)
	if err != nil {
		return nil, err
	}
	return &sessions.Turn{Lease: l, Entry: *e}, nil
}

// checkLease fails with LeaseLost unless l is the conversation's current,
// held lease. Inside a write transaction, what it saw holds until commit.
func checkLease(t *tx, op string, l sessions.Lease) error {
	var one int
	err := t.st.leaseHeld.QueryRow(l.Conv, l.Token).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return leaseLost(op, l)
	}
	return err
}

func affectedOrLost(op string, l sessions.Lease, r sql.Result) error {
	n, err := r.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return leaseLost(op, l)
	}
	return nil
}

func leaseLost(op string, l sessions.Lease) error {
	return errs.E(op, errs.LeaseLost, "lease %d on %q was taken over or released", l.Token, l.Conv)
}
