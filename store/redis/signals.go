package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// signalsKeep is how long the signals log keeps a signal at least. A
// signal matters only while the turn it is about runs; an hour is far
// longer than any poll interval, so a tailer that was briefly away still
// finds what was meant for it.
const signalsKeep = time.Hour

// The signals log is one stream per shard: a signal goes to the stream
// of its conversation's shard, so that no one stream takes every
// process's signals on a cluster. A read takes each shard's stream after
// where it last got to in that stream, all at once, and merges them by
// their ids' time. A cursor is therefore every shard's last id read, in
// shard order, joined by signalsCursorSep; in the one-server layout it is
// the one stream's id as it is.
//
// Each shard's part of a cursor moves only past the signals returned from
// that shard, so a read cut short by its limit skips nothing, and a
// signal that reaches its stream late (its writer's clock behind another
// process's) is still read, after the ones read before it. So is a
// shard's signal a read left out while the shard did not answer.

// signalsCursorSep joins the shards' parts of a signals cursor.
const signalsCursorSep = ","

// signalStore is the signal log (signals.Store).
type signalStore struct{ db *DB }

var _ signals.Store = signalStore{}

// Signals returns the cluster's signal log.
func (db *DB) Signals() signals.Store { return signalStore{db: db} }

// signalsKey is shard i's signals stream.
func (db *DB) signalsKey(i int) string { return db.shards.pfx(i) + "signals" }

func (s signalStore) Signal(ctx context.Context, sig signals.Signal) error {
	const op = "redis.Signal"
	if err := sig.Check(op, s.db.lim.MaxEntryBytes); err != nil {
		return err
	}
	// Check has made sure every signal names its conversation.
	key := s.db.signalsKey(s.db.shards.of(sig.Conv))
	v, err := s.db.run(ctx, op, scriptSigAppend, []string{key},
		s.db.nowArg(), signalsKeep.Milliseconds(), sig.Conv, string(sig.Kind), sig.EntryID, sig.Text, sig.MessageID, sig.Target)
	if err != nil {
		return err
	}
	if len(v) != 1 {
		return errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return nil
}

// shardSignal is a signal's stream entry with its shard and its id's
// parts, for the merge of the shards' streams.
type shardSignal struct {
	shard   int
	ms, seq uint64
	m       goredis.XMessage
}

// before orders signals by their ids' time, then sequence.
func (a shardSignal) before(b shardSignal) bool {
	return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq
}

func (s signalStore) SignalsAfter(ctx context.Context, after string, count int) ([]signals.Signal, string, error) {
	const op = "redis.SignalsAfter"
	if err := s.db.check(op); err != nil {
		return nil, "", err
	}
	if after == "" {
		ends, err := everyShard(ctx, s.db, s.signalsEnd)
		if err != nil {
			return nil, "", s.db.fail(op, err)
		}
		return nil, strings.Join(ends, signalsCursorSep), nil
	}
	at := strings.Split(after, signalsCursorSep)
	if len(at) != s.db.shards.count() {
		return nil, "", errs.E(op, errs.Invalid, "%q is not a signals cursor", after)
	}
	for _, id := range at {
		if !isStreamID(id) {
			return nil, "", errs.E(op, errs.Invalid, "%q is not a signals cursor", after)
		}
	}
	// A shard that does not answer (its failover) is left out of this
	// read, its part of the cursor kept: the tailer's next read takes it
	// up again, and the other shards' signals are not held back meanwhile.
	parts, err := answeringShards(ctx, s.db, func(ctx context.Context, i int) ([]shardSignal, error) {
		sigs, err := s.signalsFrom(ctx, i, at[i], count)
		return sigs, s.db.fail(op, err)
	})
	if err != nil {
		return nil, "", err
	}
	read := mergeOrdered(parts, shardSignal.before)
	if count > 0 && len(read) > count {
		read = read[:count]
	}
	out := make([]signals.Signal, len(read))
	for k, r := range read {
		at[r.shard] = r.m.ID
		out[k] = signals.Signal{
			Cursor:    strings.Join(at, signalsCursorSep),
			Conv:      field(r.m, "c"),
			Kind:      signals.Kind(field(r.m, "k")),
			EntryID:   field(r.m, "e"),
			Text:      field(r.m, "t"),
			MessageID: field(r.m, "m"),
			Target:    field(r.m, "tg"),
			At:        msTime(field(r.m, "at")),
		}
	}
	return out, strings.Join(at, signalsCursorSep), nil
}

// signalsEnd is the id of the last signal in shard i's stream, or 0-0
// when it has none: every id the stream will make is above it.
func (s signalStore) signalsEnd(ctx context.Context, i int) (string, error) {
	cmd := goredis.NewXMessageSliceCmd(ctx, "xrevrange", s.db.signalsKey(i), "+", "-", "count", 1)
	last, err := await(ctx, s.db.batch, cmd, cmd.Result)
	if err != nil || len(last) == 0 {
		return "0-0", err
	}
	return last[0].ID, nil
}

// signalsFrom reads up to count signals (0 or less: all) of shard i's
// stream after the id after.
func (s signalStore) signalsFrom(ctx context.Context, i int, after string, count int) ([]shardSignal, error) {
	args := []any{"xrange", s.db.signalsKey(i), "(" + after, "+"}
	if count > 0 {
		args = append(args, "count", count)
	}
	cmd := goredis.NewXMessageSliceCmd(ctx, args...)
	raw, err := await(ctx, s.db.batch, cmd, cmd.Result)
	if err != nil {
		return nil, err
	}
	out := make([]shardSignal, len(raw))
	for k, m := range raw {
		ms, seq, _ := strings.Cut(m.ID, "-")
		out[k] = shardSignal{shard: i, m: m}
		out[k].ms, _ = strconv.ParseUint(ms, 10, 64)
		out[k].seq, _ = strconv.ParseUint(seq, 10, 64)
	}
	return out, nil
}
