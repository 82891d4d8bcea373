package redis

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// delegationStore is the DB seen as a delegation.Store. doc.go lists
// its keys; every change that touches more than one is one of the
// dlg_*.lua functions, or, for a dispatch, the DLGPUT write dispatchOp
// makes (run by a turn's finish, or by dlg_create).
//
// Shards: a delegation, its children and completions live in the shard
// of the conversation that dispatched it, as the turn's commit that
// dispatches it runs there; so does every index a script changes with
// them (pending, running, due, …, one of each per shard). Claims, the
// reaper's read and completion claims go round the shards; a List of
// every conversation reads every shard and merges. A claim's token
// names its child's shard (lib_delegation.lua's dlg_token), so End and
// Renew go there; a completion's claim names its conversation. Other
// calls by id (Child, Delegation, Steer, StopPending, Completions) look
// in the shard remembered for the id (DB.located, kind "dlg:", filled by this
// process's Create, Start, Claim and Reap calls and look-ups), else in
// every shard at once.
type delegationStore struct{ db *DB }

// dlgKind heads a delegation's or a child's key ("d:<id>", "c:<id>")
// among the ids whose shards DB.located remembers.
const dlgKind = "dlg:"

var _ delegation.Store = delegationStore{}

// Delegations returns the store of delegations, their children and
// their completions.
func (db *DB) Delegations() delegation.Store { return delegationStore{db: db} }

// dlgKey is one of the delegation keys that no conversation owns, in the
// shard whose prefix is pfx: <pfx>dlg:<suffix>.
func dlgKey(pfx, suffix string) string { return pfx + "dlg:" + suffix }

// shardArgs are the shard arguments of a script that grants claim
// tokens (dlg_token): shard i's index and the shard count, or "" in the
// layout of one server.
func (db *DB) shardArgs(i int) []any {
	if !db.shards.sharded() {
		return []any{"", ""}
	}
	return []any{i, db.shards.count()}
}

// tokenShard is the shard whose child a claim token fences: the token
// modulo the shard count (dlg_token).
func (db *DB) tokenShard(tok int64) int {
	n := int64(db.shards.count())
	return int((tok%n + n) % n)
}

// remember records that the ids of records (memo keys, "d:<id>" and
// "c:<id>") are in shard i.
func (s delegationStore) remember(i int, keys ...string) {
	if !s.db.shards.sharded() {
		return
	}
	for _, k := range keys {
		s.db.remember(dlgKind, k, i)
	}
}

// rememberChildren records the shard of claimed or reaped children and
// of their delegations.
func (s delegationStore) rememberChildren(i int, cs []delegation.Child) {
	for _, c := range cs {
		s.remember(i, "c:"+c.ID, "d:"+c.Delegation)
	}
}

// inShardOf runs read, which reports whether it found the record key
// names ("d:<id>", "c:<id>"), in the shard remembered for it, else in
// every shard at once, and returns the shard where it was found, from
// then on remembered, or -1.
func (s delegationStore) inShardOf(ctx context.Context, key string, read func(i int) (bool, error)) (int, error) {
	db := s.db
	i, ok := 0, !db.shards.sharded()
	if !ok {
		i, ok = db.located.get(dlgKind + key)
	}
	if ok {
		found, err := read(i)
		if err != nil || !found {
			return -1, err
		}
		return i, nil
	}
	all := db.shards.all()
	var mu sync.Mutex
	at := -1
	err := inShards(ctx, all, func(ctx context.Context, i int) error {
		found, err := read(i)
		if found {
			mu.Lock()
			if at < 0 || i < at {
				at = i
			}
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return -1, err
	}
	if at >= 0 {
		db.remember(dlgKind, key, at)
	}
	return at, nil
}

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
// made (delegation.NewID). Its keys are in the shard of the delegation's
// conversation, which for a turn's dispatch is the committing one
// (delegation's tool dispatches for its turn's conversation), so the
// write's home is the commit's own.
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
	args = append(args, db.convPfx(g.Conv), g.ID, convTag(g.Conv), disp.Limit, body, flag(g.Independent), at, 0, n)
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
	if db.shards.sharded() {
		// Dispatches of one millisecond in two shards are claimed in the
		// order of their sequence: this process's in the order it made
		// them, and after every one it read (claimShards).
		args = append(args, db.dlgSeq.Add(1))
	}
	return writeOp{cmd: "DLGPUT", args: args, now: 8}, nil
}

// dispatchKeys are the keys dlg_create and dlg_start take, all in the
// shard of g's conversation.
func (db *DB) dispatchKeys(g delegation.Delegation) []string {
	pfx := db.convPfx(g.Conv)
	keys := make([]string, 0, 2+len(g.Children))
	keys = append(keys, db.convKeyOf(g.Conv, "dlgact"), dlgKey(pfx, "d:"+g.ID))
	for _, c := range g.Children {
		keys = append(keys, dlgKey(pfx, "c:"+c.ID))
	}
	return keys
}

// rememberDispatch records the shard of a dispatch written.
func (s delegationStore) rememberDispatch(g delegation.Delegation) {
	i := s.db.shards.of(g.Conv)
	s.remember(i, "d:"+g.ID)
	for _, c := range g.Children {
		s.remember(i, "c:"+c.ID)
	}
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
	if err := dispatchStatus(op, disp, v); err != nil {
		return err
	}
	s.rememberDispatch(disp.Delegation)
	return nil
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
	g := disp.Delegation
	i := db.shards.of(g.Conv)
	args := append([]any{db.nowArg(), disp.Limit, db.shards.pfx(i), owner, durMS(ttl)}, db.shardArgs(i)...)
	v, err := db.run(ctx, op, scriptDlgStart, db.dispatchKeys(g), appendOps(args, []writeOp{o})...)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 || str(v[0]) != "OK" {
		return nil, dispatchStatus(op, disp, v)
	}
	if len(v) != 2+len(g.Children) {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	s.rememberDispatch(g)
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
	if !db.shards.sharded() {
		return s.claimIn(ctx, op, 0, owner, n, ttl, nil)
	}
	var children []delegation.Child
	var claims []delegation.Claim
	// A child another claimer took between the two steps of a pass is
	// made up for by another pass, a few at most.
	for range 3 {
		cs, cl, short, err := s.claimShards(ctx, op, owner, n-len(children), ttl)
		children, claims = append(children, cs...), append(claims, cl...)
		if err != nil {
			if len(children) > 0 {
				break // those taken are the caller's to run
			}
			return nil, nil, err
		}
		if !short || len(children) == n {
			break
		}
	}
	return children, claims, nil
}

// claimShards is one pass of a claim across shards. It reads, from every
// shard at once, the token counter and when its first n pending children
// were dispatched (dlg_pending); picks the n oldest of them all; and
// claims, from every shard holding some, that many at once (dlg_claim),
// each given the least token of each child it takes: above every
// counter read, rising in the order the children are answered, so that
// a claim's tokens rise as one counter's would (dlg_token keeps each
// above its shard's counter whatever happened in between). It answers
// the children oldest first, and reports short when a shard had fewer
// to give than it read, another claimer or a stop having come between.
func (s delegationStore) claimShards(ctx context.Context, op, owner string, n int, ttl time.Duration) (
	[]delegation.Child, []delegation.Claim, bool, error) {
	db := s.db
	count := db.shards.count()
	order := db.shards.round()
	tops := make([]int64, count)
	heads := make([][]dispatched, count)
	err := inShards(ctx, order, func(ctx context.Context, i int) error {
		v, err := db.runIn(ctx, op, scriptDlgPending, i, nil, db.shards.pfx(i), n)
		if err != nil {
			return err
		}
		if len(v) < 1 {
			return errs.E(op, errs.Internal, "unexpected script reply %v", v)
		}
		tops[i] = num(v[0])
		for k := 1; k+1 < len(v); k += 2 {
			d := dispatched{at: num(v[k]), seq: num(v[k+1])}
			heads[i] = append(heads[i], d)
			for seen := db.dlgSeq.Load(); d.seq > seen && !db.dlgSeq.CompareAndSwap(seen, d.seq); {
				seen = db.dlgSeq.Load()
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	seq := oldestFirst(order, heads, n)
	if len(seq) == 0 {
		return nil, nil, false, nil
	}
	least := make([][]int64, count)
	t := slices.Max(tops)
	for _, i := range seq {
		t++
		t += ((int64(i)-t)%int64(count) + int64(count)) % int64(count)
		least[i] = append(least[i], t)
	}
	var from []int
	for _, i := range order {
		if len(least[i]) > 0 {
			from = append(from, i)
		}
	}
	gotC := make([][]delegation.Child, count)
	gotL := make([][]delegation.Claim, count)
	err = inShards(ctx, from, func(ctx context.Context, i int) error {
		var err error
		gotC[i], gotL[i], err = s.claimIn(ctx, op, i, owner, len(least[i]), ttl, least[i])
		return err
	})
	var children []delegation.Child
	var claims []delegation.Claim
	next := make([]int, count)
	for _, i := range seq {
		if k := next[i]; k < len(gotC[i]) {
			children, claims = append(children, gotC[i][k]), append(claims, gotL[i][k])
			next[i]++
		}
	}
	return children, claims, len(children) < len(seq), err
}

// dispatched is when a child was dispatched: its delegation's creation
// (ms), then, in the sharded layout, its dispatch's sequence (DB.dlgSeq),
// which orders the dispatches of one millisecond.
type dispatched struct{ at, seq int64 }

func (d dispatched) before(e dispatched) bool {
	return d.at < e.at || d.at == e.at && d.seq < e.seq
}

// oldestFirst merges the shards' lists of times, each in its shard's
// order, oldest first: the shard of each of the first n, a tie going to
// the shard first in order.
func oldestFirst(order []int, times [][]dispatched, n int) []int {
	pos := make([]int, len(times))
	var seq []int
	for len(seq) < n {
		best := -1
		for _, i := range order {
			if pos[i] < len(times[i]) && (best < 0 || times[i][pos[i]].before(times[best][pos[best]])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		seq = append(seq, best)
		pos[best]++
	}
	return seq
}

// claimIn claims up to n pending children of shard i (dlg_claim), with
// the least token of each given in least, if any.
func (s delegationStore) claimIn(ctx context.Context, op string, i int, owner string, n int, ttl time.Duration, least []int64) (
	[]delegation.Child, []delegation.Claim, error) {
	db := s.db
	args := make([]any, 0, 7+len(least))
	args = append(args, db.shards.pfx(i), owner, n, durMS(ttl), db.nowArg())
	if db.shards.sharded() {
		args = append(args, db.shardArgs(i)...)
		for _, t := range least {
			args = append(args, t)
		}
	}
	v, err := db.runIn(ctx, op, scriptDlgClaim, i, nil, args...)
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
	s.rememberChildren(i, children)
	claims := make([]delegation.Claim, len(children))
	for k, c := range children {
		claims[k] = delegation.Claim{Name: c.ID, Owner: owner, Token: c.Token, Expires: exp}
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
	// Each shard renews the claims its token names, all at once.
	byShard := make(map[int][]int)
	var shards []int
	for k, c := range claims {
		i := db.tokenShard(c.Token)
		if byShard[i] == nil {
			shards = append(shards, i)
		}
		byShard[i] = append(byShard[i], k)
	}
	held := make([]bool, len(claims))
	exps := make([]time.Time, len(claims))
	err := inShards(ctx, shards, func(ctx context.Context, i int) error {
		ks := byShard[i]
		args := make([]any, 0, 3+3*len(ks))
		args = append(args, db.shards.pfx(i), durMS(ttl), db.nowArg())
		for _, k := range ks {
			c := claims[k]
			var p any = ""
			if pr, ok := progress[c.Name]; ok {
				b, err := json.Marshal(pr)
				if err != nil {
					return errs.Wrap(op, errs.Invalid, err)
				}
				p = b
			}
			args = append(args, c.Name, c.Token, p)
		}
		v, err := db.runIn(ctx, op, scriptDlgRenew, i, nil, args...)
		if err != nil {
			return err
		}
		if len(v) != 1+len(ks) {
			return errs.E(op, errs.Internal, "unexpected script reply %v", v)
		}
		for j, k := range ks {
			held[k], exps[k] = num(v[1+j]) == 1, msTime(v[0])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []delegation.Claim
	for k, c := range claims {
		if held[k] {
			c.Expires = exps[k]
			out = append(out, c)
		}
	}
	return out, nil
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
	// script that checks the claim is safe: it only names the result. It
	// is looked for in the shard the claim's token names only, so that a
	// token is never checked against a child of another shard.
	i := db.tokenShard(c.Token)
	child, found, err := s.childIn(ctx, op, i, c.Name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errs.E(op, errs.LeaseLost, "child %q is not held by claim %d", c.Name, c.Token)
	}
	_, cmp, err := s.end(ctx, op, i, child, c.Token, delegation.Ended(child, r), false)
	return cmp, err
}

// end runs dlg_end in shard i for child under token with result r (only
// once the claim ran out, when reap is set) and returns the child as
// ended and the completion its end made, if any.
func (s delegationStore) end(ctx context.Context, op string, i int, child delegation.Child, token int64, r delegation.Result, reap bool) (delegation.Child, *delegation.Completion, error) {
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
	pfx := db.shards.pfx(i)
	v, err := db.run(ctx, op, scriptDlgEnd, []string{dlgKey(pfx, "c:"+child.ID)},
		append([]any{pfx, child.ID, token, string(r.Status), body, db.nowArg(), reapArg, r.Steers}, usage...)...)
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
	i := 0
	if db.shards.sharded() {
		if i, err = s.inShardOf(ctx, "c:"+id, func(i int) (bool, error) {
			cmd := goredis.NewIntCmd(ctx, "exists", dlgKey(db.shards.pfx(i), "c:"+id))
			n, err := await(ctx, db.batch, cmd, cmd.Result)
			return n == 1, db.fail(op, err)
		}); err != nil {
			return err
		}
		if i < 0 {
			return errs.E(op, errs.NotFound, "no child %q", id)
		}
	}
	v, err := db.run(ctx, op, scriptDlgSteer, []string{dlgKey(db.shards.pfx(i), "c:"+id)}, enc, delegation.MaxSteers)
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
	child, i, err := s.child(ctx, op, id)
	if err != nil || child.Status != delegation.StatusPending {
		return false, nil, err
	}
	body, err := json.Marshal(delegation.Ended(child, r))
	if err != nil {
		return false, nil, errs.Wrap(op, errs.Invalid, err)
	}
	pfx := db.shards.pfx(i)
	v, err := db.run(ctx, op, scriptDlgStop, []string{dlgKey(pfx, "c:"+id)},
		pfx, id, string(r.Status), body, db.nowArg())
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
	// Every shard's children whose claims ran out, read at once, the
	// soonest expired of them all first.
	type expired struct {
		shard int
		child delegation.Child
		now   time.Time
	}
	order := db.shards.round()
	found := make([][]expired, db.shards.count())
	err := inShards(ctx, order, func(ctx context.Context, i int) error {
		v, err := db.runIn(ctx, op, scriptDlgExpired, i, nil, db.shards.pfx(i), limit, db.nowArg())
		if err != nil {
			return err
		}
		if len(v) < 1 {
			return errs.E(op, errs.Internal, "unexpected script reply %v", v)
		}
		cs, _, err := decodeChildren(op, v[1:], -1)
		s.rememberChildren(i, cs)
		for _, c := range cs {
			found[i] = append(found[i], expired{shard: i, child: c, now: msTime(v[0])})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var all []expired
	for _, i := range order {
		all = append(all, found[i]...)
	}
	slices.SortStableFunc(all, func(a, b expired) int { return a.child.OwnerExpires.Compare(b.child.OwnerExpires) })
	all = all[:min(len(all), limit)]
	// Each child ends in its own step, which checks again that it runs
	// under the same claim and that the claim ran out: a reaper that
	// lost the race to another, or to a renewal, ends nothing.
	var out []delegation.Child
	for _, e := range all {
		ended, _, err := s.end(ctx, op, e.shard, e.child, e.child.Token, delegation.Reaped(e.child, e.now), true)
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
	if !db.shards.sharded() {
		return s.claimCompletionsIn(ctx, op, 0, worker, n, ttl)
	}
	// The n soonest due of every shard's due sets, read at once (due or
	// not: dlg_cmp_claim takes only the due ones), then that many
	// claimed from each shard holding some, at once.
	order := db.shards.round()
	count := db.shards.count()
	dues := make([][]dispatched, count)
	err := inShards(ctx, order, func(ctx context.Context, i int) error {
		cmd := goredis.NewZSliceCmd(ctx, "zrange", dlgKey(db.shards.pfx(i), "due"), "-inf", "+inf", "byscore", "limit", 0, n, "withscores")
		zs, err := await(ctx, db.batch, cmd, cmd.Result)
		if err != nil {
			return db.fail(op, err)
		}
		for _, z := range zs {
			dues[i] = append(dues[i], dispatched{at: int64(z.Score)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	seq := oldestFirst(order, dues, n)
	take := make([]int, count)
	for _, i := range seq {
		take[i]++
	}
	var from []int
	for _, i := range order {
		if take[i] > 0 {
			from = append(from, i)
		}
	}
	got := make([][]delegation.CompletionClaim, count)
	err = inShards(ctx, from, func(ctx context.Context, i int) error {
		var err error
		got[i], err = s.claimCompletionsIn(ctx, op, i, worker, take[i], ttl)
		return err
	})
	var out []delegation.CompletionClaim
	next := make([]int, count)
	for _, i := range seq {
		if k := next[i]; k < len(got[i]) {
			out = append(out, got[i][k])
			next[i]++
		}
	}
	if err != nil && len(out) == 0 {
		return nil, err
	}
	return out, nil
}

// claimCompletionsIn claims up to n due completions of shard i.
func (s delegationStore) claimCompletionsIn(ctx context.Context, op string, i int, worker string, n int, ttl time.Duration) ([]delegation.CompletionClaim, error) {
	db := s.db
	v, err := db.runIn(ctx, op, scriptDlgCmpClaim, i, nil, db.shards.pfx(i), worker, n, durMS(ttl), db.nowArg())
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
	for k, c := range cmps {
		out[k] = delegation.CompletionClaim{Completion: c, Worker: worker, Token: tokens[k], Expires: exp}
	}
	return out, nil
}

// settleCompletion runs dlg_cmp_ack or dlg_cmp_retry on a claimed
// completion, in the shard of its conversation.
func (s delegationStore) settleCompletion(ctx context.Context, op string, sc script, c delegation.CompletionClaim, args ...any) error {
	db := s.db
	pfx, id := db.convPfx(c.Completion.Conv), c.Completion.ID
	v, err := db.run(ctx, op, sc, []string{dlgKey(pfx, "cmp:"+id), dlgKey(pfx, "due")},
		append([]any{id, c.Token}, args...)...)
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s delegationStore) AckCompletion(ctx context.Context, c delegation.CompletionClaim) error {
	return s.settleCompletion(ctx, "redis.delegation.AckCompletion", scriptDlgCmpAck, c, s.db.nowArg())
}

func (s delegationStore) RetryCompletion(ctx context.Context, c delegation.CompletionClaim, after time.Duration, reason string) error {
	return s.settleCompletion(ctx, "redis.delegation.RetryCompletion", scriptDlgCmpRetry, c,
		max(after.Milliseconds(), 0), reason, s.db.nowArg())
}

func (s delegationStore) Delegation(ctx context.Context, id string) (delegation.Delegation, error) {
	const op = "redis.delegation.Delegation"
	db := s.db
	gs := make([][]delegation.Delegation, db.shards.count())
	i, err := s.inShardOf(ctx, "d:"+id, func(i int) (bool, error) {
		v, err := db.runIn(ctx, op, scriptDlgRead, i, nil, db.shards.pfx(i), 0, id)
		if err != nil {
			return false, err
		}
		gs[i], err = decodeDelegations(op, v)
		return len(gs[i]) == 1, err
	})
	if err != nil {
		return delegation.Delegation{}, err
	}
	if i < 0 {
		return delegation.Delegation{}, errs.E(op, errs.NotFound, "no delegation %q", id)
	}
	return gs[i][0], nil
}

func (s delegationStore) Child(ctx context.Context, id string) (delegation.Child, error) {
	const op = "redis.delegation.Child"
	if err := s.db.check(op); err != nil {
		return delegation.Child{}, err
	}
	c, _, err := s.child(ctx, op, id)
	return c, err
}

// child reads one child, wherever it is, and the shard it is in.
// Errors: NotFound.
func (s delegationStore) child(ctx context.Context, op, id string) (delegation.Child, int, error) {
	cs := make([]delegation.Child, s.db.shards.count())
	i, err := s.inShardOf(ctx, "c:"+id, func(i int) (bool, error) {
		var found bool
		var err error
		cs[i], found, err = s.childIn(ctx, op, i, id)
		return found, err
	})
	if err != nil {
		return delegation.Child{}, -1, err
	}
	if i < 0 {
		return delegation.Child{}, -1, errs.E(op, errs.NotFound, "no child %q", id)
	}
	return cs[i], i, nil
}

// childIn reads one child's hash in shard i: a plain HMGET, as a child
// is one key. found is false when there is none.
func (s delegationStore) childIn(ctx context.Context, op string, i int, id string) (c delegation.Child, found bool, err error) {
	db := s.db
	args := make([]any, 0, 2+len(childFields))
	args = append(args, "hmget", dlgKey(db.shards.pfx(i), "c:"+id))
	for _, f := range childFields {
		args = append(args, f)
	}
	cmd := goredis.NewSliceCmd(ctx, args...)
	v, err := await(ctx, db.batch, cmd, cmd.Result)
	if err != nil {
		return c, false, db.fail(op, err)
	}
	if len(v) == 0 || v[0] == nil {
		return c, false, nil
	}
	c, err = decodeChild(op, id, v)
	return c, err == nil, err
}

func (s delegationStore) List(ctx context.Context, q delegation.Query) ([]delegation.Delegation, error) {
	const op = "redis.delegation.List"
	db := s.db
	n := q.Limit
	if n <= 0 {
		n = defaultListLimit
	}
	if q.Conv != "" {
		key := db.convKeyOf(q.Conv, "dlg")
		if q.Active {
			key = db.convKeyOf(q.Conv, "dlglive")
		}
		return s.listIn(ctx, op, db.shards.of(q.Conv), key, n)
	}
	index := "all"
	if q.Active {
		index = "live"
	}
	if !db.shards.sharded() {
		return s.listIn(ctx, op, 0, dlgKey(db.prefix, index), n)
	}
	// Every shard's newest n, read at once, and the newest n of them.
	count := db.shards.count()
	pages := make([][]delegation.Delegation, count)
	all := make([]int, count)
	for i := range all {
		all[i] = i
	}
	err := inShards(ctx, all, func(ctx context.Context, i int) error {
		var err error
		pages[i], err = s.listIn(ctx, op, i, dlgKey(db.shards.pfx(i), index), n)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Newest first, equal times as ZREVRANGE orders them, by id down.
	out := slices.Concat(pages...)
	slices.SortFunc(out, func(a, b delegation.Delegation) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out[:min(len(out), n)], nil
}

// listIn reads the newest n delegations of a sorted set of shard i.
func (s delegationStore) listIn(ctx context.Context, op string, i int, key string, n int) ([]delegation.Delegation, error) {
	v, err := s.db.run(ctx, op, scriptDlgRead, []string{key}, s.db.shards.pfx(i), n)
	if err != nil {
		return nil, err
	}
	return decodeDelegations(op, v)
}

func (s delegationStore) Completions(ctx context.Context, id string) ([]delegation.Completion, error) {
	const op = "redis.delegation.Completions"
	db := s.db
	// A delegation without completions is looked for in every shard
	// again: nothing there says where it is.
	cmps := make([][]delegation.Completion, db.shards.count())
	i, err := s.inShardOf(ctx, "d:"+id, func(i int) (bool, error) {
		v, err := db.runIn(ctx, op, scriptDlgCompletions, i, nil, db.shards.pfx(i), id)
		if err != nil {
			return false, err
		}
		cmps[i], _, err = decodeCompletions(op, v)
		return len(cmps[i]) > 0, err
	})
	if err != nil || i < 0 {
		return nil, err
	}
	return cmps[i], nil
}

func (s delegationStore) Active(ctx context.Context, conv string) (int, error) {
	const op = "redis.delegation.Active"
	db := s.db
	if err := db.check(op); err != nil {
		return 0, err
	}
	n, err := db.client.SCard(ctx, db.convKeyOf(conv, "dlgact")).Result()
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
