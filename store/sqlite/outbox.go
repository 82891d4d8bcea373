package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// outboxStore is the DB seen as an outbox.Store.
type outboxStore struct{ d *DB }

var _ outbox.Store = (*outboxStore)(nil)

// msgCols are the columns a Message is read from: the encoded message and
// the fields the store keeps up to date beside it.
const msgCols = `id, next_attempt, attempts, last_error, created_at, body, parts`

// A row is due when its time has come and nobody holds a live claim on
// it: pending, or claimed by a worker whose claim ran out. One that waits
// for another worker's message (waits_for) is read only by that worker's
// claims (sqlOutboxWaiting).
const sqlOutboxDueWhere = `platform = ?1 AND state <> 'dead' AND waits_for = '' AND next_attempt <= ?2
	AND (state = 'pending' OR claim_expires <= ?2)`

const (
	sqlOutboxKeyGet = `SELECT msg_id FROM outbox_keys WHERE key = ?1 AND seen_at > ?2`
	sqlOutboxKeyPut = `INSERT INTO outbox_keys (key, msg_id, seen_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (key) DO UPDATE SET msg_id = excluded.msg_id, seen_at = excluded.seen_at`
	sqlOutboxKeyPrune = `DELETE FROM outbox_keys WHERE key IN
		(SELECT key FROM outbox_keys WHERE seen_at <= ?1 LIMIT ?2)`

	sqlOutboxInsert = `INSERT INTO outbox (platform, target, conv, idem_key, state, next_attempt, created_at, body)
		VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7)`
	// A message a finish hands to a delivery worker (sessions.Handoff) is
	// inserted claimed, with the token a first claim gets.
	sqlOutboxInsertClaimed = `INSERT INTO outbox (platform, target, conv, idem_key, state, next_attempt, created_at, body,
			claim_worker, claim_token, claim_expires)
		VALUES (?1, ?2, ?3, ?4, 'claimed', ?5, ?6, ?7, ?8, 1, ?9)`

	sqlOutboxDueAny = `SELECT 1 FROM outbox WHERE ` + sqlOutboxDueWhere + ` LIMIT 1`
	// One window of the due rows, after (?4, ?5) in due order.
	sqlOutboxDue = `SELECT id, next_attempt, target, state FROM outbox WHERE ` + sqlOutboxDueWhere + `
			AND (next_attempt, id) > (?4, ?5)
		ORDER BY next_attempt, id LIMIT ?3`
	// The due rows that wait for worker ?1's messages.
	sqlOutboxWaiting = `SELECT id, next_attempt, target, state, platform FROM outbox
		WHERE waits_for = ?1 AND waits_for <> '' AND next_attempt <= ?2 AND (state = 'pending' OR claim_expires <= ?2)
		ORDER BY id LIMIT ?3`
	sqlOutboxWaitingAny = `SELECT 1 FROM outbox WHERE waits_for = ?1 AND waits_for <> '' AND next_attempt <= ?2 LIMIT 1`
	// The message after ?2 to target ?1: the one a claim of ?2 may take
	// next, and the one a settle of ?2 lets go.
	sqlOutboxAfter = `SELECT id, next_attempt, state, COALESCE(claim_expires, 0), waits_for FROM outbox
		WHERE target = ?1 AND state <> 'dead' AND id > ?2
		ORDER BY id LIMIT 1`
	sqlOutboxPark   = `UPDATE outbox SET waits_for = ?2 WHERE id = ?1`
	sqlOutboxUnpark = `UPDATE outbox SET waits_for = '' WHERE id =
			(SELECT id FROM outbox WHERE target = ?1 AND state <> 'dead' AND id > ?2 ORDER BY id LIMIT 1)
		AND waits_for <> ''`

	// A message waits while an earlier one to its target is not dead and
	// not held by the claiming worker (?3) under a live claim: the first
	// such one, if any, is what it waits for. The same test without the id
	// tells whether a finish may hand a new message to a worker.
	sqlOutboxBlocker = `SELECT state, next_attempt, COALESCE(claim_expires, 0), claim_worker FROM outbox
		WHERE target = ?1 AND state <> 'dead' AND id < ?2
			AND NOT (state = 'claimed' AND claim_worker = ?3 AND claim_expires > ?4)
		ORDER BY id LIMIT 1`
	sqlOutboxHeld = `SELECT 1 FROM outbox
		WHERE target = ?1 AND state <> 'dead'
			AND NOT (state = 'claimed' AND claim_worker = ?2 AND claim_expires > ?3)
		LIMIT 1`
	// A message whose earlier one waits until later is due no sooner, so
	// it does not fill the claims' reads meanwhile.
	sqlOutboxWait = `UPDATE outbox SET next_attempt = ?2, waits_for = '' WHERE id = ?1`

	// Workers' heartbeats: one whose beat ran out is gone, and its claims
	// end now (the outbox has no index by worker; this is rare).
	sqlOutboxBeat = `INSERT INTO outbox_workers (worker, expires, ttl) VALUES (?1, ?2, ?3)
		ON CONFLICT (worker) DO UPDATE SET expires = excluded.expires, ttl = excluded.ttl`
	// A claim renews its worker's heartbeat as a beat does: the claimer
	// is alive.
	sqlOutboxRebeat = `UPDATE outbox_workers SET expires = ?2 + ttl
		WHERE worker = ?1 AND ttl > 0 AND expires < ?2 + ttl`
	sqlOutboxStale     = `SELECT worker FROM outbox_workers WHERE expires <= ?1 ORDER BY expires LIMIT 16`
	sqlOutboxStaleAny  = `SELECT 1 FROM outbox_workers WHERE expires <= ?1 LIMIT 1`
	sqlOutboxForget    = `DELETE FROM outbox_workers WHERE worker = ?1 AND expires <= ?2`
	sqlOutboxEndClaims = `UPDATE outbox SET claim_expires = ?2
		WHERE state = 'claimed' AND claim_worker = ?1 AND claim_expires > ?2`
	sqlOutboxClaim = `UPDATE outbox SET state = 'claimed', claim_worker = ?2, waits_for = '',
			claim_token = claim_token + 1, claim_expires = ?3
		WHERE id = ?1 RETURNING claim_token, ` + msgCols

	// Every change to a claimed row matches its claim token: a claim that
	// ran out and was taken by another worker changes nothing.
	sqlOutboxAck     = `DELETE FROM outbox WHERE id = ?1 AND state = 'claimed' AND claim_token = ?2`
	sqlOutboxRelease = `UPDATE outbox SET state = 'pending', claim_worker = '', claim_expires = NULL, waits_for = '',
			attempts = attempts + 1, last_error = ?3, next_attempt = ?4
		WHERE id = ?1 AND state = 'claimed' AND claim_token = ?2`
	sqlOutboxPostpone = `UPDATE outbox SET state = 'pending', claim_worker = '', claim_expires = NULL, waits_for = '',
			next_attempt = ?3
		WHERE id = ?1 AND state = 'claimed' AND claim_token = ?2`
	sqlOutboxDead = `UPDATE outbox SET state = 'dead', claim_worker = '', claim_expires = NULL, waits_for = '',
			last_error = ?3
		WHERE id = ?1 AND state = 'claimed' AND claim_token = ?2`
	sqlOutboxParts = `UPDATE outbox SET parts = ?3
		WHERE id = ?1 AND state = 'claimed' AND claim_token = ?2`
	sqlOutboxExists  = `SELECT 1 FROM outbox WHERE id = ?1`
	sqlOutboxRequeue = `UPDATE outbox SET state = 'pending', attempts = 0, next_attempt = ?2, waits_for = ''
		WHERE id = ?1 AND state = 'dead'`

	sqlOutboxPending  = `SELECT ` + msgCols + ` FROM outbox WHERE state <> 'dead' ORDER BY id LIMIT ?1`
	sqlOutboxDeadList = `SELECT ` + msgCols + ` FROM outbox WHERE state = 'dead' ORDER BY id LIMIT ?1`
	// One step of the outbox_target index.
	sqlOutboxUnsent = `SELECT EXISTS (SELECT 1 FROM outbox WHERE target = ?1 AND state <> 'dead')`
)

func (o *outboxStore) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	const op = "sqlite.outbox.Enqueue"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return "", false, err
	}
	body, err := outbox.Encode(op, &m, d.lim.MaxEntryBytes)
	if err != nil {
		return "", false, err
	}
	var (
		id  int64
		dup bool
	)
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		now, _ := d.now()
		var err error
		id, dup, _, err = d.enqueue(t, m, body, now, nil)
		return err
	})
	if err != nil {
		return "", false, d.fail(op, err)
	}
	return formatID(id), dup, nil
}

// enqueue adds m, encoded as body, unless its idempotency key was seen
// within the dedupe window; then it returns the first message's id. Given
// a hold, m is added claimed by it when it is due now, and the claim is
// returned.
func (d *DB) enqueue(t *tx, m outbox.Message, body []byte, nowT time.Time, hold *handoffHold) (int64, bool, *outbox.Claimed, error) {
	now := nanos(nowT)
	key := m.IdempotencyKey
	if key != "" {
		var first int64
		err := t.st.outboxKeyGet.QueryRow(key, now-int64(d.lim.DedupeWindow)).Scan(&first)
		if err == nil {
			return first, true, nil, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil, err
		}
	}
	next := now
	if !m.NextAttempt.IsZero() {
		next = nanos(m.NextAttempt)
	}
	var r sql.Result
	var err error
	claimed := hold != nil && next <= now
	if claimed {
		// Handed over only behind nothing but the worker's own claims,
		// so that it leaves after every earlier message to its target.
		var one int
		err := t.st.outboxHeld.QueryRow(m.Target.String(), hold.worker, now).Scan(&one)
		switch {
		case err == nil:
			claimed = false
		case !errors.Is(err, sql.ErrNoRows):
			return 0, false, nil, err
		}
	}
	if claimed {
		r, err = t.st.outboxInsertClaimed.Exec(m.Target.Platform, m.Target.String(), m.Conv, key, next, now, body,
			hold.worker, nanos(hold.expires))
	} else {
		r, err = t.st.outboxInsert.Exec(m.Target.Platform, m.Target.String(), m.Conv, key, next, now, body)
	}
	if err != nil {
		return 0, false, nil, err
	}
	id, err := r.LastInsertId()
	if err != nil {
		return 0, false, nil, err
	}
	if key != "" {
		if _, err := t.st.outboxKeyPut.Exec(key, id, now); err != nil {
			return 0, false, nil, err
		}
		if d.pruneDue() {
			if _, err := t.st.outboxKeyPrune.Exec(now-int64(d.lim.DedupeWindow), pruneBatch); err != nil {
				return 0, false, nil, err
			}
		}
	}
	if !claimed {
		return id, false, nil, nil
	}
	m.ID, m.NextAttempt, m.CreatedAt, m.Attempts, m.LastError = formatID(id), fromNanos(next), fromNanos(now), 0, ""
	return id, false, &outbox.Claimed{Message: m, Token: 1, Expires: hold.expires}, nil
}

func (o *outboxStore) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	const op = "sqlite.outbox.Claim"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	platforms = uniq(platforms)
	if max <= 0 || len(platforms) == 0 {
		return nil, nil
	}
	if ttl <= 0 {
		ttl = outbox.DefaultClaimTTL
	}
	// Delivery workers poll; "nothing due" comes from the read pool.
	if due, err := o.anyDue(ctx, worker, platforms); err != nil || !due {
		return nil, d.fail(op, err)
	}
	var claimed []outbox.Claimed
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		claimed = nil
		nowT, now := d.now()
		if _, err := t.st.outboxRebeat.Exec(worker, now); err != nil {
			return err
		}
		if err := o.endStale(t, worker, now); err != nil {
			return err
		}
		expires := nowT.Add(ttl)
		c := outboxClaim{o: o, t: t, op: op, worker: worker, platforms: platforms, now: now, expires: expires, max: max,
			seen: map[int64]bool{}, cursors: make([]dueCursor, len(platforms))}
		for i := range c.cursors {
			c.cursors[i].next = math.MinInt64
		}
		if err := c.readWaiting(); err != nil {
			return err
		}
		// Window after window until the claim is full or no due row is
		// left: the rows that wait for another worker leave the due rows
		// as they are read, so each is read once while it waits.
		for more := true; more && len(c.claimed) < max; {
			var err error
			if more, err = c.readDue(); err != nil {
				return err
			}
			if err := c.passes(); err != nil {
				return err
			}
		}
		claimed = c.claimed
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return claimed, nil
}

// outboxClaim is one Claim in its transaction: the rows it read, in due
// order, and the ones it took.
type outboxClaim struct {
	o         *outboxStore
	t         *tx
	op        string
	worker    string
	platforms []string
	now       int64
	expires   time.Time
	max       int
	rows      []dueRow
	seen      map[int64]bool
	cursors   []dueCursor // per platform, where its next window starts
	claimed   []outbox.Claimed
}

type dueRow struct {
	id, next      int64
	target, state string
}

// dueCursor is the last row a window of one platform's due rows read.
type dueCursor struct {
	next, id int64
	done     bool
}

func (c *outboxClaim) add(r dueRow) {
	if !c.seen[r.id] {
		c.seen[r.id] = true
		c.rows = append(c.rows, r)
	}
}

// readWaiting reads the due rows that wait for this worker's messages:
// behind its own claims, they may be its to take.
func (c *outboxClaim) readWaiting() error {
	q, err := c.t.st.outboxWaiting.Query(c.worker, c.now, c.max+waitSlack)
	if err != nil {
		return err
	}
	defer q.Close()
	for q.Next() {
		var (
			r        dueRow
			platform string
		)
		if err := q.Scan(&r.id, &r.next, &r.target, &r.state, &platform); err != nil {
			return err
		}
		if slices.Contains(c.platforms, platform) {
			c.add(r)
		}
	}
	return q.Err()
}

// readDue reads the next window of each platform's due rows, each one
// index range already in due order and cut (with room for those that
// wait behind an earlier message), and reports whether any platform may
// have more.
func (c *outboxClaim) readDue() (more bool, err error) {
	for i, p := range c.platforms {
		cur := &c.cursors[i]
		if cur.done {
			continue
		}
		window := c.max + waitSlack
		q, err := c.t.st.outboxDue.Query(p, c.now, window, cur.next, cur.id)
		if err != nil {
			return false, err
		}
		n := 0
		for q.Next() {
			var r dueRow
			if err := q.Scan(&r.id, &r.next, &r.target, &r.state); err != nil {
				q.Close()
				return false, err
			}
			n++
			cur.next, cur.id = r.next, r.id
			c.add(r)
		}
		if err := q.Close(); err != nil {
			return false, err
		}
		cur.done = n < window
		more = more || !cur.done
	}
	slices.SortFunc(c.rows, func(a, b dueRow) int {
		return cmp.Or(cmp.Compare(a.next, b.next), cmp.Compare(a.id, b.id))
	})
	return more, nil
}

// passes takes the rows read, oldest due first; a message that waits
// behind one this claim takes goes in the next pass, after it.
func (c *outboxClaim) passes() error {
	for progress := true; progress && len(c.claimed) < c.max; {
		progress = false
		left := c.rows[:0]
		var after []dueRow
		for _, r := range c.rows {
			if len(c.claimed) == c.max {
				left = append(left, r)
				continue
			}
			waits, err := c.o.waits(c.t, r.id, r.target, c.worker, c.now)
			if err != nil {
				return err
			}
			if waits {
				left = append(left, r)
				continue
			}
			if err := c.take(r); err != nil {
				return err
			}
			progress = true
			next, ok, err := c.after(r)
			if err != nil {
				return err
			}
			if ok && !c.seen[next.id] {
				c.seen[next.id] = true
				after = append(after, next)
			}
		}
		// The ones that waited go in the next pass, with those behind the
		// ones taken, in due order.
		c.rows = append(left, after...)
		slices.SortFunc(c.rows, func(a, b dueRow) int {
			return cmp.Or(cmp.Compare(a.next, b.next), cmp.Compare(a.id, b.id))
		})
	}
	return nil
}

func (c *outboxClaim) take(r dueRow) error {
	cl := outbox.Claimed{Expires: c.expires, Resend: r.state == "claimed"}
	row := c.t.st.outboxClaim.QueryRow(r.id, c.worker, nanos(c.expires))
	var err error
	if cl.Message, err = scanMessage(c.op, row.Scan, &cl.Token); err != nil {
		return err
	}
	c.claimed = append(c.claimed, cl)
	return nil
}

// after finds the message after r to its target, which may go to this
// worker now that it holds r. When it is due, it is returned; when it
// waits for another worker, it waits for this one from now on, so that
// this worker's later claims find it.
func (c *outboxClaim) after(r dueRow) (dueRow, bool, error) {
	var (
		next       dueRow
		claimUntil int64
		waitsFor   string
	)
	next.target = r.target
	err := c.t.st.outboxAfter.QueryRow(r.target, r.id).Scan(&next.id, &next.next, &next.state, &claimUntil, &waitsFor)
	if errors.Is(err, sql.ErrNoRows) {
		return next, false, nil
	}
	if err != nil {
		return next, false, err
	}
	if next.state == "claimed" && claimUntil > c.now {
		return next, false, nil
	}
	if waitsFor != "" && waitsFor != c.worker {
		if _, err := c.t.st.outboxPark.Exec(next.id, c.worker); err != nil {
			return next, false, err
		}
	}
	return next, next.next <= c.now, nil
}

// waits reports whether message id must wait for an earlier message to
// its target that worker does not hold. One given back until later holds
// it as long: it is made due no sooner, so that it does not fill the
// claims' reads meanwhile. One held by another worker's live claim holds
// it until that one is settled: it waits for that worker, out of the due
// rows the other claims read, so that a long backlog behind one claim
// does not hide the other targets' messages.
func (o *outboxStore) waits(t *tx, id int64, target, worker string, now int64) (bool, error) {
	var (
		state, holder    string
		next, claimUntil int64
	)
	err := t.st.outboxBlocker.QueryRow(target, id, worker, now).Scan(&state, &next, &claimUntil, &holder)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case (state == "pending" || claimUntil <= now) && next > now:
		if _, err := t.st.outboxWait.Exec(id, next); err != nil {
			return false, err
		}
	case state == "claimed" && claimUntil > now:
		if _, err := t.st.outboxPark.Exec(id, holder); err != nil {
			return false, err
		}
	}
	return true, nil
}

// waitSlack is how many more due messages a claim reads than it may
// take, for those that wait behind an earlier message to their target.
const waitSlack = 64

// anyDue reports, from the read pool, whether a claim may find work: a
// message of platforms is due, one waits for worker, or a worker's
// heartbeat ran out.
func (o *outboxStore) anyDue(ctx context.Context, worker string, platforms []string) (bool, error) {
	d := o.d
	_, now := d.now()
	var one int
	for _, q := range []func() error{
		func() error { return d.reads.outboxStaleAny.QueryRowContext(ctx, now).Scan(&one) },
		func() error { return d.reads.outboxWaitingAny.QueryRowContext(ctx, worker, now).Scan(&one) },
	} {
		err := q()
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
	}
	for _, p := range platforms {
		err := d.reads.outboxDueAny.QueryRowContext(ctx, p, now).Scan(&one)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
	}
	return false, nil
}

// endStale ends the claims of the workers whose heartbeat ran out, and
// forgets them; the claiming worker, whose heartbeat its claim renewed
// (it was paused, not dead), keeps its own.
func (o *outboxStore) endStale(t *tx, claimer string, now int64) error {
	workers, err := scanRows(scanString)(t.st.outboxStale.Query(now))
	if err != nil {
		return err
	}
	for _, w := range workers {
		if w == claimer {
			continue
		}
		if _, err := t.st.outboxEndClaims.Exec(w, now); err != nil {
			return err
		}
		if _, err := t.st.outboxForget.Exec(w, now); err != nil {
			return err
		}
	}
	return nil
}

func (o *outboxStore) Beat(ctx context.Context, worker string, ttl time.Duration) error {
	const op = "sqlite.outbox.Beat"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if worker == "" {
		return errs.E(op, errs.Invalid, "a heartbeat needs a worker name")
	}
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		nowT, _ := d.now()
		if ttl <= 0 {
			_, err := t.st.outboxForget.Exec(worker, int64(math.MaxInt64))
			return err
		}
		_, err := t.st.outboxBeat.Exec(worker, nanos(nowT.Add(ttl)), int64(ttl))
		return err
	})
	return d.fail(op, err)
}

func (o *outboxStore) KeepParts(ctx context.Context, c outbox.Claimed, p outbox.Parts) error {
	const op = "sqlite.outbox.KeepParts"
	b, err := outbox.EncodeParts(op, p)
	if err != nil {
		return err
	}
	// What a crash must not forget: the parts sent are not sent again.
	return o.change(ctx, op, durable, c, func(t *tx, id int64, _ int64) (sql.Result, error) {
		return t.st.outboxParts.Exec(id, c.Token, b)
	})
}

func (o *outboxStore) Ack(ctx context.Context, c outbox.Claimed) error {
	return o.change(ctx, "sqlite.outbox.Ack", durable, c, func(t *tx, id int64, _ int64) (sql.Result, error) {
		return settle(t, c, id, t.st.outboxAck, id, c.Token)
	})
}

// settle runs stmt, a write that settles c's claim on message id, and
// lets the message after it to its target go, should it wait for c's
// worker: it is due again for every claim.
func settle(t *tx, c outbox.Claimed, id int64, stmt *sql.Stmt, args ...any) (sql.Result, error) {
	r, err := stmt.Exec(args...)
	if err != nil {
		return nil, err
	}
	if _, err := t.st.outboxUnpark.Exec(c.Target.String(), id); err != nil {
		return nil, err
	}
	return r, nil
}

func (o *outboxStore) AckAll(ctx context.Context, cs []outbox.Claimed) ([]error, error) {
	const op = "sqlite.outbox.AckAll"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	acked := make([]error, len(cs))
	if len(cs) == 0 {
		return acked, nil
	}
	// One transaction, one commit, for them all; each ack is checked as
	// Ack checks it, and a refused one writes nothing and stops nothing.
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		for i, c := range cs {
			acked[i] = nil
			id, ok := parseID(c.ID)
			if !ok {
				acked[i] = errs.E(op, errs.NotFound, "no outbox message %q", c.ID)
				continue
			}
			r, err := settle(t, c, id, t.st.outboxAck, id, c.Token)
			if err != nil {
				return err
			}
			if acked[i], err = o.matched(t, op, c, id, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return acked, nil
}

func (o *outboxStore) Release(ctx context.Context, c outbox.Claimed, next time.Time, reason string) error {
	return o.change(ctx, "sqlite.outbox.Release", durable, c, func(t *tx, id int64, now int64) (sql.Result, error) {
		return settle(t, c, id, t.st.outboxRelease, id, c.Token, reason, dueAt(next, now))
	})
}

func (o *outboxStore) Postpone(ctx context.Context, c outbox.Claimed, next time.Time) error {
	// Losing a postponement to a power cut only makes the message due
	// sooner.
	return o.change(ctx, "sqlite.outbox.Postpone", bookkeeping, c, func(t *tx, id int64, now int64) (sql.Result, error) {
		return settle(t, c, id, t.st.outboxPostpone, id, c.Token, dueAt(next, now))
	})
}

func (o *outboxStore) Dead(ctx context.Context, c outbox.Claimed, reason string) error {
	return o.change(ctx, "sqlite.outbox.Dead", durable, c, func(t *tx, id int64, _ int64) (sql.Result, error) {
		return settle(t, c, id, t.st.outboxDead, id, c.Token, reason)
	})
}

// change runs one claim-checked write. When it matched no row, the message
// is either gone (NotFound) or held under another claim, or given back
// already (LeaseLost).
func (o *outboxStore) change(ctx context.Context, op string, mode commitMode, c outbox.Claimed, write func(t *tx, id, now int64) (sql.Result, error)) error {
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	id, ok := parseID(c.ID)
	if !ok {
		return errs.E(op, errs.NotFound, "no outbox message %q", c.ID)
	}
	err := d.w.do(ctx, op, mode, func(t *tx) error {
		_, now := d.now()
		r, err := write(t, id, now)
		if err != nil {
			return err
		}
		refused, err := o.matched(t, op, c, id, r)
		if err != nil {
			return err
		}
		return refused
	})
	return d.fail(op, err)
}

// matched tells why a claim-checked write r of message id matched no row:
// the message is gone (NotFound), or held under another claim or given
// back already (LeaseLost). It returns nil, nil when r matched, and err
// when the check itself failed.
func (o *outboxStore) matched(t *tx, op string, c outbox.Claimed, id int64, r sql.Result) (refused, err error) {
	n, err := r.RowsAffected()
	if err != nil || n > 0 {
		return nil, err
	}
	var one int
	err = t.st.outboxExists.QueryRow(id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return errs.E(op, errs.NotFound, "no outbox message %q", c.ID), nil
	}
	if err != nil {
		return nil, err
	}
	return errs.E(op, errs.LeaseLost, "claim %d on outbox message %q ran out and was taken, or was given back", c.Token, c.ID), nil
}

func (o *outboxStore) Pending(ctx context.Context, n int) ([]outbox.Message, error) {
	return o.list(ctx, "sqlite.outbox.Pending", o.d.reads.outboxPending, n)
}

func (o *outboxStore) DeadLetters(ctx context.Context, n int) ([]outbox.Message, error) {
	return o.list(ctx, "sqlite.outbox.DeadLetters", o.d.reads.outboxDeadAll, n)
}

func (o *outboxStore) Unsent(ctx context.Context, target outbox.Target) (bool, error) {
	const op = "sqlite.outbox.Unsent"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return false, err
	}
	if err := target.Validate(); err != nil {
		return false, errs.Wrap(op, errs.Invalid, err)
	}
	var unsent bool
	if err := d.reads.outboxUnsent.QueryRowContext(ctx, target.String()).Scan(&unsent); err != nil {
		return false, d.fail(op, err)
	}
	return unsent, nil
}

func (o *outboxStore) list(ctx context.Context, op string, stmt *sql.Stmt, n int) ([]outbox.Message, error) {
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, limit(n))
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	var out []outbox.Message
	for rows.Next() {
		m, err := scanMessage(op, rows.Scan)
		if err != nil {
			return nil, d.fail(op, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (o *outboxStore) Requeue(ctx context.Context, idStr string) error {
	const op = "sqlite.outbox.Requeue"
	d := o.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	id, ok := parseID(idStr)
	if !ok {
		return errs.E(op, errs.NotFound, "no dead outbox message %q", idStr)
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now := d.now()
		r, err := t.st.outboxRequeue.Exec(id, now)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errs.E(op, errs.NotFound, "no dead outbox message %q", idStr)
		}
		return nil
	})
	return d.fail(op, err)
}

// scanMessage reads msgCols, after any leading columns given in pre.
func scanMessage(op string, scan func(...any) error, pre ...any) (outbox.Message, error) {
	var (
		m                          outbox.Message
		id, next, attempts, create int64
		lastErr                    string
		body, parts                []byte
	)
	if err := scan(append(pre, &id, &next, &attempts, &lastErr, &create, &body, &parts)...); err != nil {
		return m, err
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, errs.Wrap(op, errs.Internal, err)
	}
	var err error
	if m.Parts, err = outbox.DecodeParts(op, parts); err != nil {
		return m, err
	}
	m.ID = formatID(id)
	m.NextAttempt = fromNanos(next)
	m.Attempts = int(attempts)
	m.LastError = lastErr
	m.CreatedAt = fromNanos(create)
	return m, nil
}

// handoffHold is the claim a finish's outbox messages are inserted with
// (sessions.Handoff).
type handoffHold struct {
	worker  string
	expires time.Time
}

// dueAt is when a message given back becomes due: next, or now when next
// is unset.
func dueAt(next time.Time, now int64) int64 {
	if next.IsZero() {
		return now
	}
	return nanos(next)
}

func uniq(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
