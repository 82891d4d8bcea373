package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
)

// Reads of every shard, and ids found by asking every shard.
//
// A list over a cluster-wide index (every cron job, the due jobs, the
// pending approvals) reads each shard's part, all at once, and merges.
// An id a domain makes (an approval's, a cron run's) carries no shard:
// its keys are written where the store chose by something else (the
// approval's conversation, the run's job), and a call that names only
// the id finds the shard by asking every shard in one pipeline whether
// the id's key is there. The answer is remembered (a shardMemo): such
// keys never move, so a shard once found stays the id's.

// shardReads is everyShard or answeringShards.
type shardReads[T any] func(ctx context.Context, db *DB, read func(ctx context.Context, i int) (T, error)) ([]T, error)

// everyShard calls read for every shard at once (inShards) and returns
// the answers by shard, or the first error.
func everyShard[T any](ctx context.Context, db *DB, read func(ctx context.Context, i int) (T, error)) ([]T, error) {
	out := make([]T, db.shards.count())
	err := inShards(ctx, db.shards.all(), func(ctx context.Context, i int) error {
		var err error
		out[i], err = read(ctx, i)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// answeringShards is everyShard for the reads a loop makes again and
// again (the due cron jobs, the stale fires): a shard that does not
// answer, because it is unavailable (its primary is being replaced, or
// its writes wait for a replica) or not within shardReadBudget, is left
// out, so that one shard's failover holds back only what is in it; the
// loop reads it again at its next turn. Any other error, or no shard
// answering, is the call's error. The one-server layout's one shard is
// read as everyShard reads it, without a budget.
func answeringShards[T any](ctx context.Context, db *DB, read func(ctx context.Context, i int) (T, error)) ([]T, error) {
	if db.shards.count() == 1 {
		return everyShard(ctx, db, read)
	}
	out := make([]T, db.shards.count())
	failed := make([]error, db.shards.count())
	err := inShards(ctx, db.shards.all(), func(ctx context.Context, i int) error {
		sctx, cancel := context.WithTimeout(ctx, shardReadBudget)
		defer cancel()
		var err error
		out[i], err = read(sctx, i)
		if errs.Is(err, errs.Unavailable) && ctx.Err() == nil {
			failed[i], err = err, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	n := 0
	for _, err := range failed {
		if err != nil {
			n++
		}
	}
	if n == len(failed) {
		return nil, failed[0]
	}
	return out, nil
}

// shardReadBudget is how long a loop's read waits for a shard: far
// longer than a read takes, far shorter than a failover, during which a
// call to the shard waits for the cluster to name its new primary.
const shardReadBudget = time.Second

// locate is the shard of each of ids whose key (keyOf of a shard's
// prefix and the id) exists there: remembered (db.located, a shardMemo),
// else asked of every shard in one pipeline. An id found nowhere is left out. In the one-server
// layout every id is shard 0's, unasked, found or not. kind names the
// ids' family in what is remembered.
func (db *DB) locate(ctx context.Context, op, kind string, ids []string, keyOf func(pfx, id string) string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	if !db.shards.sharded() {
		for _, id := range ids {
			out[id] = 0
		}
		return out, nil
	}
	var ask []string
	for _, id := range ids {
		if i, ok := db.located.get(kind + id); ok {
			out[id] = i
		} else if _, dup := out[id]; !dup {
			ask = append(ask, id)
			out[id] = -1
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	if err := db.check(op); err != nil {
		return nil, err
	}
	pipe := db.client.Pipeline()
	n := db.shards.count()
	found := make([][]*goredis.IntCmd, len(ask))
	for k, id := range ask {
		found[k] = make([]*goredis.IntCmd, n)
		for i := range n {
			found[k][i] = pipe.Exists(ctx, keyOf(db.shards.pfx(i), id))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, db.fail(op, err)
	}
	for k, id := range ask {
		delete(out, id)
		for i, c := range found[k] {
			if c.Val() == 1 {
				out[id] = i
				db.located.put(kind+id, i)
				break
			}
		}
	}
	return out, nil
}

// remember records that id of kind lives in shard i.
func (db *DB) remember(kind, id string, i int) {
	if db.shards.sharded() {
		db.located.put(kind+id, i)
	}
}

// merged is the shards' answers in one slice, never nil: the one
// shard's as it is, else each shard's in turn, for the caller to order.
func merged[T any](parts [][]T) []T {
	if len(parts) == 1 && parts[0] != nil {
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]T, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// mergeOrdered merges lists, each in its order, into one: at each step
// the head that goes first by before, of the lowest shard on a tie, so
// that each shard's own order is kept.
func mergeOrdered[T any](parts [][]T, before func(a, b T) bool) []T {
	if len(parts) == 1 {
		return merged(parts)
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]T, 0, n)
	at := make([]int, len(parts))
	for {
		best := -1
		for i, p := range parts {
			if at[i] < len(p) && (best < 0 || before(p[at[i]], parts[best][at[best]])) {
				best = i
			}
		}
		if best < 0 {
			return out
		}
		out = append(out, parts[best][at[best]])
		at[best]++
	}
}
