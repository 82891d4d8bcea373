package redis

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// signalsKeep is how long the signals log keeps a signal at least. A
// signal matters only while the turn it is about runs; an hour is far
// longer than any poll interval, so a tailer that was briefly away still
// finds what was meant for it.
const signalsKeep = time.Hour

// signalStore is the signal log (signals.Store).
type signalStore struct{ db *DB }

var _ signals.Store = signalStore{}

// Signals returns the cluster's signal log.
func (db *DB) Signals() signals.Store { return signalStore{db: db} }

func (db *DB) signalsKey() string { return db.prefix + "signals" }

func (s signalStore) Signal(ctx context.Context, sig signals.Signal) error {
	const op = "redis.Signal"
	if err := sig.Check(op, s.db.lim.MaxEntryBytes); err != nil {
		return err
	}
	v, err := s.db.run(ctx, op, scriptSigAppend, []string{s.db.signalsKey()},
		s.db.nowArg(), signalsKeep.Milliseconds(), sig.Conv, string(sig.Kind), sig.EntryID, sig.Text, sig.MessageID, sig.Target)
	if err != nil {
		return err
	}
	if len(v) != 1 {
		return errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return nil
}

func (s signalStore) SignalsAfter(ctx context.Context, after string, count int) ([]signals.Signal, string, error) {
	const op = "redis.SignalsAfter"
	if err := s.db.check(op); err != nil {
		return nil, "", err
	}
	key := s.db.signalsKey()
	if after == "" {
		last, err := s.db.client.XRevRangeN(ctx, key, "+", "-", 1).Result()
		if err != nil {
			return nil, "", s.db.fail(op, err)
		}
		if len(last) == 0 {
			// Every id the log will make is above 0-0.
			return nil, "0-0", nil
		}
		return nil, last[0].ID, nil
	}
	if !isStreamID(after) {
		return nil, "", errs.E(op, errs.Invalid, "%q is not a signals cursor", after)
	}
	raw, err := xrange(ctx, s.db.client, key, "("+after, count)
	if err != nil {
		return nil, "", s.db.fail(op, err)
	}
	out := make([]signals.Signal, len(raw))
	next := after
	for i, m := range raw {
		out[i] = signals.Signal{
			Cursor:    m.ID,
			Conv:      field(m, "c"),
			Kind:      signals.Kind(field(m, "k")),
			EntryID:   field(m, "e"),
			Text:      field(m, "t"),
			MessageID: field(m, "m"),
			Target:    field(m, "tg"),
			At:        msTime(field(m, "at")),
		}
		next = m.ID
	}
	return out, next, nil
}
