package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
)

// cronStore is the DB seen as a cronjobs.Store.
type cronStore struct{ d *DB }

var _ cronjobs.Store = cronStore{}

// Cron returns the store of cron jobs and their runs.
func (d *DB) Cron() cronjobs.Store { return cronStore{d: d} }

// A job is one row of cron_jobs: its encoding, whose version the column
// overrides, and its due time (Unix nanoseconds; NULL when it wants no
// fire), which the partial index on (due_at, id) orders as DueJobs
// lists them. A run is one row of cron_runs, ordered per job by
// (started_at, id); a job may hold a few more than KeepRuns between
// trims (trimNewRun).
const (
	sqlCronInsert = `INSERT INTO cron_jobs (id, version, due_at, job) VALUES (?1, 1, ?2, ?3)`
	// The update is the compare-and-set: it matches only the version the
	// writer read.
	sqlCronUpdate = `UPDATE cron_jobs SET version = ?3, due_at = ?4, job = ?5 WHERE id = ?1 AND version = ?2`
	// The same, for a job whose due time stays: due_at not set, its
	// index is not written.
	sqlCronUpdateBody = `UPDATE cron_jobs SET version = ?3, job = ?5 WHERE id = ?1 AND version = ?2 AND due_at IS ?4`
	sqlCronExists     = `SELECT 1 FROM cron_jobs WHERE id = ?1`
	sqlCronDelete     = `DELETE FROM cron_jobs WHERE id = ?1`
	sqlCronGet        = `SELECT version, job FROM cron_jobs WHERE id = ?1`
	sqlCronAll        = `SELECT version, job FROM cron_jobs ORDER BY id`
	sqlCronDue        = `SELECT version, job FROM cron_jobs WHERE due_at <= ?1 ORDER BY due_at, id LIMIT ?2`
	sqlCronNext       = `SELECT due_at FROM cron_jobs WHERE due_at IS NOT NULL ORDER BY due_at LIMIT 1`

	sqlCronRunPut = `INSERT INTO cron_runs (id, job, started_at, run) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (id) DO UPDATE SET job = excluded.job, started_at = excluded.started_at, run = excluded.run`
	// A fire's start writes its run only when there is none (an earlier
	// attempt's is read instead); its end rewrites the record alone
	// while the run's job and start are those stored, so that neither
	// the index of the job's runs nor the trim is written again.
	sqlCronRunStart = `INSERT INTO cron_runs (id, job, started_at, run) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (id) DO NOTHING`
	sqlCronRunEnd = `UPDATE cron_runs SET run = ?4 WHERE id = ?1 AND job = ?2 AND started_at = ?3`
	// Newest first is started_at, then id, both descending: the index on
	// (job, started_at, id) read backwards.
	sqlCronRunTrim = `DELETE FROM cron_runs WHERE id IN
		(SELECT id FROM cron_runs WHERE job = ?1 ORDER BY started_at DESC, id DESC LIMIT -1 OFFSET ?2)`
	sqlCronRunsDelete = `DELETE FROM cron_runs WHERE job = ?1`
	sqlCronRunGet     = `SELECT run FROM cron_runs WHERE id = ?1`
	sqlCronRuns       = `SELECT run FROM cron_runs WHERE job = ?1 ORDER BY started_at DESC, id DESC LIMIT ?2`
)

// encodeJob checks j and encodes it as stored at version, with its due
// time as the due_at column takes it.
func encodeJob(op string, j cronjobs.Job, version int64) ([]byte, sql.NullInt64, error) {
	var due sql.NullInt64
	if err := cronjobs.CheckJob(op, j); err != nil {
		return nil, due, err
	}
	j.Version = version
	b, err := json.Marshal(j)
	if err != nil {
		return nil, due, errs.Wrap(op, errs.Invalid, err)
	}
	if at := j.DueAt(); !at.IsZero() {
		due = sql.NullInt64{Int64: nanos(at), Valid: true}
	}
	return b, due, nil
}

func (s cronStore) CreateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "sqlite.cron.CreateJob"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return cronjobs.Job{}, err
	}
	body, due, err := encodeJob(op, j, 1)
	if err != nil {
		return cronjobs.Job{}, err
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		_, err := t.exec(sqlCronInsert, j.ID, due, body)
		return conflict(op, err, "job %q exists", j.ID)
	})
	if err != nil {
		return cronjobs.Job{}, d.fail(op, err)
	}
	j.Version = 1
	return j, nil
}

func (s cronStore) UpdateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "sqlite.cron.UpdateJob"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return cronjobs.Job{}, err
	}
	next := j.Version + 1
	body, due, err := encodeJob(op, j, next)
	if err != nil {
		return cronjobs.Job{}, err
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		return updateJob(t, op, j, next, due, body)
	})
	if err != nil {
		return cronjobs.Job{}, d.fail(op, err)
	}
	j.Version = next
	return j, nil
}

// updateJob writes j, encoded as body at version next with its due
// time, over the stored job while its version is still j.Version.
func updateJob(t *tx, op string, j cronjobs.Job, next int64, due sql.NullInt64, body []byte) error {
	n, err := rowsOf(t.st.cronUpdate.Exec(j.ID, j.Version, next, due, body))
	if err != nil || n == 1 {
		return err
	}
	var one int
	if err := t.st.cronExists.QueryRow(j.ID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
		return errs.E(op, errs.NotFound, "no job %q", j.ID)
	} else if err != nil {
		return err
	}
	return errs.E(op, errs.Conflict, "job %q moved on from version %d: read it again", j.ID, j.Version)
}

func (s cronStore) RemoveJob(ctx context.Context, id string) error {
	const op = "sqlite.cron.RemoveJob"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	err := d.w.do(ctx, op, durable, func(t *tx) error {
		n, err := rowsOf(t.exec(sqlCronDelete, id))
		if err != nil {
			return err
		}
		if n == 0 {
			return errs.E(op, errs.NotFound, "no job %q", id)
		}
		delete(d.newRuns, id)
		_, err = t.exec(sqlCronRunsDelete, id)
		return err
	})
	return d.fail(op, err)
}

func (s cronStore) Job(ctx context.Context, id string) (cronjobs.Job, error) {
	const op = "sqlite.cron.Job"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return cronjobs.Job{}, err
	}
	j, err := scanJob(d.reads.cronGet.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no job %q", id)
	}
	if err != nil {
		return cronjobs.Job{}, d.fail(op, err)
	}
	return j, nil
}

func (s cronStore) Jobs(ctx context.Context) ([]cronjobs.Job, error) {
	const op = "sqlite.cron.Jobs"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	return s.jobs(op)(d.rdb.QueryContext(ctx, sqlCronAll))
}

func (s cronStore) DueJobs(ctx context.Context, now time.Time, n int) ([]cronjobs.Job, error) {
	const op = "sqlite.cron.DueJobs"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	return s.jobs(op)(d.reads.cronDue.QueryContext(ctx, nanos(now), limit(n)))
}

// jobs makes a reader of the jobs a query on the read pool found.
func (s cronStore) jobs(op string) func(*sql.Rows, error) ([]cronjobs.Job, error) {
	return func(rows *sql.Rows, err error) ([]cronjobs.Job, error) {
		out, err := scanRows(scanJob)(rows, err)
		if err != nil {
			return nil, s.d.fail(op, err)
		}
		return out, nil
	}
}

func (s cronStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	const op = "sqlite.cron.NextDue"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return time.Time{}, false, err
	}
	var at int64
	err := d.reads.cronNext.QueryRowContext(ctx).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, d.fail(op, err)
	}
	return fromNanos(at), true, nil
}

func (s cronStore) PutRun(ctx context.Context, r cronjobs.Run) error {
	const op = "sqlite.cron.PutRun"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return err
	}
	if err := cronjobs.CheckRun(op, r); err != nil {
		return err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error { return putRun(t, r, body) })
	return d.fail(op, err)
}

// putRun writes r, encoded as body, and keeps its job's KeepRuns newest.
func putRun(t *tx, r cronjobs.Run, body []byte) error {
	if _, err := t.st.cronRunPut.Exec(r.ID, r.Job, nanos(r.StartedAt), body); err != nil {
		return err
	}
	return trimRuns(t, r.Job)
}

// trimRuns keeps job's KeepRuns newest runs.
func trimRuns(t *tx, job string) error {
	_, err := t.st.cronRunTrim.Exec(job, cronjobs.KeepRuns)
	return err
}

// trimEvery is how many runs a fire's start writes for a job between
// two trims of its runs.
const trimEvery = 10

// trimNewRun trims job's runs, a new one of which a fire's start just
// wrote, every trimEvery-th such run: a trim reads the job's runs in
// the index, and a fire's start is the write that adds them. The count
// starts at a random place in the cycle when the store is opened, so
// that a process's first slot, in which every job fires its first run
// since, does not trim them all, and so that a job restarted often is
// still trimmed. A job keeps fewer than KeepRuns+trimEvery runs once
// trimmed in this process, and fewer than KeepRuns+2*trimEvery before
// (a trim undone with its transaction, or with its batch's first run,
// aside: the writer's run again finds the count moved on); Runs lists the
// KeepRuns newest.
func (d *DB) trimNewRun(t *tx, job string) error {
	n, ok := d.newRuns[job]
	if !ok {
		n = rand.IntN(trimEvery)
	}
	d.newRuns[job] = (n + 1) % trimEvery
	if n != 0 {
		return nil
	}
	return trimRuns(t, job)
}

func (s cronStore) Run(ctx context.Context, id string) (cronjobs.Run, error) {
	const op = "sqlite.cron.Run"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return cronjobs.Run{}, err
	}
	r, err := scanRun(d.reads.cronRunGet.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return cronjobs.Run{}, errs.E(op, errs.NotFound, "no run %q", id)
	}
	if err != nil {
		return cronjobs.Run{}, d.fail(op, err)
	}
	return r, nil
}

func (s cronStore) Runs(ctx context.Context, job string, n int) ([]cronjobs.Run, error) {
	const op = "sqlite.cron.Runs"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return nil, err
	}
	// A job may hold a few more than KeepRuns between trims
	// (trimNewRun); no more than those are listed.
	if n <= 0 || n > cronjobs.KeepRuns {
		n = cronjobs.KeepRuns
	}
	out, err := scanRows(scanRun)(d.rdb.QueryContext(ctx, sqlCronRuns, job, n))
	if err != nil {
		return nil, d.fail(op, err)
	}
	return out, nil
}

// scanJob reads a job's version and encoding.
func scanJob(s scanner) (cronjobs.Job, error) {
	var j cronjobs.Job
	var version int64
	var body []byte
	if err := s.Scan(&version, &body); err != nil {
		return j, err
	}
	if err := json.Unmarshal(body, &j); err != nil {
		return j, err
	}
	j.Version = version
	return j, nil
}

// scanRun reads a run's encoding.
func scanRun(s scanner) (cronjobs.Run, error) {
	var r cronjobs.Run
	var body []byte
	if err := s.Scan(&body); err != nil {
		return r, err
	}
	return r, json.Unmarshal(body, &r)
}

// scanRows makes a reader of the rows of a query, given with the query's
// error as a transaction's query and the read pool's return them, each
// row read by scan.
func scanRows[T any](scan func(scanner) (T, error)) func(*sql.Rows, error) ([]T, error) {
	return func(rows *sql.Rows, err error) ([]T, error) {
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []T
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, rows.Err()
	}
}

// rowsOf is how many rows a statement changed, given with its error.
func rowsOf(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}
