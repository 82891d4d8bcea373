package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/errs"
)

// approvalStore is the DB seen as an approvals.Store. Its keys, after
// the prefix C of the shard of the approval's conversation (convPfx; P
// itself in the one-server layout):
//
//	Cappr:a:<id>              hash: b the approval as asked (encoded,
//	                          pending), ct its conversation's tag, k its
//	                          key, and once decided d the decision, by who
//	                          decided, at when (Unix ns), m the question's
//	                          message id ('' to keep b's)
//	C{<conv>}:apprp           sorted set of the conversation's pending
//	                          approvals, by sequence
//	C{<conv>}:apprd           sorted set of its decided approvals, by
//	                          decision ms
//	Cappr:pending             sorted set of the shard's pending approvals,
//	                          by sequence
//	Cappr:decided             sorted set of the shard's decided approvals,
//	                          by decision ms
//	Cappr:seq                 the shard's sequence counter (the order of
//	                          asking)
//	C{<conv>}:grants:<session> hash: pattern → the session's grant, encoded
//	Pappr:always              hash: pattern → an always grant, encoded
//
// A question and its expiry of the earlier ones under its key is one
// appr_create call, a decision one appr_decide, which decides only a
// pending approval; a list is one appr_read a shard. A grant is one
// HSET, a revoke one HDEL.
//
// An approval's id is the approver's (a random one), which does not
// name its conversation: Approval, Decide and SetMessage find its shard
// by asking every shard (everyshard.go) and remember it, and in the
// sharded layout CreateApproval asks too, so that an id any shard holds
// is a Conflict. The lists of every conversation read every shard and
// merge: the pending by when they were asked (each shard's in its order
// of asking), the decided by decision time, newest first.
type approvalStore struct{ db *DB }

var _ approvals.Store = approvalStore{}

// Approvals returns the store of approvals and grants.
func (db *DB) Approvals() approvals.Store { return approvalStore{db: db} }

// apprKey is one of the approvals' keys of the shard whose prefix is
// pfx: <pfx>appr:<suffix>.
func apprKey(pfx, suffix string) string { return pfx + "appr:" + suffix }

// kindApproval names the approvals' ids among those locate remembers.
const kindApproval = "appr:"

// approvalKey is the key locate looks for: an approval's hash.
func approvalKey(pfx, id string) string { return apprKey(pfx, "a:"+id) }

// grantsKey is the hash of a scope's grants: a session's, or (both
// empty) the always grants.
func (db *DB) grantsKey(conv, session string) string {
	if conv == "" {
		return apprKey(db.prefix, "always")
	}
	return db.convKeyOf(conv, "grants:"+session)
}

// approvalShard is the shard approval id is in; false when no shard
// has it (in the one-server layout: always shard 0, unasked).
func (db *DB) approvalShard(ctx context.Context, op, id string) (int, bool, error) {
	at, err := db.locate(ctx, op, kindApproval, []string{id}, approvalKey)
	if err != nil {
		return 0, false, err
	}
	i, ok := at[id]
	return i, ok, nil
}

func (s approvalStore) CreateApproval(ctx context.Context, a approvals.Approval) error {
	const op = "redis.approvals.CreateApproval"
	db := s.db
	if err := approvals.CheckApproval(op, a); err != nil {
		return err
	}
	body, err := json.Marshal(a)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	shard := db.shards.of(a.Conv)
	if db.shards.sharded() {
		// Its id in another shard would not be seen by the script.
		if i, ok, err := db.approvalShard(ctx, op, a.ID); err != nil {
			return err
		} else if ok && i != shard {
			return errs.E(op, errs.Conflict, "approval %q exists", a.ID)
		}
	}
	pfx, tag := db.shards.pfx(shard), convTag(a.Conv)
	v, err := db.run(ctx, op, scriptApprCreate,
		[]string{apprKey(pfx, "a:"+a.ID), db.convKeyOf(a.Conv, "apprp"), apprKey(pfx, "pending"),
			db.convKeyOf(a.Conv, "apprd"), apprKey(pfx, "decided"), apprKey(pfx, "seq")},
		pfx, a.ID, tag, a.Key, body, string(approvals.Expired), nsArg(a.CreatedAt), a.CreatedAt.UnixMilli())
	if err != nil {
		return err
	}
	if len(v) > 0 && str(v[0]) == "CONFLICT" {
		return errs.E(op, errs.Conflict, "approval %q exists", a.ID)
	}
	if err := status(op, v); err != nil {
		return err
	}
	db.remember(kindApproval, a.ID, shard)
	return nil
}

func (s approvalStore) Approval(ctx context.Context, id string) (approvals.Approval, error) {
	const op = "redis.approvals.Approval"
	db := s.db
	if err := db.check(op); err != nil {
		return approvals.Approval{}, err
	}
	i, ok, err := db.approvalShard(ctx, op, id)
	if err != nil {
		return approvals.Approval{}, err
	}
	if !ok {
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	v, err := db.client.HMGet(ctx, approvalKey(db.shards.pfx(i), id), "b", "d", "by", "at", "m").Result()
	if err != nil {
		return approvals.Approval{}, db.fail(op, err)
	}
	if len(v) != 5 || v[0] == nil {
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	return decodeApproval(op, v)
}

func (s approvalStore) Decide(ctx context.Context, id string, d approvals.Decision, by string, at time.Time, message string) (approvals.Approval, error) {
	const op = "redis.approvals.Decide"
	db := s.db
	if err := approvals.CheckDecide(op, id, d); err != nil {
		return approvals.Approval{}, err
	}
	i, ok, err := db.approvalShard(ctx, op, id)
	if err != nil {
		return approvals.Approval{}, err
	}
	if !ok {
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	pfx := db.shards.pfx(i)
	v, err := db.run(ctx, op, scriptApprDecide,
		[]string{apprKey(pfx, "a:"+id), apprKey(pfx, "pending"), apprKey(pfx, "decided")},
		pfx, id, string(d), by, nsArg(at), at.UnixMilli(), message)
	if err != nil {
		return approvals.Approval{}, err
	}
	switch {
	case len(v) == 6 && str(v[0]) == "OK":
		return decodeApproval(op, v[1:])
	case len(v) == 6 && str(v[0]) == "CONFLICT":
		a, err := decodeApproval(op, v[1:])
		if err != nil {
			return a, err
		}
		return a, errs.E(op, errs.Conflict, "approval %q was decided already (%s)", id, a.Decision)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	return approvals.Approval{}, status(op, v)
}

func (s approvalStore) SetMessage(ctx context.Context, id, message string) error {
	const op = "redis.approvals.SetMessage"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	if err := approvals.CheckMessage(op, id, message); err != nil {
		return err
	}
	// An approval is never removed, so one that exists now still does
	// when m is set: no script is needed to keep a stray hash out.
	i, ok, err := db.approvalShard(ctx, op, id)
	if err != nil {
		return err
	}
	if !ok {
		return errs.E(op, errs.NotFound, "no approval %q", id)
	}
	key := approvalKey(db.shards.pfx(i), id)
	n, err := db.client.Exists(ctx, key).Result()
	if err != nil {
		return db.fail(op, err)
	}
	if n == 0 {
		return errs.E(op, errs.NotFound, "no approval %q", id)
	}
	return db.fail(op, db.client.HSet(ctx, key, "m", message).Err())
}

func (s approvalStore) PendingApprovals(ctx context.Context, conv string) ([]approvals.Approval, error) {
	const op = "redis.approvals.PendingApprovals"
	db := s.db
	if conv != "" {
		return s.read(ctx, op, db.convPfx(conv), db.convKeyOf(conv, "apprp"), false, 0)
	}
	parts, err := everyShard(ctx, db, func(ctx context.Context, i int) ([]approvals.Approval, error) {
		pfx := db.shards.pfx(i)
		return s.read(ctx, op, pfx, apprKey(pfx, "pending"), false, 0)
	})
	if err != nil {
		return nil, err
	}
	return mergeOrdered(parts, func(a, b approvals.Approval) bool { return a.CreatedAt.Before(b.CreatedAt) }), nil
}

func (s approvalStore) Decided(ctx context.Context, conv string, n int) ([]approvals.Approval, error) {
	const op = "redis.approvals.Decided"
	db := s.db
	if conv != "" {
		return s.read(ctx, op, db.convPfx(conv), db.convKeyOf(conv, "apprd"), true, n)
	}
	parts, err := everyShard(ctx, db, func(ctx context.Context, i int) ([]approvals.Approval, error) {
		pfx := db.shards.pfx(i)
		return s.read(ctx, op, pfx, apprKey(pfx, "decided"), true, n)
	})
	if err != nil {
		return nil, err
	}
	// Newest first, as one index orders them: by decision ms, then id.
	out := mergeOrdered(parts, func(a, b approvals.Approval) bool {
		am, bm := a.DecidedAt.UnixMilli(), b.DecidedAt.UnixMilli()
		return am > bm || (am == bm && a.ID > b.ID)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// read runs appr_read on index of the shard whose prefix is pfx, from
// its highest score down when newest, at most n approvals (0 or less:
// all).
func (s approvalStore) read(ctx context.Context, op, pfx, index string, newest bool, n int) ([]approvals.Approval, error) {
	db := s.db
	rev, last := "0", int64(-1)
	if newest {
		rev = "1"
	}
	if n > 0 {
		last = int64(n) - 1
	}
	v, err := db.run(ctx, op, scriptApprRead, []string{index}, pfx, rev, last)
	if err != nil {
		return nil, err
	}
	if len(v)%5 != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
	}
	out := make([]approvals.Approval, 0, len(v)/5)
	for i := 0; i < len(v); i += 5 {
		a, err := decodeApproval(op, v[i:i+5])
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeApproval reads an approval from its hash's b, d, by, at and m.
func decodeApproval(op string, v []any) (approvals.Approval, error) {
	var a approvals.Approval
	if err := json.Unmarshal([]byte(str(v[0])), &a); err != nil {
		return a, errs.Wrap(op, errs.Internal, err)
	}
	a.Decision, a.DecidedBy = approvals.Decision(str(v[1])), str(v[2])
	if ns := num(v[3]); ns != 0 {
		a.DecidedAt = time.Unix(0, ns).UTC()
	}
	if m := str(v[4]); m != "" {
		a.MessageID = m
	}
	return a, nil
}

// nsArg is a time as the approvals' hashes keep it: Unix ns, 0 for none.
func nsArg(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func (s approvalStore) AddGrant(ctx context.Context, g approvals.Grant) error {
	const op = "redis.approvals.AddGrant"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	if err := approvals.CheckGrant(op, g); err != nil {
		return err
	}
	body, err := json.Marshal(g)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	return db.fail(op, db.client.HSet(ctx, db.grantsKey(g.Conv, g.Session), g.Pattern, body).Err())
}

func (s approvalStore) Grants(ctx context.Context, conv, session string) ([]approvals.Grant, error) {
	const op = "redis.approvals.Grants"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	if err := approvals.CheckScope(op, conv, session); err != nil {
		return nil, err
	}
	// The session's hash is in the conversation's slot, the always
	// grants' in their own: two reads, sent together.
	keys := []string{db.grantsKey("", "")}
	if conv != "" {
		keys = append([]string{db.grantsKey(conv, session)}, keys...)
	}
	pipe := db.client.Pipeline()
	reads := make([]*goredis.StringSliceCmd, len(keys))
	for i, k := range keys {
		reads[i] = pipe.HVals(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, db.fail(op, err)
	}
	var out []approvals.Grant
	for _, r := range reads {
		scope := make([]approvals.Grant, 0, len(r.Val()))
		for _, b := range r.Val() {
			var g approvals.Grant
			if err := json.Unmarshal([]byte(b), &g); err != nil {
				return nil, errs.Wrap(op, errs.Internal, err)
			}
			scope = append(scope, g)
		}
		// The session's first, then the always grants, each by pattern.
		slices.SortFunc(scope, func(a, b approvals.Grant) int { return cmp.Compare(a.Pattern, b.Pattern) })
		out = append(out, scope...)
	}
	return out, nil
}

func (s approvalStore) Revoke(ctx context.Context, pattern string) (bool, error) {
	const op = "redis.approvals.Revoke"
	db := s.db
	if err := db.check(op); err != nil {
		return false, err
	}
	if err := approvals.CheckPattern(op, pattern); err != nil {
		return false, err
	}
	n, err := db.client.HDel(ctx, db.grantsKey("", ""), pattern).Result()
	if err != nil {
		return false, db.fail(op, err)
	}
	return n > 0, nil
}
