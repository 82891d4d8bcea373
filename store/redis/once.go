package redis

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// onceStore is the DB seen as a lease.OnceStore. Its keys:
//
//	Ponce:f:<id>  hash: o owner, tok claim token, exp claim expiry ms, and
//	              once done du: until when it counts as done (ms); the key
//	              expires with that window
//	Ponce:live    sorted set of the fires not done, by claim expiry ms
//	Ponce:token   the claim token counter
type onceStore struct{ db *DB }

var _ lease.OnceStore = onceStore{}

// Once returns the store of once-only claims on fires.
func (db *DB) Once() lease.OnceStore { return onceStore{db: db} }

// onceKey is one of the once-only claim keys: Ponce:<suffix>.
func (db *DB) onceKey(suffix string) string { return db.prefix + "once:" + suffix }

func (s onceStore) ClaimOnce(ctx context.Context, id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState, error) {
	const op = "redis.once.ClaimOnce"
	db := s.db
	if err := lease.CheckClaimOnce(op, id, owner, ttl); err != nil {
		return lease.Claim{}, "", err
	}
	v, err := db.run(ctx, op, scriptOnceClaim,
		[]string{db.onceKey("f:" + id), db.onceKey("live"), db.onceKey("token")},
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
	keys := make([]string, 0, 1+len(claims))
	keys = append(keys, db.onceKey("live"))
	args := make([]any, 0, 2+2*len(claims))
	args = append(args, durMS(ttl), db.nowArg())
	for _, c := range claims {
		keys = append(keys, db.onceKey("f:"+c.Name))
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
	v, err := db.run(ctx, op, scriptOnceDone,
		[]string{db.onceKey("f:" + c.Name), db.onceKey("live")},
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

func (s onceStore) StaleOnce(ctx context.Context, prefix string, n int) ([]string, error) {
	const op = "redis.once.StaleOnce"
	db := s.db
	if n < 1 {
		return nil, errs.E(op, errs.Invalid, "stale fires limit %d, want at least 1", n)
	}
	v, err := db.run(ctx, op, scriptOnceStale, []string{db.onceKey("live")}, prefix, n, db.nowArg())
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(v))
	for i, x := range v {
		ids[i] = str(x)
	}
	return ids, nil
}
