package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
)

// delegationStore is the DB seen as a delegation.Store.
type delegationStore struct{ d *DB }

var _ delegation.Store = delegationStore{}

// Delegations returns the store of delegations, their children and
// their completions.
func (d *DB) Delegations() delegation.Store { return delegationStore{d: d} }

// The columns a Child and a Completion are read from: the encoded part
// that never changes (body) and the ones the store keeps up to date.
const (
	childCols = `id, delegation, idx, status, owner, token, owner_expires, started_at, ended_at, body, progress, result, steers`
	cmpCols   = `state, claim_token, attempts, last_error, created_at, delivered_at, body`
	dlgCols   = `id, created_at, body`
)

// Active children are the pending and the running ones; the partial
// indexes on children name the same statuses.
const activeStatuses = `status IN ('pending', 'running')`

const (
	sqlDelegationInsert = `INSERT INTO delegations (id, conv, created_at, body) VALUES (?1, ?2, ?3, ?4)`
	sqlChildInsert      = `INSERT INTO children (id, delegation, conv, idx, status, body) VALUES (?1, ?2, ?3, ?4, 'pending', ?5)`

	sqlDelegationGet = `SELECT ` + dlgCols + ` FROM delegations WHERE id = ?1`
	sqlChildrenOf    = `SELECT ` + childCols + ` FROM children WHERE delegation = ?1 ORDER BY idx, seq`
	sqlChildGet      = `SELECT ` + childCols + ` FROM children WHERE id = ?1`

	// Claim takes the pending children in dispatch order (seq), through
	// the partial index of the pending ones; each grant takes a token
	// from one counter, so it is above every token granted before.
	sqlChildPendingAny = `SELECT 1 FROM children WHERE status = 'pending' LIMIT 1`
	sqlChildPending    = `SELECT seq FROM children WHERE status = 'pending' ORDER BY seq LIMIT ?1`
	sqlClaimToken      = `INSERT INTO claim_tokens (name, token) VALUES ('children', 1)
		ON CONFLICT (name) DO UPDATE SET token = token + 1 RETURNING token`
	sqlChildGrant = `UPDATE children SET status = 'running', owner = ?2, token = ?3, owner_expires = ?4, started_at = ?5
		WHERE seq = ?1 AND status = 'pending' RETURNING ` + childCols
	// Start's grant: the child it has just written, by id.
	sqlChildStart = `UPDATE children SET status = 'running', owner = ?2, token = ?3, owner_expires = ?4, started_at = ?5
		WHERE id = ?1 AND status = 'pending'`

	// Every write under a child's claim matches its token while it runs.
	sqlChildRenew = `UPDATE children SET owner_expires = ?3, progress = coalesce(?4, progress)
		WHERE id = ?1 AND status = 'running' AND token = ?2`
	sqlChildHeld = `SELECT ` + childCols + ` FROM children WHERE id = ?1 AND status = 'running' AND token = ?2`
	// A steer is recorded only while the child runs; the read that
	// decides it shares the writer's transaction.
	sqlChildSteer = `UPDATE children SET steers = ?2 WHERE id = ?1 AND status = 'running'`
	sqlChildEnd   = `UPDATE children SET status = ?2, result = ?3, ended_at = ?4, owner = '', owner_expires = NULL
		WHERE id = ?1 AND status = 'running' AND token = ?5 RETURNING conv`
	// A stop ends a child no claim holds: it matches only a pending row,
	// which the write takes out of the partial index Claim reads.
	sqlChildStop = `UPDATE children SET status = ?2, result = ?3, ended_at = ?4
		WHERE id = ?1 AND status = 'pending'`

	// A running child's claim ran out when owner_expires has passed by
	// the store's clock; the partial index of the running ones finds them.
	sqlChildExpiredAny = `SELECT 1 FROM children WHERE status = 'running' AND owner_expires <= ?1 LIMIT 1`
	sqlChildExpired    = `SELECT ` + childCols + ` FROM children WHERE status = 'running' AND owner_expires <= ?1
		ORDER BY owner_expires LIMIT ?2`

	// A completion is due when next_attempt has passed. A claim moves
	// next_attempt to the claim's expiry, so a claimed completion leaves
	// the due range until its claim runs out, without a second index.
	sqlCompletionInsert = `INSERT INTO completions (id, delegation, conv, state, next_attempt, created_at, body)
		VALUES (?1, ?2, ?3, 'pending', ?4, ?4, ?5)`
	sqlCompletionDueAny = `SELECT 1 FROM completions WHERE state = 'pending' AND next_attempt <= ?1 LIMIT 1`
	sqlCompletionDue    = `SELECT seq FROM completions WHERE state = 'pending' AND next_attempt <= ?1
		ORDER BY next_attempt, seq LIMIT ?2`
	sqlCompletionClaim = `UPDATE completions SET claim_worker = ?2, claim_token = claim_token + 1,
			claim_expires = ?3, next_attempt = ?3
		WHERE seq = ?1 RETURNING ` + cmpCols
	// Ack and Retry match a claim that is held (claim_expires set) with
	// its token: a claim given back, taken over or delivered is not.
	sqlCompletionAck = `UPDATE completions SET state = 'delivered', delivered_at = ?3, claim_worker = '', claim_expires = NULL
		WHERE id = ?1 AND state = 'pending' AND claim_token = ?2 AND claim_expires IS NOT NULL`
	sqlCompletionRetry = `UPDATE completions SET next_attempt = ?3, attempts = attempts + 1, last_error = ?4,
			claim_worker = '', claim_expires = NULL
		WHERE id = ?1 AND state = 'pending' AND claim_token = ?2 AND claim_expires IS NOT NULL`
	sqlCompletionsOf = `SELECT ` + cmpCols + ` FROM completions WHERE delegation = ?1 ORDER BY seq`

	sqlActive = `SELECT count(*) FROM children WHERE conv = ?1 AND ` + activeStatuses

	// List is newest first, through (conv, created_at) or (created_at),
	// whose rowid (seq) orders the delegations created at one instant.
	// Active ones are found through the partial index of active children.
	sqlListConv       = `SELECT ` + dlgCols + ` FROM delegations WHERE conv = ?1 ORDER BY created_at DESC, seq DESC LIMIT ?2`
	sqlListAll        = `SELECT ` + dlgCols + ` FROM delegations ORDER BY created_at DESC, seq DESC LIMIT ?1`
	sqlListConvActive = `SELECT ` + dlgCols + ` FROM delegations WHERE id IN
		(SELECT delegation FROM children WHERE conv = ?1 AND ` + activeStatuses + `)
		ORDER BY created_at DESC, seq DESC LIMIT ?2`
	sqlListAllActive = `SELECT ` + dlgCols + ` FROM delegations WHERE id IN
		(SELECT delegation FROM children WHERE ` + activeStatuses + `)
		ORDER BY created_at DESC, seq DESC LIMIT ?1`
)

// defaultListLimit is List's limit when the query gives none.
const defaultListLimit = 50

// dispatchRows is a dispatch encoded for its rows.
type dispatchRows struct {
	body     []byte
	children [][]byte
}

// encodeDispatch checks d and encodes the delegation without its
// children (they have rows of their own) and each child as dispatched.
func encodeDispatch(op string, d delegation.Dispatch) (dispatchRows, error) {
	var r dispatchRows
	if err := delegation.CheckDispatch(op, d); err != nil {
		return r, err
	}
	return encodeRows(op, d)
}

// encodeRows encodes a checked dispatch (encodeDispatch).
func encodeRows(op string, d delegation.Dispatch) (dispatchRows, error) {
	var r dispatchRows
	g := d.Delegation
	g.Children, g.CreatedAt = nil, time.Time{}
	var err error
	if r.body, err = json.Marshal(g); err != nil {
		return r, errs.Wrap(op, errs.Invalid, err)
	}
	r.children = make([][]byte, len(d.Delegation.Children))
	for i, c := range d.Delegation.Children {
		if r.children[i], err = json.Marshal(delegation.Pending(c)); err != nil {
			return r, errs.Wrap(op, errs.Invalid, err)
		}
	}
	return r, nil
}

// insertDispatch writes the delegation and its children, pending, in t:
// Create's write, and a turn's commit's (applyWrite). A delegation or
// child id that exists is a Conflict. A dispatch that does not fit under
// its limit beside the conversation's pending and running children,
// counted in t (delegation.Fits), is refused by Create (reject false);
// a turn's commit (reject true) writes it with each child ended
// rejected, and the completions those ends make.
func insertDispatch(t *tx, op string, d delegation.Dispatch, rows dispatchRows, now time.Time, reject bool) error {
	g := d.Delegation
	running := 0
	if d.Limit > 0 {
		if err := t.queryRow(sqlActive, g.Conv).Scan(&running); err != nil {
			return err
		}
	}
	full := delegation.Fits(op, d, running)
	if full != nil && !reject {
		return full
	}
	at := g.CreatedAt
	if at.IsZero() {
		at = now
	}
	if _, err := t.exec(sqlDelegationInsert, g.ID, g.Conv, nanos(at), rows.body); err != nil {
		return conflict(op, err, "delegation %q or one of its children exists", g.ID)
	}
	for i, c := range g.Children {
		if _, err := t.exec(sqlChildInsert, c.ID, g.ID, g.Conv, c.Index, rows.children[i]); err != nil {
			return conflict(op, err, "child %q exists", c.ID)
		}
	}
	if full == nil {
		return nil
	}
	free := max(d.Limit-running, 0)
	for _, c := range g.Children {
		child := delegation.Pending(c)
		res := delegation.Rejected(child, d.Limit, &free)
		body, err := json.Marshal(res)
		if err != nil {
			return errs.Wrap(op, errs.Invalid, err)
		}
		if _, err := t.exec(sqlChildStop, c.ID, string(res.Status), body, nanos(now)); err != nil {
			return err
		}
		if _, err := completeEnd(t, child, now); err != nil {
			return err
		}
	}
	return nil
}

// conflict is err as Conflict when it is a unique constraint's refusal.
func conflict(op string, err error, format string, args ...any) error {
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
		return errs.E(op, errs.Conflict, format, args...)
	}
	return err
}

func (s delegationStore) Create(ctx context.Context, disp delegation.Dispatch) error {
	const op = "sqlite.delegation.Create"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	rows, err := encodeDispatch(op, disp)
	if err != nil {
		return err
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		now, _ := d.now()
		return insertDispatch(t, op, disp, rows, now, false)
	})
	return d.fail(op, err)
}

func (s delegationStore) Start(ctx context.Context, disp delegation.Dispatch, owner string, ttl time.Duration) ([]delegation.Claim, error) {
	const op = "sqlite.delegation.Start"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := delegation.CheckStart(op, disp, owner, ttl); err != nil {
		return nil, err
	}
	rows, err := encodeRows(op, disp)
	if err != nil {
		return nil, err
	}
	var claims []delegation.Claim
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		claims = nil
		nowT, now := d.now()
		if err := insertDispatch(t, op, disp, rows, nowT, false); err != nil {
			return err
		}
		exp := nowT.Add(ttl)
		for _, c := range disp.Delegation.Children {
			var token int64
			if err := t.queryRow(sqlClaimToken).Scan(&token); err != nil {
				return err
			}
			if _, err := t.exec(sqlChildStart, c.ID, owner, token, nanos(exp), now); err != nil {
				return err
			}
			claims = append(claims, delegation.Claim{Name: c.ID, Owner: owner, Token: token, Expires: exp})
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return claims, nil
}

func (s delegationStore) Claim(ctx context.Context, owner string, n int, ttl time.Duration) ([]delegation.Child, []delegation.Claim, error) {
	const op = "sqlite.delegation.Claim"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, nil, err
	}
	if err := delegation.CheckClaim(op, owner, n, ttl); err != nil {
		return nil, nil, err
	}
	// Instances poll; "nothing pending" comes from the read pool.
	if ok, err := d.any(ctx, sqlChildPendingAny); err != nil || !ok {
		return nil, nil, d.fail(op, err)
	}
	var children []delegation.Child
	var claims []delegation.Claim
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		children, claims = nil, nil
		nowT, now := d.now()
		seqs, err := scanInts(t.query(sqlChildPending, n))
		if err != nil {
			return err
		}
		exp := nowT.Add(ttl)
		for _, seq := range seqs {
			var token int64
			if err := t.queryRow(sqlClaimToken).Scan(&token); err != nil {
				return err
			}
			c, err := scanChild(t.queryRow(sqlChildGrant, seq, owner, token, nanos(exp), now))
			if err != nil {
				return err
			}
			children = append(children, c)
			claims = append(claims, delegation.Claim{Name: c.ID, Owner: owner, Token: token, Expires: exp})
		}
		return nil
	})
	if err != nil {
		return nil, nil, d.fail(op, err)
	}
	return children, claims, nil
}

func (s delegationStore) Renew(ctx context.Context, claims []delegation.Claim, ttl time.Duration, progress map[string]delegation.Progress) ([]delegation.Claim, error) {
	const op = "sqlite.delegation.Renew"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, errs.E(op, errs.Invalid, "renewal ttl %v, want more than 0", ttl)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	bodies := make([]any, len(claims))
	for i, c := range claims {
		if p, ok := progress[c.Name]; ok {
			b, err := json.Marshal(p)
			if err != nil {
				return nil, errs.Wrap(op, errs.Invalid, err)
			}
			bodies[i] = b
		}
	}
	var held []delegation.Claim
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		held = nil
		nowT, _ := d.now()
		exp := nowT.Add(ttl)
		for i, c := range claims {
			r, err := t.exec(sqlChildRenew, c.Name, c.Token, nanos(exp), bodies[i])
			if err != nil {
				return err
			}
			if n, err := r.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				c.Expires = exp
				held = append(held, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return held, nil
}

func (s delegationStore) End(ctx context.Context, c delegation.Claim, r delegation.Result) (*delegation.Completion, error) {
	const op = "sqlite.delegation.End"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := delegation.CheckEnd(op, r); err != nil {
		return nil, err
	}
	var cmp *delegation.Completion
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		child, err := scanChild(t.queryRow(sqlChildHeld, c.Name, c.Token))
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.LeaseLost, "child %q is not held by claim %d any more", c.Name, c.Token)
		}
		if err != nil {
			return err
		}
		if err := delegation.CheckSteers(op, child, r); err != nil {
			return err
		}
		nowT, _ := d.now()
		cmp, err = endChild(t, op, child, delegation.Ended(child, r), nowT)
		return err
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return cmp, nil
}

func (s delegationStore) Steer(ctx context.Context, id, text string) error {
	const op = "sqlite.delegation.Steer"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		child, err := scanChild(t.queryRow(sqlChildGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "no child %q", id)
		}
		if err != nil {
			return err
		}
		if err := delegation.CheckSteer(op, child); err != nil {
			return err
		}
		body, err := json.Marshal(append(child.Steers, text))
		if err != nil {
			return errs.Wrap(op, errs.Invalid, err)
		}
		_, err = t.exec(sqlChildSteer, id, body)
		return err
	})
	return d.fail(op, err)
}

func (s delegationStore) StopPending(ctx context.Context, id string, r delegation.Result) (bool, *delegation.Completion, error) {
	const op = "sqlite.delegation.StopPending"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return false, nil, err
	}
	if err := delegation.CheckEnd(op, r); err != nil {
		return false, nil, err
	}
	var stopped bool
	var cmp *delegation.Completion
	// The read and the write share the transaction, and so the single
	// writer with Claim's: the child is claimed or stopped, never both.
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		stopped, cmp = false, nil
		child, err := scanChild(t.queryRow(sqlChildGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "no child %q", id)
		}
		if err != nil || child.Status != delegation.StatusPending {
			return err
		}
		res := delegation.Ended(child, r)
		body, err := json.Marshal(res)
		if err != nil {
			return errs.Wrap(op, errs.Invalid, err)
		}
		nowT, _ := d.now()
		u, err := t.exec(sqlChildStop, child.ID, string(res.Status), body, nanos(nowT))
		if err != nil {
			return err
		}
		if n, err := u.RowsAffected(); err != nil || n != 1 {
			return err
		}
		stopped = true
		cmp, err = completeEnd(t, child, nowT)
		return err
	})
	if err != nil {
		return false, nil, d.fail(op, err)
	}
	return stopped, cmp, nil
}

// endChild records child's end with result r at now, inside t, adds its
// tokens to its parent conversation's totals (delegation.ParentUsage),
// and writes the completion that end makes (delegation.CompletionFor),
// if any.
func endChild(t *tx, op string, child delegation.Child, r delegation.Result, now time.Time) (*delegation.Completion, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	var conv string
	err = t.queryRow(sqlChildEnd, child.ID, string(r.Status), body, nanos(now), child.Token).Scan(&conv)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.E(op, errs.LeaseLost, "child %q is not held by claim %d any more", child.ID, child.Token)
	}
	if err != nil {
		return nil, err
	}
	g, err := scanDelegation(t.queryRow(sqlDelegationGet, child.Delegation))
	if err != nil {
		return nil, err
	}
	if u, ok := delegation.ParentUsage(conv, r); ok && g.Orchestrator == "" {
		if err := addUsage(t, u); err != nil {
			return nil, err
		}
	}
	return completeEnd(t, child, now)
}

// completeEnd writes, inside t, the completion that child's end, just
// recorded at now, makes (delegation.CompletionFor), if any: End's,
// Reap's and StopPending's one rule.
func completeEnd(t *tx, child delegation.Child, now time.Time) (*delegation.Completion, error) {
	g, err := scanDelegation(t.queryRow(sqlDelegationGet, child.Delegation))
	if err != nil {
		return nil, err
	}
	if g.Children, err = scanChildren(t.query(sqlChildrenOf, g.ID)); err != nil {
		return nil, err
	}
	for _, c := range g.Children {
		if c.ID == child.ID {
			child = c
		}
	}
	cmp := delegation.CompletionFor(g, child)
	if cmp == nil {
		return nil, nil
	}
	cmp.CreatedAt = now
	b, err := json.Marshal(cmp)
	if err != nil {
		return nil, err
	}
	if _, err := t.exec(sqlCompletionInsert, cmp.ID, cmp.Delegation, cmp.Conv, nanos(now), b); err != nil {
		return nil, err
	}
	return cmp, nil
}

func (s delegationStore) Reap(ctx context.Context, limit int) ([]delegation.Child, error) {
	const op = "sqlite.delegation.Reap"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, errs.E(op, errs.Invalid, "reap of %d, want at least 1", limit)
	}
	_, now := d.now()
	if ok, err := d.any(ctx, sqlChildExpiredAny, now); err != nil || !ok {
		return nil, d.fail(op, err)
	}
	var ended []delegation.Child
	// One transaction ends them all, each child with its completion: the
	// single writer (and BEGIN IMMEDIATE across processes) makes two
	// reapers take turns, and the second finds the first's ends done.
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		ended = nil
		nowT, now := d.now()
		expired, err := scanChildren(t.query(sqlChildExpired, now, limit))
		if err != nil {
			return err
		}
		for _, c := range expired {
			if _, err := endChild(t, op, c, delegation.Reaped(c, nowT), nowT); err != nil {
				return err
			}
			got, err := scanChild(t.queryRow(sqlChildGet, c.ID))
			if err != nil {
				return err
			}
			ended = append(ended, got)
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return ended, nil
}

func (s delegationStore) ClaimCompletions(ctx context.Context, worker string, n int, ttl time.Duration) ([]delegation.CompletionClaim, error) {
	const op = "sqlite.delegation.ClaimCompletions"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := delegation.CheckClaim(op, worker, n, ttl); err != nil {
		return nil, err
	}
	_, now := d.now()
	if ok, err := d.any(ctx, sqlCompletionDueAny, now); err != nil || !ok {
		return nil, d.fail(op, err)
	}
	var out []delegation.CompletionClaim
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		out = nil
		nowT, now := d.now()
		seqs, err := scanInts(t.query(sqlCompletionDue, now, n))
		if err != nil {
			return err
		}
		exp := nowT.Add(ttl)
		for _, seq := range seqs {
			cmp, token, err := scanCompletion(t.queryRow(sqlCompletionClaim, seq, worker, nanos(exp)))
			if err != nil {
				return err
			}
			out = append(out, delegation.CompletionClaim{Completion: cmp, Worker: worker, Token: token, Expires: exp})
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s delegationStore) AckCompletion(ctx context.Context, c delegation.CompletionClaim) error {
	const op = "sqlite.delegation.AckCompletion"
	return s.settle(ctx, op, c, func(t *tx, now int64) (sql.Result, error) {
		return t.exec(sqlCompletionAck, c.Completion.ID, c.Token, now)
	})
}

func (s delegationStore) RetryCompletion(ctx context.Context, c delegation.CompletionClaim, after time.Duration, reason string) error {
	const op = "sqlite.delegation.RetryCompletion"
	return s.settle(ctx, op, c, func(t *tx, now int64) (sql.Result, error) {
		return t.exec(sqlCompletionRetry, c.Completion.ID, c.Token, now+max(after, 0).Nanoseconds(), reason)
	})
}

// settle runs fn, a write under the completion claim c, and refuses with
// LeaseLost when it matched no row: the claim is not the current one.
func (s delegationStore) settle(ctx context.Context, op string, c delegation.CompletionClaim, fn func(t *tx, now int64) (sql.Result, error)) error {
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		_, now := d.now()
		r, err := fn(t, now)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errs.E(op, errs.LeaseLost, "completion %q is not held by claim %d", c.Completion.ID, c.Token)
		}
		return nil
	})
	return d.fail(op, err)
}

func (s delegationStore) Delegation(ctx context.Context, id string) (delegation.Delegation, error) {
	const op = "sqlite.delegation.Delegation"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return delegation.Delegation{}, err
	}
	g, err := scanDelegation(d.rdb.QueryRowContext(ctx, sqlDelegationGet, id))
	if err == nil {
		g.Children, err = scanChildren(d.rdb.QueryContext(ctx, sqlChildrenOf, id))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return delegation.Delegation{}, errs.E(op, errs.NotFound, "no delegation %q", id)
	}
	if err != nil {
		return delegation.Delegation{}, d.fail(op, err)
	}
	return g, nil
}

func (s delegationStore) Child(ctx context.Context, id string) (delegation.Child, error) {
	const op = "sqlite.delegation.Child"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return delegation.Child{}, err
	}
	c, err := scanChild(d.rdb.QueryRowContext(ctx, sqlChildGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return delegation.Child{}, errs.E(op, errs.NotFound, "no child %q", id)
	}
	if err != nil {
		return delegation.Child{}, d.fail(op, err)
	}
	return c, nil
}

func (s delegationStore) List(ctx context.Context, q delegation.Query) ([]delegation.Delegation, error) {
	const op = "sqlite.delegation.List"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	n := q.Limit
	if n <= 0 {
		n = defaultListLimit
	}
	var query string
	args := []any{n}
	switch {
	case q.Conv != "" && q.Active:
		query, args = sqlListConvActive, []any{q.Conv, n}
	case q.Conv != "":
		query, args = sqlListConv, []any{q.Conv, n}
	case q.Active:
		query = sqlListAllActive
	default:
		query = sqlListAll
	}
	rows, err := d.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, d.fail(op, err)
	}
	var out []delegation.Delegation
	for rows.Next() {
		g, err := scanDelegation(rows)
		if err != nil {
			rows.Close()
			return nil, d.fail(op, err)
		}
		out = append(out, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, d.fail(op, err)
	}
	for i := range out {
		if out[i].Children, err = scanChildren(d.rdb.QueryContext(ctx, sqlChildrenOf, out[i].ID)); err != nil {
			return nil, d.fail(op, err)
		}
	}
	return out, nil
}

func (s delegationStore) Completions(ctx context.Context, id string) ([]delegation.Completion, error) {
	const op = "sqlite.delegation.Completions"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	rows, err := d.rdb.QueryContext(ctx, sqlCompletionsOf, id)
	if err != nil {
		return nil, d.fail(op, err)
	}
	defer rows.Close()
	var out []delegation.Completion
	for rows.Next() {
		c, _, err := scanCompletion(rows)
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

func (s delegationStore) Active(ctx context.Context, conv string) (int, error) {
	const op = "sqlite.delegation.Active"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return 0, err
	}
	var n int
	if err := d.rdb.QueryRowContext(ctx, sqlActive, conv).Scan(&n); err != nil {
		return 0, d.fail(op, err)
	}
	return n, nil
}

// any reports whether query, a SELECT 1 … LIMIT 1, finds a row on the
// read pool.
func (d *DB) any(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := d.rdb.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanDelegation(s scanner) (delegation.Delegation, error) {
	var g delegation.Delegation
	var id string
	var at int64
	var body []byte
	if err := s.Scan(&id, &at, &body); err != nil {
		return g, err
	}
	if err := json.Unmarshal(body, &g); err != nil {
		return g, err
	}
	g.ID, g.CreatedAt, g.Children = id, fromNanos(at), nil
	return g, nil
}

// scanChild reads the columns of childCols.
func scanChild(s scanner) (delegation.Child, error) {
	var c delegation.Child
	var id, dlg, status, owner string
	var idx int
	var token, started, ended int64
	var exp sql.NullInt64
	var body, progress, result, steers []byte
	if err := s.Scan(&id, &dlg, &idx, &status, &owner, &token, &exp, &started, &ended, &body, &progress, &result, &steers); err != nil {
		return c, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, err
	}
	c.ID, c.Delegation, c.Index, c.Status, c.Owner, c.Token = id, dlg, idx, delegation.Status(status), owner, token
	if exp.Valid {
		c.OwnerExpires = fromNanos(exp.Int64)
	}
	if started != 0 {
		c.StartedAt = fromNanos(started)
	}
	if ended != 0 {
		c.EndedAt = fromNanos(ended)
	}
	if progress != nil {
		if err := json.Unmarshal(progress, &c.Progress); err != nil {
			return c, err
		}
	}
	if result != nil {
		c.Result = new(delegation.Result)
		if err := json.Unmarshal(result, c.Result); err != nil {
			return c, err
		}
	}
	if steers != nil {
		if err := json.Unmarshal(steers, &c.Steers); err != nil {
			return c, err
		}
	}
	return c, nil
}

// scanCompletion reads the columns of cmpCols, and the claim token.
func scanCompletion(s scanner) (delegation.Completion, int64, error) {
	var c delegation.Completion
	var state, lastErr string
	var token, created, delivered int64
	var attempts int
	var body []byte
	if err := s.Scan(&state, &token, &attempts, &lastErr, &created, &delivered, &body); err != nil {
		return c, 0, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, 0, err
	}
	c.Delivered, c.Attempts, c.LastError, c.CreatedAt = state == "delivered", attempts, lastErr, fromNanos(created)
	if delivered != 0 {
		c.DeliveredAt = fromNanos(delivered)
	}
	return c, token, nil
}

// scanChildren reads the rows of a query of childCols, given with the
// query's error, as a transaction's query and the read pool's return
// them.
func scanChildren(rows *sql.Rows, err error) ([]delegation.Child, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []delegation.Child
	for rows.Next() {
		c, err := scanChild(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// scanInts reads the rows of a query of one integer column.
func scanInts(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
