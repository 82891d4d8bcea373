package sqlite

import (
	"context"
	"strconv"
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
type signalStore struct{ d *DB }

var _ signals.Store = signalStore{}

// Signals returns the cluster's signal log.
func (d *DB) Signals() signals.Store { return signalStore{d: d} }

const (
	sqlSignalInsert = `INSERT INTO signals (conv, kind, entry_id, text, message_id, target, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`
	sqlSignalPrune  = `DELETE FROM signals WHERE cursor IN
		(SELECT cursor FROM signals WHERE at <= ?1 LIMIT ?2)`
	// An empty log ends at 0: AUTOINCREMENT hands out only cursors above
	// any that existed, so every later signal comes after it.
	sqlSignalsEnd  = `SELECT COALESCE(MAX(cursor), 0) FROM signals`
	sqlSignalsRead = `SELECT cursor, conv, kind, entry_id, text, message_id, target, at FROM signals
		WHERE cursor > ?1 ORDER BY cursor LIMIT ?2`
)

func (s signalStore) Signal(ctx context.Context, sig signals.Signal) error {
	const op = "sqlite.Signal"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := sig.Check(op, d.lim.MaxEntryBytes); err != nil {
		return err
	}
	// Bookkeeping (see commitMode): a signal only matters to turns
	// running now, and the power cut that could lose its commit stops
	// those turns too, every process sharing the file being on this
	// machine.
	err := d.w.do(ctx, op, bookkeeping, func(t *tx) error {
		_, now := d.now()
		if _, err := t.st.signalInsert.Exec(sig.Conv, string(sig.Kind), sig.EntryID, sig.Text, sig.MessageID, sig.Target, now); err != nil {
			return err
		}
		// Signals are few, so pruning with each one costs a seek on the
		// at index and keeps the log to about an hour.
		_, err := t.st.signalPrune.Exec(now-int64(signalsKeep), pruneBatch)
		return err
	})
	return d.fail(op, err)
}

func (s signalStore) SignalsAfter(ctx context.Context, after string, count int) ([]signals.Signal, string, error) {
	const op = "sqlite.SignalsAfter"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, "", err
	}
	if after == "" {
		var end int64
		if err := d.reads.signalsEnd.QueryRowContext(ctx).Scan(&end); err != nil {
			return nil, "", d.fail(op, err)
		}
		return nil, formatID(end), nil
	}
	from, err := strconv.ParseInt(after, 10, 64)
	if err != nil || from < 0 {
		return nil, "", errs.E(op, errs.Invalid, "%q is not a signals cursor", after)
	}
	rows, err := d.reads.signalsRead.QueryContext(ctx, from, limit(count))
	if err != nil {
		return nil, "", d.fail(op, err)
	}
	defer rows.Close()
	var out []signals.Signal
	next := after
	for rows.Next() {
		var (
			cursor, at int64
			kind       string
			sig        signals.Signal
		)
		if err := rows.Scan(&cursor, &sig.Conv, &kind, &sig.EntryID, &sig.Text, &sig.MessageID, &sig.Target, &at); err != nil {
			return nil, "", d.fail(op, err)
		}
		sig.Kind, sig.At = signals.Kind(kind), fromNanos(at)
		sig.Cursor = formatID(cursor)
		next = sig.Cursor
		out = append(out, sig)
	}
	if err := rows.Err(); err != nil {
		return nil, "", d.fail(op, err)
	}
	return out, next, nil
}
