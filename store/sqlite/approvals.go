package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/errs"
)

// approvalStore is the DB seen as an approvals.Store.
type approvalStore struct{ d *DB }

var _ approvals.Store = approvalStore{}

// Approvals returns the store of approvals and grants.
func (d *DB) Approvals() approvals.Store { return approvalStore{d: d} }

// An approval is one row of approvals, its encoding beside the columns
// the lists read: pending ones by creation (seq), decided ones by
// decided_at, newest first. A grant is one row of approval_grants, the
// always grants under conv and session ”.
const (
	sqlApprInsert = `INSERT INTO approvals (id, conv, key, body) VALUES (?1, ?2, ?3, ?4)`
	// The other pending approvals of a conversation under a key, which a
	// new one expires.
	sqlApprSameKey = `SELECT seq, body FROM approvals WHERE conv = ?1 AND key = ?2 AND decision = '' ORDER BY seq`
	sqlApprDecide  = `UPDATE approvals SET decision = ?2, decided_at = ?3, body = ?4 WHERE seq = ?1`
	sqlApprGet     = `SELECT seq, body FROM approvals WHERE id = ?1`

	sqlApprPending    = `SELECT seq, body FROM approvals WHERE conv = ?1 AND decision = '' ORDER BY seq`
	sqlApprPendingAll = `SELECT seq, body FROM approvals WHERE decision = '' ORDER BY seq`
	sqlApprDecided    = `SELECT seq, body FROM approvals WHERE conv = ?1 AND decision <> '' ORDER BY decided_at DESC, seq DESC LIMIT ?2`
	sqlApprDecidedAll = `SELECT seq, body FROM approvals WHERE decision <> '' ORDER BY decided_at DESC, seq DESC LIMIT ?1`
	sqlGrantPut       = `INSERT INTO approval_grants (conv, session, pattern, body) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (conv, session, pattern) DO UPDATE SET body = excluded.body`
	sqlGrantsOf       = `SELECT body FROM approval_grants WHERE (conv = ?1 AND session = ?2) OR (conv = '' AND session = '') ORDER BY conv = '', pattern`
	sqlGrantRevoke    = `DELETE FROM approval_grants WHERE conv = '' AND session = '' AND pattern = ?1`
)

func (s approvalStore) CreateApproval(ctx context.Context, a approvals.Approval) error {
	const op = "sqlite.approvals.CreateApproval"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := approvals.CheckApproval(op, a); err != nil {
		return err
	}
	body, err := json.Marshal(a)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		if _, err := t.exec(sqlApprInsert, a.ID, a.Conv, a.Key, body); err != nil {
			return conflict(op, err, "approval %q exists", a.ID)
		}
		earlier, err := scanRows(scanApproval)(t.query(sqlApprSameKey, a.Conv, a.Key))
		if err != nil {
			return err
		}
		for _, e := range earlier {
			if e.ID == a.ID {
				continue
			}
			e.Decision, e.DecidedAt = approvals.Expired, a.CreatedAt
			if err := decide(t, e); err != nil {
				return err
			}
		}
		return nil
	})
	return d.fail(op, err)
}

func (s approvalStore) Approval(ctx context.Context, id string) (approvals.Approval, error) {
	const op = "sqlite.approvals.Approval"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return approvals.Approval{}, err
	}
	a, err := scanApproval(d.rdb.QueryRowContext(ctx, sqlApprGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	if err != nil {
		return approvals.Approval{}, d.fail(op, err)
	}
	return a.Approval, nil
}

func (s approvalStore) Decide(ctx context.Context, id string, dec approvals.Decision, by string, at time.Time, message string) (approvals.Approval, error) {
	const op = "sqlite.approvals.Decide"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return approvals.Approval{}, err
	}
	if err := approvals.CheckDecide(op, id, dec); err != nil {
		return approvals.Approval{}, err
	}
	var out approvals.Approval
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		out = approvals.Approval{}
		a, err := scanApproval(t.queryRow(sqlApprGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "no approval %q", id)
		}
		if err != nil {
			return err
		}
		if out = a.Approval; !a.Pending() {
			return errs.E(op, errs.Conflict, "approval %q was decided already (%s)", id, a.Decision)
		}
		a.Decision, a.DecidedBy, a.DecidedAt = dec, by, at
		if message != "" {
			a.MessageID = message
		}
		out = a.Approval
		return decide(t, a)
	})
	return out, d.fail(op, err)
}

func (s approvalStore) SetMessage(ctx context.Context, id, message string) error {
	const op = "sqlite.approvals.SetMessage"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := approvals.CheckMessage(op, id, message); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		a, err := scanApproval(t.queryRow(sqlApprGet, id))
		if errors.Is(err, sql.ErrNoRows) {
			return errs.E(op, errs.NotFound, "no approval %q", id)
		}
		if err != nil {
			return err
		}
		a.MessageID = message
		return decide(t, a)
	})
	return d.fail(op, err)
}

func (s approvalStore) PendingApprovals(ctx context.Context, conv string) ([]approvals.Approval, error) {
	const op = "sqlite.approvals.PendingApprovals"
	if conv == "" {
		return s.list(ctx, op, sqlApprPendingAll)
	}
	return s.list(ctx, op, sqlApprPending, conv)
}

func (s approvalStore) Decided(ctx context.Context, conv string, n int) ([]approvals.Approval, error) {
	const op = "sqlite.approvals.Decided"
	if conv == "" {
		return s.list(ctx, op, sqlApprDecidedAll, limit(n))
	}
	return s.list(ctx, op, sqlApprDecided, conv, limit(n))
}

// list reads the approvals query finds on the read pool.
func (s approvalStore) list(ctx context.Context, op, query string, args ...any) ([]approvals.Approval, error) {
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	rows, err := scanRows(scanApproval)(d.rdb.QueryContext(ctx, query, args...))
	if err != nil {
		return nil, d.fail(op, err)
	}
	out := make([]approvals.Approval, len(rows))
	for i, r := range rows {
		out[i] = r.Approval
	}
	return out, nil
}

func (s approvalStore) AddGrant(ctx context.Context, g approvals.Grant) error {
	const op = "sqlite.approvals.AddGrant"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := approvals.CheckGrant(op, g); err != nil {
		return err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlGrantPut, g.Conv, g.Session, g.Pattern, body)
		return err
	})
	return d.fail(op, err)
}

func (s approvalStore) Grants(ctx context.Context, conv, session string) ([]approvals.Grant, error) {
	const op = "sqlite.approvals.Grants"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	if err := approvals.CheckScope(op, conv, session); err != nil {
		return nil, err
	}
	out, err := scanRows(scanGrant)(d.rdb.QueryContext(ctx, sqlGrantsOf, conv, session))
	if err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

func (s approvalStore) Revoke(ctx context.Context, pattern string) (bool, error) {
	const op = "sqlite.approvals.Revoke"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return false, err
	}
	if err := approvals.CheckPattern(op, pattern); err != nil {
		return false, err
	}
	var gone bool
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		n, err := rowsOf(t.exec(sqlGrantRevoke, pattern))
		gone = n > 0
		return err
	})
	return gone, d.fail(op, err)
}

// storedApproval is an approval and its row.
type storedApproval struct {
	approvals.Approval
	seq int64
}

// decide writes a's decision over its row.
func decide(t *tx, a storedApproval) error {
	body, err := json.Marshal(a.Approval)
	if err != nil {
		return err
	}
	_, err = t.exec(sqlApprDecide, a.seq, string(a.Decision), nanos(a.DecidedAt), body)
	return err
}

// scanApproval reads an approval's row and encoding.
func scanApproval(s scanner) (storedApproval, error) {
	var a storedApproval
	var body []byte
	if err := s.Scan(&a.seq, &body); err != nil {
		return a, err
	}
	return a, json.Unmarshal(body, &a.Approval)
}

// scanGrant reads a grant's encoding.
func scanGrant(s scanner) (approvals.Grant, error) {
	var g approvals.Grant
	var body []byte
	if err := s.Scan(&body); err != nil {
		return g, err
	}
	return g, json.Unmarshal(body, &g)
}
