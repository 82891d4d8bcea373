package sqlite

import (
	"strconv"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
)

// checkWrites refuses, before the transaction, the writes of a Finish
// this store does not apply (sessions.Write), so a refused commit costs
// no transaction.
func (d *DB) checkWrites(op string, ws []sessions.Write) error {
	if err := sessions.CheckWrites(op, ws); err != nil {
		return err
	}
	for _, w := range ws {
		if err := d.checkWrite(op, w); err != nil {
			return err
		}
	}
	return nil
}

// checkWrite refuses w when its kind is not one this store applies or
// what it holds is invalid. Every kind the store applies is listed here
// and in applyWrite.
func (d *DB) checkWrite(op string, w sessions.Write) error {
	switch w := w.(type) {
	case delegation.Dispatch:
		_, err := encodeDispatch(op, w)
		return err
	case cronjobs.Create:
		_, _, err := encodeJob(op, w.Job, 1)
		return err
	case controllers.Put:
		return w.State.Check(op)
	case sessions.Usage:
		return w.Check(op)
	case notes.Add:
		return w.Check(op, d.lim.MaxEntryBytes)
	case notes.Remove:
		return w.Check(op)
	case media.ReleaseFiles:
		return w.Check(op)
	default:
		return sessions.UnknownWrite(op, w)
	}
}

// applyWrite applies w inside a turn's commit, after the lease was
// checked: it is written with the turn or not at all.
func (d *DB) applyWrite(t *tx, op string, w sessions.Write, now time.Time) error {
	switch w := w.(type) {
	case delegation.Dispatch:
		rows, err := encodeDispatch(op, w)
		if err != nil {
			return err
		}
		return insertDispatch(t, op, w, rows, now, true)
	case cronjobs.Create:
		body, due, err := encodeJob(op, w.Job, 1)
		if err != nil {
			return err
		}
		_, err = t.exec(sqlCronInsert, w.Job.ID, due, body)
		return conflict(op, err, "job %q exists", w.Job.ID)
	case controllers.Put:
		return putControllerIf(t, w.State, nanos(now))
	case sessions.Usage:
		return addUsage(t, w)
	case notes.Add:
		return addNote(t, w.User, w.ID, w.Text, nanos(now))
	case notes.Remove:
		_, err := deleteNote(t, w.User, w.ID)
		return err
	case media.ReleaseFiles:
		for _, id := range w.IDs {
			if _, err := t.exec(sqlFileDelete, id); err != nil {
				return err
			}
		}
		return nil
	default:
		return sessions.UnknownWrite(op, w)
	}
}

// sqlUsageAdd adds to a conversation's prompt and completion token
// totals, kept in its metadata as decimal numbers, in one statement.
const sqlUsageAdd = `INSERT INTO meta (conv, key, value) VALUES (?1, ?2, ?3), (?1, ?4, ?5)
	ON CONFLICT (conv, key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + CAST(excluded.value AS INTEGER) AS TEXT)`

// addUsage adds a turn's token usage to its conversation's totals.
func addUsage(t *tx, u sessions.Usage) error {
	prompt, completion := sessions.UsageKeys(u.Model)
	_, err := t.st.usageAdd.Exec(u.Conv, prompt, strconv.Itoa(u.Prompt), completion, strconv.Itoa(u.Completion))
	return err
}
