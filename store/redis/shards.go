package redis

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
)

// Shards. On Redis Cluster a script may touch the keys of one hash slot
// only, so the keyspace is cut into a fixed number of shards, each a hash
// tag of its own: shard i's keys all start with P{label}: (its prefix),
// and so live in one slot. A conversation lives in one shard, chosen by a
// hash of its key, together with the indexes its turns write: the ready
// and activity indexes, the outbox its commits enqueue to, the
// delegations they dispatch, its signals. So a commit, and the claim of
// the next ready conversation made with it, stay inside one slot. Every
// cluster-wide index is one per shard; a claim goes round the shards,
// each process starting at a different one, so that none starves; a list
// reads every shard and merges.
//
// Inside a shard the keys are named as in the layout of one server
// (doc.go), after the shard's prefix rather than P: the scripts build
// every key from the prefix they are given, so the same scripts serve
// both layouts. A conversation's keys keep their own {conv} tag after the
// prefix; Redis hashes the first tag only, which is the shard's.
//
// Options.Shards 0 is the layout of one server as it has always been
// (one shard whose prefix is P, no tag), which a server holding herald's
// data from before keeps. Any other count is the sharded layout; the
// count is recorded at P + "shards" by the first Open and a later Open
// with another count is refused, since it would look for every key in
// another shard.

// DefaultClusterShards is the shard count in cluster mode when
// Options.Shards is 0: enough that three to sixteen primaries each hold
// some, few enough that a list reading every shard stays cheap.
const DefaultClusterShards = 16

// maxShards bounds Options.Shards.
const maxShards = 1024

// layout is the shards' prefixes and labels.
type layout struct {
	prefixes []string
	labels   map[string]int // a sharded layout's label → shard
	next     atomic.Uint32  // where the next round starts
}

// newLayout makes the prefixes of n shards (0: the one-server layout).
// The labels are chosen so that the shards' slots spread evenly over the
// slot space: shard i's label is the first of "i", "i.1", "i.2", … whose
// slot falls in the i-th of n equal parts, so that primaries holding
// equal ranges of slots hold about equal numbers of shards.
func newLayout(prefix string, n int) *layout {
	l := &layout{}
	l.next.Store(rand.Uint32())
	if n == 0 {
		l.prefixes = []string{prefix}
		return l
	}
	l.labels = make(map[string]int, n)
	for i := range n {
		lo, hi := i*slotCount/n, (i+1)*slotCount/n
		label := strconv.Itoa(i)
		for k := 1; k < 100000; k++ {
			if s := keySlot(label); s >= lo && s < hi {
				break
			}
			label = strconv.Itoa(i) + "." + strconv.Itoa(k)
		}
		l.labels[label] = i
		l.prefixes = append(l.prefixes, prefix+"{"+label+"}:")
	}
	return l
}

// sharded reports whether keys carry a shard's tag.
func (l *layout) sharded() bool { return l.labels != nil }

// count is the number of shards.
func (l *layout) count() int { return len(l.prefixes) }

// pfx is the key prefix of shard i.
func (l *layout) pfx(i int) string { return l.prefixes[i] }

// of is the shard a name (a conversation, a target, a job id) lives in.
func (l *layout) of(name string) int {
	if len(l.prefixes) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(len(l.prefixes)))
}

// round is every shard once, starting at the next one in turn, for a
// claim or a sweep that goes round them.
func (l *layout) round() []int {
	n := len(l.prefixes)
	out := make([]int, n)
	if n == 1 {
		return out
	}
	start := int(l.next.Add(1) % uint32(n))
	for i := range out {
		out[i] = (start + i) % n
	}
	return out
}

// idShard is the shard a shard-qualified id ("<label>_<rest>", as the
// scripts make ids in a sharded layout, see lib.lua's shard_id) names.
// In the one-server layout every id is shard 0's.
func (l *layout) idShard(id string) (int, bool) {
	if !l.sharded() {
		return 0, true
	}
	label, _, ok := strings.Cut(id, "_")
	if !ok {
		return 0, false
	}
	i, ok := l.labels[label]
	return i, ok
}

// pfxOf is the prefix of the shard name lives in.
func (db *DB) pfxOf(name string) string { return db.shards.pfx(db.shards.of(name)) }

// convPfx is the prefix of a conversation's shard.
func (db *DB) convPfx(conv string) string { return db.pfxOf(conv) }

// runIn calls a script in shard i. A script that names no key of its own
// is routed by the shard's prefix, which hashes to the shard's slot.
func (db *DB) runIn(ctx context.Context, op string, s script, i int, keys []string, args ...any) ([]any, error) {
	if len(keys) == 0 {
		keys = []string{db.shards.pfx(i)}
	}
	return db.run(ctx, op, s, keys, args...)
}

// checkShards records the shard count at the first Open of a sharded
// layout and refuses another count later.
func (db *DB) checkShards(ctx context.Context) error {
	const op = "redis.Open"
	key := db.prefix + "shards"
	want := strconv.Itoa(db.shards.count())
	if !db.shards.sharded() {
		want = "0"
	}
	// Read first: a store laid out already is opened without a write, so
	// a server that refuses writes (out of memory) can still be read.
	got, err := db.client.Get(ctx, key).Result()
	if errors.Is(err, goredis.Nil) {
		got, err = db.client.SetArgs(ctx, key, want, goredis.SetArgs{Mode: "NX", Get: true}).Result()
	}
	if err != nil && !errors.Is(err, goredis.Nil) {
		return db.fail(op, err)
	}
	if got != "" && got != want {
		return errs.E(op, errs.Invalid, "the store at prefix %q was laid out with %s shards, not %s (a cluster keeps its shard count; see docs/redis-cluster.md)", db.prefix, got, want)
	}
	return nil
}

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// keySlot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of the
// key, or of its first non-empty {tag}, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}
