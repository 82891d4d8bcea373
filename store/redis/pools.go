package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// poolStore is the DB seen as an llm.PoolStore. A pool is one hash (P is
// the prefix of the pool's shard in the sharded layout),
//
//	Ppool:{<name>}    seq      the pool's last use number
//	                  <id>:u   the key's uses
//	                  <id>:l   the use number of its last use
//	                  <id>:c   cooling until, ms ('0': not cooling)
//	                  <id>:r   the class that cooled or killed it
//	                  <id>:d   the pool generation it is dead for ('' alive)
//
//	Ppool:{<name>}:conv:<conv>   the key a conversation last used,
//	                             '<id>|<ms of its use>', expiring
//	                             llm.StickyTTL after it
//
// read whole with the conversation's key and the store's clock by
// pool_read; a use, with the conversation's key, is one pool_use call,
// the uses a pool counted since its last write one pool_count call, a
// mark one pool_mark call (which only lengthens), a revival one HSET of
// the three mark fields.
type poolStore struct{ db *DB }

var _ llm.PoolStore = poolStore{}

// Pools returns the store of the model's credential pools.
func (db *DB) Pools() llm.PoolStore { return poolStore{db: db} }

// poolKey is a pool's hash, in the pool's shard; a conversation's key of
// the pool (poolKeys) is the hash's key and a suffix, so the two share the
// shard and pool_read and pool_use touch one slot.
func (db *DB) poolKey(name string) string { return db.pfxOf(name) + "pool:{" + convTag(name) + "}" }

// poolKeys are the keys of a request of conv (may be "") on pool.
func (db *DB) poolKeys(pool, conv string) []string {
	keys := []string{db.poolKey(pool)}
	if conv != "" {
		keys = append(keys, keys[0]+":conv:"+conv)
	}
	return keys
}

var stickyTTLArg = strconv.FormatInt(llm.StickyTTL.Milliseconds(), 10)

func (s poolStore) Now(ctx context.Context) (time.Time, error) {
	return s.db.now(ctx, "redis.pools.Now")
}

func (s poolStore) ReadPool(ctx context.Context, pool, conv string) (llm.PoolRead, error) {
	const op = "redis.pools.ReadPool"
	db := s.db
	v, err := db.run(ctx, op, scriptPoolRead, db.poolKeys(pool, conv), db.nowArg(), stickyTTLArg)
	if err != nil {
		return llm.PoolRead{}, err
	}
	if len(v) < 2 || len(v)%2 != 0 {
		return llm.PoolRead{}, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
	}
	r := llm.PoolRead{Now: time.UnixMilli(num(v[0])).UTC(), Sticky: str(v[1])}
	byID := map[string]*llm.KeyState{}
	for i := 2; i+1 < len(v); i += 2 {
		id, field, ok := strings.Cut(str(v[i]), ":")
		if !ok {
			continue // seq
		}
		st := byID[id]
		if st == nil {
			st = &llm.KeyState{ID: id}
			byID[id] = st
		}
		val := str(v[i+1])
		switch field {
		case "u":
			st.Uses, _ = strconv.ParseInt(val, 10, 64)
		case "l":
			st.LastUse, _ = strconv.ParseInt(val, 10, 64)
		case "c":
			if ms, _ := strconv.ParseInt(val, 10, 64); ms > 0 {
				st.CoolingUntil = time.UnixMilli(ms).UTC()
			}
		case "r":
			st.Reason = llm.Class(val)
		case "d":
			st.DeadFor = val
		}
	}
	for _, st := range byID {
		r.Keys = append(r.Keys, *st)
	}
	return r, nil
}

func (s poolStore) MarkKey(ctx context.Context, pool string, st llm.KeyState) error {
	const op = "redis.pools.MarkKey"
	db := s.db
	if err := checkPoolKey(op, pool, st.ID); err != nil {
		return err
	}
	if err := db.check(op); err != nil {
		return err
	}
	var until int64
	if !st.CoolingUntil.IsZero() {
		until = st.CoolingUntil.UnixMilli()
	}
	v, err := db.run(ctx, op, scriptPoolMark, []string{db.poolKey(pool)}, st.ID, strconv.FormatInt(until, 10), string(st.Reason), st.DeadFor)
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s poolStore) ReviveKey(ctx context.Context, pool, id string) error {
	const op = "redis.pools.ReviveKey"
	db := s.db
	if err := checkPoolKey(op, pool, id); err != nil {
		return err
	}
	if err := db.check(op); err != nil {
		return err
	}
	// One HSET: the three marks go together.
	err := db.client.HSet(ctx, db.poolKey(pool), id+":c", 0, id+":r", "", id+":d", "").Err()
	return db.fail(op, err)
}

func (s poolStore) UseKey(ctx context.Context, pool, id, conv string) error {
	const op = "redis.pools.UseKey"
	db := s.db
	if err := checkPoolKey(op, pool, id); err != nil {
		return err
	}
	v, err := db.run(ctx, op, scriptPoolUse, db.poolKeys(pool, conv), id, db.nowArg(), stickyTTLArg)
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s poolStore) CountUses(ctx context.Context, pool string, uses []llm.KeyUses) error {
	const op = "redis.pools.CountUses"
	db := s.db
	if err := llm.CheckUses(op, pool, uses); err != nil {
		return err
	}
	args := make([]any, 0, 2*len(uses))
	for _, u := range uses {
		if err := checkPoolKey(op, pool, u.ID); err != nil {
			return err
		}
		args = append(args, u.ID, strconv.FormatInt(u.N, 10))
	}
	v, err := db.run(ctx, op, scriptPoolCount, []string{db.poolKey(pool)}, args...)
	if err != nil {
		return err
	}
	return status(op, v)
}

// checkPoolKey refuses an empty pool or key id, and an id with a ':',
// which would be read back as another field, or a '|', which would end
// it in a conversation's key.
func checkPoolKey(op, pool, id string) error {
	if pool == "" || id == "" || strings.ContainsAny(id, ":|") {
		return errs.E(op, errs.Invalid, "a pool key needs a pool name and an id without ':' or '|', got %q and %q", pool, id)
	}
	return nil
}
