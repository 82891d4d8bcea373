package redis

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

var _ outbox.Store = (*outboxStore)(nil)

// outboxStore is the outbox side of DB.
type outboxStore struct{ db *DB }

func (o *outboxStore) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	const op = "redis.Enqueue"
	args, err := encodeOutbox(op, []outbox.Message{m}, o.db.lim)
	if err != nil {
		return "", false, err
	}
	v, err := o.db.run(ctx, op, scriptObEnqueue, nil,
		o.db.prefix, args[0], args[1], args[2], args[3], o.db.nowArg(), o.db.windowArg())
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
	args := []any{o.db.prefix, worker, max, durMS(ttl), o.db.nowArg()}
	seen := make(map[string]bool, len(platforms))
	for _, p := range platforms {
		if p != "" && !seen[p] {
			seen[p] = true
			args = append(args, p)
		}
	}
	v, err := o.db.run(ctx, op, scriptObClaim, nil, args...)
	if err != nil || len(v) == 0 {
		return nil, err
	}
	token, exp := num(v[0]), msTime(v[1])
	msgs, err := decodeMessages(op, v[2:], claimStride)
	if err != nil {
		return nil, err
	}
	out := make([]outbox.Claimed, len(msgs))
	for i, m := range msgs {
		out[i] = outbox.Claimed{Message: m, Token: token, Expires: exp, Resend: str(v[2+i*claimStride+listStride]) == "1"}
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

// ack acks cs with one script call and returns each message's outcome.
func (o *outboxStore) ack(ctx context.Context, op string, cs []outbox.Claimed) ([]error, error) {
	if err := o.db.check(op); err != nil {
		return nil, err
	}
	acked := make([]error, len(cs))
	args := make([]any, 1, 1+3*len(cs))
	args[0] = o.db.prefix
	for i, c := range cs {
		if c.ID == "" {
			acked[i] = errs.E(op, errs.NotFound, "no message id")
			continue
		}
		args = append(args, c.ID, c.Token, c.Target.String())
	}
	if len(args) == 1 {
		return acked, nil
	}
	v, err := o.db.run(ctx, op, scriptObAck, nil, args...)
	if err != nil {
		return nil, err
	}
	if len(v) != (len(args)-1)/3 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	j := 0
	for i, c := range cs {
		if c.ID == "" {
			continue
		}
		acked[i] = status(op, v[j:j+1])
		j++
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
	if id == "" {
		return errs.E(op, errs.NotFound, "no message id")
	}
	args := append([]any{o.db.prefix, id, token}, rest...)
	v, err := o.db.run(ctx, op, s, nil, args...)
	if err != nil {
		return err
	}
	return status(op, v)
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
	_, err := o.db.run(ctx, op, scriptObBeat, nil, o.db.prefix, worker, ms, o.db.nowArg())
	return err
}

func (o *outboxStore) Pending(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.list(ctx, "redis.OutboxPending", "all", limit)
}

func (o *outboxStore) DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.list(ctx, "redis.OutboxDeadLetters", "dead", limit)
}

// Unsent reads the size of the target's index (ob:t:<target>), which
// holds its messages that are neither acked nor dead.
func (o *outboxStore) Unsent(ctx context.Context, target outbox.Target) (bool, error) {
	const op = "redis.OutboxUnsent"
	db := o.db
	if err := db.check(op); err != nil {
		return false, err
	}
	if err := target.Validate(); err != nil {
		return false, errs.Wrap(op, errs.Invalid, err)
	}
	n, err := db.client.ZCard(ctx, db.prefix+"ob:t:"+target.String()).Result()
	if err != nil {
		return false, db.fail(op, err)
	}
	return n > 0, nil
}

func (o *outboxStore) list(ctx context.Context, op, index string, limit int) ([]outbox.Message, error) {
	v, err := o.db.run(ctx, op, scriptObList, nil, o.db.prefix, index, limit)
	if err != nil {
		return nil, err
	}
	return decodeMessages(op, v, listStride)
}

func (o *outboxStore) Requeue(ctx context.Context, id string) error {
	const op = "redis.OutboxRequeue"
	if err := o.db.check(op); err != nil {
		return err
	}
	if id == "" {
		return errs.E(op, errs.NotFound, "no message id")
	}
	v, err := o.db.run(ctx, op, scriptObRequeue, nil, o.db.prefix, id, o.db.nowArg())
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
