package redis

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// delegationStore is the DB seen as a delegation.Store. doc.go lists
// its keys; every change that touches more than one is one of the
// dlg_*.lua functions, or, for a dispatch, the DLGPUT write dispatchOp
// makes (run by a turn's finish, or by dlg_create).
type delegationStore struct{ db *DB }

var _ delegation.Store = delegationStore{}

// Delegations returns the store of delegations, their children and
// their completions.
func (db *DB) Delegations() delegation.Store { return delegationStore{db: db} }

// dlgKey is one of the delegation keys that no conversation owns:
// Pdlg:<suffix>.
func (db *DB) dlgKey(suffix string) string { return db.prefix + "dlg:" + suffix }

// childFields and cmpFields are the hash fields the scripts reply with,
// in the order of lib_delegation.lua's CHILD_FIELDS and CMP_FIELDS.
var (
	childFields = []string{"t", "s", "o", "tok", "exp", "p", "r", "st", "en", "sv"}
	cmpFields   = []string{"dl", "u", "r", "n", "st", "at", "dat", "a", "e", "tok"}
)

// The indexes of cmpFields a decode reads.
const (
	cmpDelegation = iota
	cmpUnit
	cmpResults
	cmpTotal
	cmpState
	cmpCreated
	cmpDelivered
	cmpAttempts
	cmpError
	cmpToken
)

// defaultListLimit is List's limit when the query gives none.
const defaultListLimit = 50

// dispatchOp is the write of a dispatch: lib_delegation.lua's DLGPUT,
// which a turn's finish runs among its writes and dlg_create outside a
// turn. It counts the conversation's active children in the step that
// writes, so two dispatches arriving together cannot both pass the
// limit (delegation.Dispatch.Limit). A dispatch without a creation time
// gets the script's now. Nothing here checks that the ids are new:
// dlg_create does for Create, and a turn's dispatch carries ids the turn
// made (delegation.NewID).
func (db *DB) dispatchOp(op string, disp delegation.Dispatch) (writeOp, error) {
	if err := delegation.CheckDispatch(op, disp); err != nil {
		return writeOp{}, err
	}
	return db.checkedDispatchOp(op, disp)
}

// checkedDispatchOp is dispatchOp of a dispatch already checked.
func (db *DB) checkedDispatchOp(op string, disp delegation.Dispatch) (writeOp, error) {
	g := disp.Delegation
	base := g
	base.Children, base.CreatedAt = nil, time.Time{}
	body, err := json.Marshal(base)
	if err != nil {
		return writeOp{}, errs.Wrap(op, errs.Invalid, err)
	}
	var at any = ""
	if !g.CreatedAt.IsZero() {
		at = g.CreatedAt.UnixMilli()
	}
	n := len(g.Children)
	args := make([]any, 0, 9+5*n)
	args = append(args, db.prefix, g.ID, convTag(g.Conv), disp.Limit, body, flag(g.Independent), at, 0, n)
	for _, c := range g.Children {
		child := delegation.Pending(c)
		t, err := json.Marshal(child)
		if err != nil {
			return writeOp{}, errs.Wrap(op, errs.Invalid, err)
		}
		rejected, err := json.Marshal(delegation.Rejected(child, disp.Limit, nil))
		if err != nil {
			return writeOp{}, errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, c.ID, c.Index, c.Group, t, rejected)
	}
	return writeOp{cmd: "DLGPUT", args: args, now: 8}, nil
}

// dispatchKeys are the keys dlg_create and dlg_start take.
func (db *DB) dispatchKeys(g delegation.Delegation) []string {
	keys := make([]string, 0, 2+len(g.Children))
	keys = append(keys, db.convKey(convTag(g.Conv), "dlgact"), db.dlgKey("d:"+g.ID))
	for _, c := range g.Children {
		keys = append(keys, db.dlgKey("c:"+c.ID))
	}
	return keys
}

func (s delegationStore) Create(ctx context.Context, disp delegation.Dispatch) error {
	const op = "redis.delegation.Create"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	o, err := db.dispatchOp(op, disp)
	if err != nil {
		return err
	}
	v, err := db.run(ctx, op, scriptDlgCreate, db.dispatchKeys(disp.Delegation), appendOps([]any{db.nowArg(), disp.Limit}, []writeOp{o})...)
	if err != nil {
		return err
	}
	return dispatchStatus(op, disp, v)
}

// dispatchStatus is the error of dlg_create's or dlg_start's reply v.
func dispatchStatus(op string, disp delegation.Dispatch, v []any) error {
	g := disp.Delegation
	switch {
	case len(v) > 0 && str(v[0]) == "CONFLICT":
		return errs.E(op, errs.Conflict, "delegation %q or one of its children exists", g.ID)
	case len(v) == 2 && str(v[0]) == "FULL":
		if err := delegation.Fits(op, disp, int(num(v[1]))); err != nil {
			return err
		}
		return errs.E(op, errs.Internal, "the store found no room for delegation %q, which fits beside %d", g.ID, num(v[1]))
	}
	return status(op, v)
}

func (s delegationStore) Start(ctx context.Context, disp delegation.Dispatch, owner string, ttl time.Duration) ([]delegation.Claim, error) {
	const op = "redis.delegation.Start"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	if err := delegation.CheckStart(op, disp, owner, ttl); err != nil {
		return nil, err
	}
	o, err := db.checkedDispatchOp(op, disp)
	if err != nil {
		return nil, err
	}
	v, err := db.run(ctx, op, scriptDlgStart, db.dispatchKeys(disp.Delegation),
		appendOps([]any{db.nowArg(), disp.Limit, db.prefix, owner, durMS(ttl)}, []writeOp{o})...)
	if err != nil {
		return nil, err
	}
	g := disp.Delegation
	if len(v) == 0 || str(v[0]) != "OK" {
		return nil, dispatchStatus(op, disp, v)
	}
	if len(v) != 2+len(g.Children) {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	exp := msTime(v[1])
	claims := make([]delegation.Claim, len(g.Children))
	for i, c := range g.Children {
		claims[i] = delegation.Claim{Name: c.ID, Owner: owner, Token: num(v[2+i]), Expires: exp}
	}
	return claims, nil
}

func (s delegationStore) Claim(ctx context.Context, owner string, n int, ttl time.Duration) ([]delegation.Child, []delegation.Claim, error) {
	const op = "redis.delegation.Claim"
	db := s.db
	if err := delegation.CheckClaim(op, owner, n, ttl); err != nil {
		return nil, nil, err
	}
	v, err := db.run(ctx, op, scriptDlgClaim, nil, db.prefix, owner, n, durMS(ttl), db.nowArg())
	if err != nil {
		return nil, nil, err
	}
	if len(v) < 1 {
		return nil, nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	exp := msTime(v[0])
	children, _, err := decodeChildren(op, v[1:], -1)
	if err != nil {
		return nil, nil, err
	}
	claims := make([]delegation.Claim, len(children))
	for i, c := range children {
		claims[i] = delegation.Claim{Name: c.ID, Owner: owner, Token: c.Token, Expires: exp}
	}
	return children, claims, nil
}

func (s delegationStore) Renew(ctx context.Context, claims []delegation.Claim, ttl time.Duration, progress map[string]delegation.Progress) ([]delegation.Claim, error) {
	const op = "redis.delegation.Renew"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, errs.E(op, errs.Invalid, "renewal ttl %v, want more than 0", ttl)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 3+3*len(claims))
	args = append(args, db.prefix, durMS(ttl), db.nowArg())
	for _, c := range claims {
		var p any = ""
		if pr, ok := progress[c.Name]; ok {
			b, err := json.Marshal(pr)
			if err != nil {
				return nil, errs.Wrap(op, errs.Invalid, err)
			}
			p = b
		}
		args = append(args, c.Name, c.Token, p)
	}
	v, err := db.run(ctx, op, scriptDlgRenew, nil, args...)
	if err != nil {
		return nil, err
	}
	if len(v) != 1+len(claims) {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	exp := msTime(v[0])
	var held []delegation.Claim
	for i, c := range claims {
		if num(v[1+i]) == 1 {
			c.Expires = exp
			held = append(held, c)
		}
	}
	return held, nil
}

func (s delegationStore) End(ctx context.Context, c delegation.Claim, r delegation.Result) (*delegation.Completion, error) {
	const op = "redis.delegation.End"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	if err := delegation.CheckEnd(op, r); err != nil {
		return nil, err
	}
	// The child as dispatched never changes, so reading it before the
	// script that checks the claim is safe: it only names the result.
	child, err := s.child(ctx, op, c.Name)
	if errs.Is(err, errs.NotFound) {
		return nil, errs.E(op, errs.LeaseLost, "child %q is not held by claim %d", c.Name, c.Token)
	}
	if err != nil {
		return nil, err
	}
	_, cmp, err := s.end(ctx, op, child, c.Token, delegation.Ended(child, r), false)
	return cmp, err
}

// end runs dlg_end for child under token with result r (only once the
// claim ran out, when reap is set) and returns the child as ended and
// the completion its end made, if any.
func (s delegationStore) end(ctx context.Context, op string, child delegation.Child, token int64, r delegation.Result, reap bool) (delegation.Child, *delegation.Completion, error) {
	db := s.db
	body, err := json.Marshal(r)
	if err != nil {
		return child, nil, errs.Wrap(op, errs.Invalid, err)
	}
	reapArg := ""
	if reap {
		reapArg = "1"
	}
	// The parent's conversation is known in the script, by its tag;
	// the fields of its totals are named here (sessions.UsageKeys).
	usage := []any{"", 0, "", 0}
	if u, ok := delegation.ParentUsage("", r); ok {
		prompt, completion := sessions.UsageKeys(u.Model)
		usage = []any{prompt, u.Prompt, completion, u.Completion}
	}
	v, err := db.run(ctx, op, scriptDlgEnd, []string{db.dlgKey("c:" + child.ID)},
		append([]any{db.prefix, child.ID, token, string(r.Status), body, db.nowArg(), reapArg, r.Steers}, usage...)...)
	if err != nil {
		return child, nil, err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "LOST":
		return child, nil, errs.E(op, errs.LeaseLost, "child %q is not held by claim %d", child.ID, token)
	case len(v) > 0 && str(v[0]) == "STEERS":
		return child, nil, errs.E(op, errs.Conflict, "child %q has more steers recorded than its result counts (%d): add the rest as not landed", child.ID, r.Steers)
	}
	return decodeEnd(op, child, v)
}

func (s delegationStore) Steer(ctx context.Context, id, text string) error {
	const op = "redis.delegation.Steer"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	enc, err := json.Marshal(text)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	v, err := db.run(ctx, op, scriptDlgSteer, []string{db.dlgKey("c:" + id)}, enc, delegation.MaxSteers)
	if err != nil {
		return err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return errs.E(op, errs.NotFound, "no child %q", id)
	case len(v) == 2 && str(v[0]) == "STATE":
		return delegation.CheckSteer(op, delegation.Child{ID: id, Status: delegation.Status(str(v[1]))})
	case len(v) > 0 && str(v[0]) == "FULL":
		return delegation.CheckSteer(op, delegation.Child{ID: id, Status: delegation.StatusRunning, Steers: make([]string, delegation.MaxSteers)})
	}
	return status(op, v)
}

func (s delegationStore) StopPending(ctx context.Context, id string, r delegation.Result) (bool, *delegation.Completion, error) {
	const op = "redis.delegation.StopPending"
	db := s.db
	if err := db.check(op); err != nil {
		return false, nil, err
	}
	if err := delegation.CheckEnd(op, r); err != nil {
		return false, nil, err
	}
	// As in End, the child as dispatched names the result; its status
	// here only spares a script call, dlg_stop checks it again.
	child, err := s.child(ctx, op, id)
	if err != nil || child.Status != delegation.StatusPending {
		return false, nil, err
	}
	body, err := json.Marshal(delegation.Ended(child, r))
	if err != nil {
		return false, nil, errs.Wrap(op, errs.Invalid, err)
	}
	v, err := db.run(ctx, op, scriptDlgStop, []string{db.dlgKey("c:" + id)},
		db.prefix, id, string(r.Status), body, db.nowArg())
	if err != nil {
		return false, nil, err
	}
	if len(v) > 0 && str(v[0]) == "NOTPENDING" {
		return false, nil, nil
	}
	_, cmp, err := decodeEnd(op, child, v)
	if err != nil {
		return false, nil, err
	}
	return true, cmp, nil
}

// decodeEnd reads the reply of dlg_end or dlg_stop for child: the child
// as ended and the completion its end made, if any.
func decodeEnd(op string, child delegation.Child, v []any) (delegation.Child, *delegation.Completion, error) {
	if err := status(op, v); err != nil {
		return child, nil, err
	}
	ended, rest, err := decodeChildren(op, v[1:], 1)
	if err != nil || len(ended) != 1 {
		return child, nil, errs.E(op, errs.Internal, "unexpected script reply %v (%v)", v, err)
	}
	if len(rest) == 0 {
		return ended[0], nil, nil
	}
	if len(rest) != 6 {
		return ended[0], nil, errs.E(op, errs.Internal, "unexpected completion in script reply %v", rest)
	}
	cmp, err := decodeCompletion(op, str(rest[0]), child.Delegation, str(rest[1]), str(rest[2]), rest[3], rest[4], rest[5])
	if err != nil {
		return ended[0], nil, err
	}
	return ended[0], &cmp, nil
}

func (s delegationStore) Reap(ctx context.Context, limit int) ([]delegation.Child, error) {
	const op = "redis.delegation.Reap"
	db := s.db
	if limit < 1 {
		return nil, errs.E(op, errs.Invalid, "reap of %d, want at least 1", limit)
	}
	v, err := db.run(ctx, op, scriptDlgExpired, nil, db.prefix, limit, db.nowArg())
	if err != nil {
		return nil, err
	}
	if len(v) < 1 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	now := msTime(v[0])
	expired, _, err := decodeChildren(op, v[1:], -1)
	if err != nil {
		return nil, err
	}
	// Each child ends in its own step, which checks again that it runs
	// under the same claim and that the claim ran out: a reaper that
	// lost the race to another, or to a renewal, ends nothing.
	var out []delegation.Child
	for _, c := range expired {
		ended, _, err := s.end(ctx, op, c, c.Token, delegation.Reaped(c, now), true)
		if errs.Is(err, errs.LeaseLost) || errs.Is(err, errs.Conflict) {
			// Another reaper or a renewal came first, or a steer since
			// the read: the next reap reads it again.
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, ended)
	}
	return out, nil
}

func (s delegationStore) ClaimCompletions(ctx context.Context, worker string, n int, ttl time.Duration) ([]delegation.CompletionClaim, error) {
	const op = "redis.delegation.ClaimCompletions"
	db := s.db
	if err := delegation.CheckClaim(op, worker, n, ttl); err != nil {
		return nil, err
	}
	v, err := db.run(ctx, op, scriptDlgCmpClaim, nil, db.prefix, worker, n, durMS(ttl), db.nowArg())
	if err != nil {
		return nil, err
	}
	if len(v) < 1 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	exp := msTime(v[0])
	cmps, tokens, err := decodeCompletions(op, v[1:])
	if err != nil {
		return nil, err
	}
	out := make([]delegation.CompletionClaim, len(cmps))
	for i, c := range cmps {
		out[i] = delegation.CompletionClaim{Completion: c, Worker: worker, Token: tokens[i], Expires: exp}
	}
	return out, nil
}

func (s delegationStore) AckCompletion(ctx context.Context, c delegation.CompletionClaim) error {
	const op = "redis.delegation.AckCompletion"
	db := s.db
	id := c.Completion.ID
	v, err := db.run(ctx, op, scriptDlgCmpAck, []string{db.dlgKey("cmp:" + id), db.dlgKey("due")},
		id, c.Token, db.nowArg())
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s delegationStore) RetryCompletion(ctx context.Context, c delegation.CompletionClaim, after time.Duration, reason string) error {
	const op = "redis.delegation.RetryCompletion"
	db := s.db
	id := c.Completion.ID
	v, err := db.run(ctx, op, scriptDlgCmpRetry, []string{db.dlgKey("cmp:" + id), db.dlgKey("due")},
		id, c.Token, max(after.Milliseconds(), 0), reason, db.nowArg())
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s delegationStore) Delegation(ctx context.Context, id string) (delegation.Delegation, error) {
	const op = "redis.delegation.Delegation"
	db := s.db
	v, err := db.run(ctx, op, scriptDlgRead, nil, db.prefix, 0, id)
	if err != nil {
		return delegation.Delegation{}, err
	}
	gs, err := decodeDelegations(op, v)
	if err != nil {
		return delegation.Delegation{}, err
	}
	if len(gs) != 1 {
		return delegation.Delegation{}, errs.E(op, errs.NotFound, "no delegation %q", id)
	}
	return gs[0], nil
}

func (s delegationStore) Child(ctx context.Context, id string) (delegation.Child, error) {
	const op = "redis.delegation.Child"
	if err := s.db.check(op); err != nil {
		return delegation.Child{}, err
	}
	return s.child(ctx, op, id)
}

// child reads one child's hash: a plain HMGET, as a child is one key.
func (s delegationStore) child(ctx context.Context, op, id string) (delegation.Child, error) {
	v, err := s.db.client.HMGet(ctx, s.db.dlgKey("c:"+id), childFields...).Result()
	if err != nil {
		return delegation.Child{}, s.db.fail(op, err)
	}
	if len(v) == 0 || v[0] == nil {
		return delegation.Child{}, errs.E(op, errs.NotFound, "no child %q", id)
	}
	return decodeChild(op, id, v)
}

func (s delegationStore) List(ctx context.Context, q delegation.Query) ([]delegation.Delegation, error) {
	const op = "redis.delegation.List"
	db := s.db
	n := q.Limit
	if n <= 0 {
		n = defaultListLimit
	}
	var key string
	switch tag := convTag(q.Conv); {
	case q.Conv != "" && q.Active:
		key = db.convKey(tag, "dlglive")
	case q.Conv != "":
		key = db.convKey(tag, "dlg")
	case q.Active:
		key = db.dlgKey("live")
	default:
		key = db.dlgKey("all")
	}
	v, err := db.run(ctx, op, scriptDlgRead, []string{key}, db.prefix, n)
	if err != nil {
		return nil, err
	}
	return decodeDelegations(op, v)
}

func (s delegationStore) Completions(ctx context.Context, id string) ([]delegation.Completion, error) {
	const op = "redis.delegation.Completions"
	db := s.db
	v, err := db.run(ctx, op, scriptDlgCompletions, nil, db.prefix, id)
	if err != nil {
		return nil, err
	}
	cmps, _, err := decodeCompletions(op, v)
	return cmps, err
}

func (s delegationStore) Active(ctx context.Context, conv string) (int, error) {
	const op = "redis.delegation.Active"
	db := s.db
	if err := db.check(op); err != nil {
		return 0, err
	}
	n, err := db.client.SCard(ctx, db.convKey(convTag(conv), "dlgact")).Result()
	if err != nil {
		return 0, db.fail(op, err)
	}
	return int(n), nil
}

// decodeChild reads a child from its id and its childFields values.
func decodeChild(op, id string, f []any) (delegation.Child, error) {
	var c delegation.Child
	if len(f) != len(childFields) || f[0] == nil {
		return c, errs.E(op, errs.Internal, "child %q: unexpected fields %v", id, f)
	}
	if err := json.Unmarshal([]byte(str(f[0])), &c); err != nil {
		return c, errs.Wrap(op, errs.Internal, err)
	}
	c.ID = id
	c.Status = delegation.Status(str(f[1]))
	c.Owner, c.Token = str(f[2]), num(f[3])
	c.OwnerExpires = optTime(f[4])
	if p := str(f[5]); p != "" {
		if err := json.Unmarshal([]byte(p), &c.Progress); err != nil {
			return c, errs.Wrap(op, errs.Internal, err)
		}
	}
	if r := str(f[6]); r != "" {
		c.Result = new(delegation.Result)
		if err := json.Unmarshal([]byte(r), c.Result); err != nil {
			return c, errs.Wrap(op, errs.Internal, err)
		}
	}
	c.StartedAt, c.EndedAt = optTime(f[7]), optTime(f[8])
	if sv := str(f[9]); sv != "" {
		if err := json.Unmarshal([]byte(sv), &c.Steers); err != nil {
			return c, errs.Wrap(op, errs.Internal, err)
		}
	}
	return c, nil
}

// decodeChildren reads up to n (all, when n < 0) groups of a child's id
// and its childFields values from v, and returns the rest of v.
func decodeChildren(op string, v []any, n int) ([]delegation.Child, []any, error) {
	var out []delegation.Child
	for n != 0 && len(v) > len(childFields) {
		c, err := decodeChild(op, str(v[0]), v[1:1+len(childFields)])
		if err != nil {
			return nil, nil, err
		}
		out = append(out, c)
		v = v[1+len(childFields):]
		n--
	}
	return out, v, nil
}

// decodeDelegations reads dlg_read's reply.
func decodeDelegations(op string, v []any) ([]delegation.Delegation, error) {
	var out []delegation.Delegation
	for len(v) >= 4 {
		var g delegation.Delegation
		if err := json.Unmarshal([]byte(str(v[1])), &g); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		g.ID, g.CreatedAt = str(v[0]), msTime(v[2])
		kids := int(num(v[3]))
		children, rest, err := decodeChildren(op, v[4:], kids)
		if err != nil {
			return nil, err
		}
		if len(children) != kids {
			return nil, errs.E(op, errs.Internal, "delegation %q: %d children of %d in the reply", g.ID, len(children), kids)
		}
		slices.SortStableFunc(children, func(a, b delegation.Child) int { return a.Index - b.Index })
		g.Children = children
		out = append(out, g)
		v = rest
	}
	if len(v) != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return out, nil
}

// decodeCompletions reads groups of a completion's id, its cmpFields
// values and its delegation's body, and returns their claim tokens too.
func decodeCompletions(op string, v []any) ([]delegation.Completion, []int64, error) {
	group := 2 + len(cmpFields)
	if len(v)%group != 0 {
		return nil, nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	var out []delegation.Completion
	var tokens []int64
	for ; len(v) > 0; v = v[group:] {
		f := v[1 : 1+len(cmpFields)]
		c, err := decodeCompletion(op, str(v[0]), str(f[cmpDelegation]), str(f[cmpUnit]), str(f[cmpResults]),
			f[cmpTotal], f[cmpCreated], v[group-1])
		if err != nil {
			return nil, nil, err
		}
		c.Delivered = str(f[cmpState]) == "delivered"
		c.DeliveredAt = optTime(f[cmpDelivered])
		c.Attempts, c.LastError = int(num(f[cmpAttempts])), str(f[cmpError])
		out = append(out, c)
		tokens = append(tokens, num(f[cmpToken]))
	}
	return out, tokens, nil
}

// decodeCompletion builds a completion from what its hash keeps and its
// delegation's body (where it goes), as delegation.CompletionFor does.
func decodeCompletion(op, id, dlg, unit, results string, total, created, body any) (delegation.Completion, error) {
	var g delegation.Delegation
	if err := json.Unmarshal([]byte(str(body)), &g); err != nil {
		return delegation.Completion{}, errs.Wrap(op, errs.Internal, err)
	}
	c := delegation.Completion{
		ID: id, Delegation: dlg, Conv: g.Conv, User: g.User, Origin: g.Origin, Session: g.Session,
		Unit: unit, Total: int(num(total)), CreatedAt: msTime(created), Trace: g.Trace,
	}
	if err := json.Unmarshal([]byte(results), &c.Results); err != nil {
		return delegation.Completion{}, errs.Wrap(op, errs.Internal, err)
	}
	return c, nil
}

// optTime reads a time in ms that a hash leaves empty (or 0) when unset.
func optTime(v any) time.Time {
	if num(v) == 0 {
		return time.Time{}
	}
	return msTime(v)
}
