package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

var _ outbox.Store = (*outboxStore)(nil)

// outboxStore is the outbox side of DB.
//
// In a sharded layout (shards.go) every shard has an outbox of its own,
// keyed as the one server's is (doc.go) after the shard's prefix. A
// message lives in one shard: the one of its conversation when it has
// one, where that conversation's commits enqueue theirs (q_finish), else
// the one of its target. Its id names the shard ("<label>_<sequence>",
// lib.lua's shard_id), so that each call about it goes there; an id no
// shard's label starts is NotFound. A target's order, the waits behind
// another worker's claim and the idempotency keys hold within a shard:
// so a target's messages of one conversation (or enqueued without one)
// leave in order, while messages to one target from different
// conversations are ordered only when they share a shard, and an
// idempotency key dedupes the messages of one conversation (or of one
// target, without one). A claim goes round the shards, oldest first
// (Claim); a heartbeat is kept in every shard (Beat); the lists read
// every shard and merge.
type outboxStore struct{ db *DB }

// home is the shard m is enqueued in: its conversation's, else its
// target's.
func (o *outboxStore) home(m outbox.Message) int {
	if m.Conv != "" {
		return o.db.shards.of(m.Conv)
	}
	return o.db.shards.of(m.Target.String())
}

func (o *outboxStore) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	const op = "redis.Enqueue"
	args, err := encodeOutbox(op, []outbox.Message{m}, o.db.lim)
	if err != nil {
		return "", false, err
	}
	i := o.home(m)
	v, err := o.db.runIn(ctx, op, scriptObEnqueue, i, nil,
		o.db.shards.pfx(i), args[0], args[1], args[2], args[3], o.db.nowArg(), o.db.windowArg())
	if err != nil {
		return "", false, err
	}
	if len(v) != 2 {
		return "", false, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return str(v[0]), num(v[1]) == 1, nil
}

func (o *outboxStore) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	const op = "redis.OutboxClaim"
	if err := o.db.check(op); err != nil {
		return nil, err
	}
	if max <= 0 || len(platforms) == 0 {
		return nil, nil
	}
	if ttl <= 0 {
		ttl = outbox.DefaultClaimTTL
	}
	plats := make([]any, 0, len(platforms))
	seen := make(map[string]bool, len(platforms))
	for _, p := range platforms {
		if p != "" && !seen[p] {
			seen[p] = true
			plats = append(plats, p)
		}
	}
	shards := []int{0}
	if o.db.shards.sharded() {
		var err error
		if shards, err = o.claimOrder(ctx, op, worker, plats); err != nil {
			return nil, err
		}
	}
	var out []outbox.Claimed
	for _, i := range shards {
		cs, err := o.claimIn(ctx, op, i, worker, plats, max-len(out), ttl)
		if err != nil {
			if len(out) > 0 {
				// What was claimed is held: the next claim tries this
				// shard again.
				break
			}
			return nil, err
		}
		if out = append(out, cs...); len(out) >= max {
			break
		}
	}
	return out, nil
}

// claimOrder is the shards a claim goes to, in order: those with a
// message for worker (ob_peek), the one whose oldest is oldest first,
// ties in the order of a round (layout.round), so that claims made at
// once start at different shards. Each shard's peek renews the worker's
// heartbeat there, as a claim does; when one fails, the claim fails, as
// its heartbeat was not renewed everywhere.
func (o *outboxStore) claimOrder(ctx context.Context, op, worker string, plats []any) ([]int, error) {
	round := o.db.shards.round()
	oldest := make([]int64, o.db.shards.count())
	err := inShards(ctx, round, func(ctx context.Context, i int) error {
		args := append([]any{o.db.shards.pfx(i), worker, o.db.nowArg()}, plats...)
		v, err := o.db.runIn(ctx, op, scriptObPeek, i, nil, args...)
		if err != nil {
			return err
		}
		oldest[i] = -1
		if len(v) == 1 {
			oldest[i] = num(v[0])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(round, func(i int) bool { return oldest[i] < 0 })
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(oldest[a], oldest[b]) })
	return out, nil
}

// claimIn claims up to max messages in shard i (ob_claim).
func (o *outboxStore) claimIn(ctx context.Context, op string, i int, worker string, plats []any, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	args := append([]any{o.db.shards.pfx(i), worker, max, durMS(ttl), o.db.nowArg()}, plats...)
	v, err := o.db.runIn(ctx, op, scriptObClaim, i, nil, args...)
	if err != nil || len(v) == 0 {
		return nil, err
	}
	token, exp := num(v[0]), msTime(v[1])
	msgs, err := decodeMessages(op, v[2:], claimStride)
	if err != nil {
		return nil, err
	}
	out := make([]outbox.Claimed, len(msgs))
	for k, m := range msgs {
		out[k] = outbox.Claimed{Message: m, Token: token, Expires: exp, Resend: str(v[2+k*claimStride+listStride]) == "1"}
	}
	return out, nil
}

func (o *outboxStore) Ack(ctx context.Context, c outbox.Claimed) error {
	const op = "redis.OutboxAck"
	acked, err := o.ack(ctx, op, []outbox.Claimed{c})
	if err != nil {
		return err
	}
	return acked[0]
}

func (o *outboxStore) AckAll(ctx context.Context, cs []outbox.Claimed) ([]error, error) {
	return o.ack(ctx, "redis.OutboxAckAll", cs)
}

// ack acks cs with one script call per shard their ids name, and
// returns each message's outcome.
func (o *outboxStore) ack(ctx context.Context, op string, cs []outbox.Claimed) ([]error, error) {
	if err := o.db.check(op); err != nil {
		return nil, err
	}
	acked := make([]error, len(cs))
	byShard := map[int][]int{} // shard → indexes in cs
	var shards []int
	for k, c := range cs {
		i, ok := o.db.shards.idShard(c.ID)
		switch {
		case c.ID == "":
			acked[k] = errs.E(op, errs.NotFound, "no message id")
		case !ok:
			acked[k] = errs.E(op, errs.NotFound, "no such message %q", c.ID)
		default:
			if byShard[i] == nil {
				shards = append(shards, i)
			}
			byShard[i] = append(byShard[i], k)
		}
	}
	if len(shards) == 0 {
		return acked, nil
	}
	err := inShards(ctx, shards, func(ctx context.Context, i int) error {
		ks := byShard[i]
		args := make([]any, 1, 1+3*len(ks))
		args[0] = o.db.shards.pfx(i)
		for _, k := range ks {
			args = append(args, cs[k].ID, cs[k].Token, cs[k].Target.String())
		}
		v, err := o.db.runIn(ctx, op, scriptObAck, i, nil, args...)
		if err != nil {
			return err
		}
		if len(v) != len(ks) {
			return errs.E(op, errs.Internal, "unexpected script reply %v", v)
		}
		for j, k := range ks {
			acked[k] = status(op, v[j:j+1])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return acked, nil
}

func (o *outboxStore) Release(ctx context.Context, c outbox.Claimed, next time.Time, reason string) error {
	const op = "redis.OutboxRelease"
	return o.settle(ctx, op, scriptObRelease, c.ID, c.Token, next.UnixMilli(), "1", reason)
}

func (o *outboxStore) Postpone(ctx context.Context, c outbox.Claimed, next time.Time) error {
	const op = "redis.OutboxPostpone"
	return o.settle(ctx, op, scriptObRelease, c.ID, c.Token, next.UnixMilli(), "0", "")
}

func (o *outboxStore) Dead(ctx context.Context, c outbox.Claimed, reason string) error {
	const op = "redis.OutboxDead"
	return o.settle(ctx, op, scriptObDead, c.ID, c.Token, reason)
}

// settle runs one of the scripts that end or hand back a claim; each
// checks the claim token before it writes.
func (o *outboxStore) settle(ctx context.Context, op string, s script, id string, token int64, rest ...any) error {
	if err := o.db.check(op); err != nil {
		return err
	}
	i, err := o.idShard(op, id)
	if err != nil {
		return err
	}
	args := append([]any{o.db.shards.pfx(i), id, token}, rest...)
	v, err := o.db.runIn(ctx, op, s, i, nil, args...)
	if err != nil {
		return err
	}
	return status(op, v)
}

// idShard is the shard message id lives in; an empty id, or one no
// shard's label starts, is NotFound.
func (o *outboxStore) idShard(op, id string) (int, error) {
	if id == "" {
		return 0, errs.E(op, errs.NotFound, "no message id")
	}
	i, ok := o.db.shards.idShard(id)
	if !ok {
		return 0, errs.E(op, errs.NotFound, "no such message %q", id)
	}
	return i, nil
}

func (o *outboxStore) KeepParts(ctx context.Context, c outbox.Claimed, p outbox.Parts) error {
	const op = "redis.OutboxKeepParts"
	b, err := outbox.EncodeParts(op, p)
	if err != nil {
		return err
	}
	return o.settle(ctx, op, scriptObParts, c.ID, c.Token, b)
}

func (o *outboxStore) Beat(ctx context.Context, worker string, ttl time.Duration) error {
	const op = "redis.OutboxBeat"
	if err := o.db.check(op); err != nil {
		return err
	}
	if worker == "" {
		return errs.E(op, errs.Invalid, "a heartbeat needs a worker name")
	}
	ms := int64(0) // leaves
	if ttl > 0 {
		ms = durMS(ttl)
	}
	// A worker may hold claims in any shard: it beats in every one.
	return inShards(ctx, o.db.shards.all(), func(ctx context.Context, i int) error {
		_, err := o.db.runIn(ctx, op, scriptObBeat, i, nil, o.db.shards.pfx(i), worker, ms, o.db.nowArg())
		return err
	})
}

func (o *outboxStore) Pending(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.list(ctx, "redis.OutboxPending", "all", limit)
}

func (o *outboxStore) DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.list(ctx, "redis.OutboxDeadLetters", "dead", limit)
}

// Unsent reads the size of the target's index (ob:t:<target>), which
// holds its messages that are neither acked nor dead, in every shard:
// the conversations sending to a target may live in any.
func (o *outboxStore) Unsent(ctx context.Context, target outbox.Target) (bool, error) {
	const op = "redis.OutboxUnsent"
	db := o.db
	if err := db.check(op); err != nil {
		return false, err
	}
	if err := target.Validate(); err != nil {
		return false, errs.Wrap(op, errs.Invalid, err)
	}
	cmds := make([]*goredis.IntCmd, db.shards.count())
	_, err := db.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.ZCard(ctx, db.shards.pfx(i)+"ob:t:"+target.String())
		}
		return nil
	})
	if err != nil {
		return false, db.fail(op, err)
	}
	for _, c := range cmds {
		if c.Val() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// list reads up to limit messages of an index of every shard, each
// shard's oldest first, and merges them by when they were enqueued.
func (o *outboxStore) list(ctx context.Context, op, index string, limit int) ([]outbox.Message, error) {
	lists := make([][]outbox.Message, o.db.shards.count())
	err := inShards(ctx, o.db.shards.all(), func(ctx context.Context, i int) error {
		v, err := o.db.runIn(ctx, op, scriptObList, i, nil, o.db.shards.pfx(i), index, limit)
		if err != nil {
			return err
		}
		lists[i], err = decodeMessages(op, v, listStride)
		return err
	})
	if err != nil {
		return nil, err
	}
	return mergeOldest(lists, limit), nil
}

// mergeOldest merges lists, each oldest first, into one, oldest first by
// CreatedAt (on a tie, the earlier list's first), keeping each list's
// order, up to limit messages (0 or less: all).
func mergeOldest(lists [][]outbox.Message, limit int) []outbox.Message {
	if len(lists) == 1 {
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]outbox.Message, 0, n)
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || l[0].CreatedAt.Before(lists[best][0].CreatedAt)) {
				best = i
			}
		}
		out = append(out, lists[best][0])
		lists[best] = lists[best][1:]
	}
	return out
}

func (o *outboxStore) Requeue(ctx context.Context, id string) error {
	const op = "redis.OutboxRequeue"
	if err := o.db.check(op); err != nil {
		return err
	}
	i, err := o.idShard(op, id)
	if err != nil {
		return err
	}
	v, err := o.db.runIn(ctx, op, scriptObRequeue, i, nil, o.db.shards.pfx(i), id, o.db.nowArg())
	if err != nil {
		return err
	}
	return status(op, v)
}

// The replies of ob_list give each message in listStride items, those of
// ob_claim in claimStride, the same and one more.
const (
	listStride  = 7
	claimStride = 8
)

// decodeMessages reads groups of stride items: id, encoded message,
// attempts, next attempt ms, created ms, last error, parts, and what
// follows them in the group.
func decodeMessages(op string, v []any, stride int) ([]outbox.Message, error) {
	if len(v)%stride != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected message reply of %d items", len(v))
	}
	out := make([]outbox.Message, 0, len(v)/stride)
	for i := 0; i < len(v); i += stride {
		var m outbox.Message
		if err := json.Unmarshal([]byte(str(v[i+1])), &m); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		m.ID = str(v[i])
		attempts, _ := strconv.Atoi(str(v[i+2]))
		m.Attempts = attempts
		m.NextAttempt = msTime(v[i+3])
		m.CreatedAt = msTime(v[i+4])
		m.LastError = str(v[i+5])
		parts, err := outbox.DecodeParts(op, []byte(str(v[i+6])))
		if err != nil {
			return nil, err
		}
		m.Parts = parts
		out = append(out, m)
	}
	return out, nil
}
