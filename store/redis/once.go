package redis

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// onceStore is the DB seen as a lease.OnceStore. Its keys, after the
// prefix S of the fire's shard (onceShard; P itself in the one-server
// layout):
//
//	Sonce:f:<id>  hash: o owner, tok claim token, exp claim expiry ms, and
//	              once done du: until when it counts as done (ms); the key
//	              expires with that window
//	Sonce:live    sorted set of the shard's fires not done, by claim expiry ms
//	Sonce:token   the shard's claim token counter
//
// A fire's tokens come from its shard's counter, so each is above every
// earlier claim's of the same fire. StaleOnce reads every shard's live
// index and merges; RenewOnce renews each shard's claims in one call.
type onceStore struct{ db *DB }

var _ lease.OnceStore = onceStore{}

// Once returns the store of once-only claims on fires.
func (db *DB) Once() lease.OnceStore { return onceStore{db: db} }

// onceKey is one of the once-only claim keys of the shard whose prefix
// is pfx: <pfx>once:<suffix>.
func onceKey(pfx, suffix string) string { return pfx + "once:" + suffix }

// onceShard is the shard a fire's claim lives in: that of its subject,
// the second field of an identity kind:subject:…, so that the fires of
// one cron job (cron:<job>:<when>) are in the job's shard, where
// cronfire.go claims a fire in the call that writes the job. An identity
// without two fields is its own subject.
func (db *DB) onceShard(id string) int {
	_, rest, ok := strings.Cut(id, ":")
	subject, _, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || subject == "" {
		return db.shards.of(id)
	}
	return db.shards.of(subject)
}

func (s onceStore) ClaimOnce(ctx context.Context, id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState, error) {
	const op = "redis.once.ClaimOnce"
	db := s.db
	if err := lease.CheckClaimOnce(op, id, owner, ttl); err != nil {
		return lease.Claim{}, "", err
	}
	pfx := db.shards.pfx(db.onceShard(id))
	v, err := db.run(ctx, op, scriptOnceClaim,
		[]string{onceKey(pfx, "f:"+id), onceKey(pfx, "live"), onceKey(pfx, "token")},
		id, owner, durMS(ttl), db.nowArg())
	if err != nil {
		return lease.Claim{}, "", err
	}
	switch {
	case len(v) == 3 && str(v[0]) == "CLAIMED":
		return lease.Claim{Name: id, Owner: owner, Token: num(v[1]), Expires: msTime(v[2])}, lease.OnceClaimed, nil
	case len(v) == 4 && str(v[0]) == "HELD":
		return lease.Claim{Name: id, Owner: str(v[1]), Token: num(v[2]), Expires: msTime(v[3])}, lease.OnceHeld, nil
	case len(v) == 1 && str(v[0]) == "DONE":
		return lease.Claim{}, lease.OnceDone, nil
	}
	return lease.Claim{}, "", errs.E(op, errs.Internal, "unexpected script reply %v", v)
}

func (s onceStore) RenewOnce(ctx context.Context, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	const op = "redis.once.RenewOnce"
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
	byShard := make([][]lease.Claim, db.shards.count())
	for _, c := range claims {
		i := db.onceShard(c.Name)
		byShard[i] = append(byShard[i], c)
	}
	held, err := everyShard(ctx, db, func(ctx context.Context, i int) ([]lease.Claim, error) {
		return s.renew(ctx, op, i, byShard[i], ttl)
	})
	return slices.Concat(held...), err
}

// renew is RenewOnce of claims, all of shard i.
func (s onceStore) renew(ctx context.Context, op string, i int, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	db := s.db
	if len(claims) == 0 {
		return nil, nil
	}
	pfx := db.shards.pfx(i)
	keys := make([]string, 0, 1+len(claims))
	keys = append(keys, onceKey(pfx, "live"))
	args := make([]any, 0, 2+2*len(claims))
	args = append(args, durMS(ttl), db.nowArg())
	for _, c := range claims {
		keys = append(keys, onceKey(pfx, "f:"+c.Name))
		args = append(args, c.Name, c.Token)
	}
	v, err := db.run(ctx, op, scriptOnceRenew, keys, args...)
	if err != nil {
		return nil, err
	}
	if len(v) != 1+len(claims) {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	exp := msTime(v[0])
	var held []lease.Claim
	for i, c := range claims {
		if num(v[1+i]) == 1 {
			c.Expires = exp
			held = append(held, c)
		}
	}
	return held, nil
}

func (s onceStore) DoneOnce(ctx context.Context, c lease.Claim) error {
	const op = "redis.once.DoneOnce"
	db := s.db
	pfx := db.shards.pfx(db.onceShard(c.Name))
	v, err := db.run(ctx, op, scriptOnceDone,
		[]string{onceKey(pfx, "f:"+c.Name), onceKey(pfx, "live")},
		c.Name, c.Token, db.windowArg(), db.nowArg())
	if err != nil {
		return err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "LOST":
		return errs.E(op, errs.LeaseLost, "fire %q is not held by claim %d any more", c.Name, c.Token)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return errs.E(op, errs.NotFound, "no fire %q", c.Name)
	}
	return status(op, v)
}

// staleFire is a fire StaleOnce found, with its claim's expiry (ms).
type staleFire struct {
	id  string
	exp int64
}

func (s onceStore) StaleOnce(ctx context.Context, prefix string, n int) ([]string, error) {
	const op = "redis.once.StaleOnce"
	db := s.db
	if n < 1 {
		return nil, errs.E(op, errs.Invalid, "stale fires limit %d, want at least 1", n)
	}
	// A shard whose primary is being replaced is read at the next sweep.
	parts, err := answeringShards(ctx, db, func(ctx context.Context, i int) ([]staleFire, error) {
		pfx := db.shards.pfx(i)
		v, err := db.run(ctx, op, scriptOnceStale, []string{onceKey(pfx, "live")}, prefix, n, db.nowArg())
		if err != nil {
			return nil, err
		}
		out := make([]staleFire, 0, len(v)/2)
		for k := 0; k+1 < len(v); k += 2 {
			out = append(out, staleFire{id: str(v[k]), exp: num(v[k+1])})
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	all := merged(parts)
	if len(parts) > 1 {
		// Oldest claim first, equal expiries by id, as in one index.
		slices.SortFunc(all, func(a, b staleFire) int {
			return cmp.Or(cmp.Compare(a.exp, b.exp), strings.Compare(a.id, b.id))
		})
		all = all[:min(len(all), n)]
	}
	ids := make([]string, len(all))
	for i, f := range all {
		ids[i] = f.id
	}
	return ids, nil
}
