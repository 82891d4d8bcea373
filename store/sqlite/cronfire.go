package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// fireJob is a fire's job as a fire's transaction writes it: nil when it
// is left as it stands.
type fireJob struct {
	job  cronjobs.Job
	due  sql.NullInt64
	body []byte
}

// encodeFireJob encodes j, when given, at its next version.
func encodeFireJob(op string, j *cronjobs.Job) (*fireJob, error) {
	if j == nil {
		return nil, nil
	}
	body, due, err := encodeJob(op, *j, j.Version+1)
	if err != nil {
		return nil, err
	}
	return &fireJob{job: *j, due: due, body: body}, nil
}

// write writes the job over its stored version.
func (f *fireJob) write(t *tx, op string) error {
	return updateJob(t, op, f.job, f.job.Version+1, f.due, f.body)
}

// writeBody writes the job as write does, leaving the index of due
// times unwritten when the stored due time is the job's: a fire's end
// records its run in the job, which its start already moved on.
func (f *fireJob) writeBody(t *tx, op string) error {
	n, err := rowsOf(t.st.cronUpdateBody.Exec(f.job.ID, f.job.Version, f.job.Version+1, f.due, f.body))
	if err != nil || n == 1 {
		return err
	}
	return f.write(t, op)
}

func (s cronStore) StartFire(ctx context.Context, in cronjobs.FireStart) (cronjobs.FireStarted, error) {
	const op = "sqlite.cron.StartFire"
	d := s.d
	var out cronjobs.FireStarted
	if err := d.check(ctx, op); err != nil {
		return out, err
	}
	if err := lease.CheckClaimOnce(op, in.Fire, in.Owner, in.TTL); err != nil {
		return out, err
	}
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return out, err
	}
	fj, err := encodeFireJob(op, in.Job)
	if err != nil {
		return out, err
	}
	var run []byte
	if in.Start {
		if run, err = json.Marshal(in.Run); err != nil {
			return out, errs.Wrap(op, errs.Invalid, err)
		}
	}
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		out = cronjobs.FireStarted{}
		c, st, err := d.claimFire(t, in.Fire, in.Owner, in.TTL)
		if err != nil {
			return err
		}
		out.Claim, out.State = c, st
		if st == lease.OnceHeld {
			return nil
		}
		if fj != nil {
			switch err := fj.write(t, op); {
			case errs.Is(err, errs.Conflict), errs.Is(err, errs.NotFound):
				// The claim stands; the caller decides again from the job
				// as it is now.
				return nil
			case err != nil:
				return err
			}
			out.Job, out.Moved = fj.job, true
			out.Job.Version++
		}
		if st == lease.OnceDone {
			return nil
		}
		if in.Start {
			// Written when there is no record of an earlier attempt,
			// which is read only when there is one.
			n, err := rowsOf(t.st.cronRunStart.Exec(in.Run.ID, in.Run.Job, nanos(in.Run.StartedAt), run))
			if err != nil {
				return err
			}
			if n == 1 {
				out.Started = true
				return d.trimNewRun(t, in.Run.Job)
			}
		}
		prior, err := scanRun(t.st.cronRunGet.QueryRow(in.Run.ID))
		switch {
		case err == nil:
			out.Prior, out.HasPrior = prior, true
			return nil
		case errors.Is(err, sql.ErrNoRows):
			return nil
		}
		return err
	})
	if err != nil {
		return cronjobs.FireStarted{}, d.fail(op, err)
	}
	return out, nil
}

func (s cronStore) EndFire(ctx context.Context, in cronjobs.FireEnd) (cronjobs.Job, error) {
	const op = "sqlite.cron.EndFire"
	d := s.d
	if err := d.check(ctx, op); err != nil {
		return cronjobs.Job{}, err
	}
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return cronjobs.Job{}, err
	}
	fj, err := encodeFireJob(op, in.Job)
	if err != nil {
		return cronjobs.Job{}, err
	}
	body, err := json.Marshal(in.Run)
	if err != nil {
		return cronjobs.Job{}, errs.Wrap(op, errs.Invalid, err)
	}
	// All or nothing: an error undoes the transaction's writes.
	err = d.w.do(ctx, op, durable, func(t *tx) error {
		if err := d.doneFire(t, op, in.Claim); err != nil {
			return err
		}
		if fj != nil {
			if err := fj.writeBody(t, op); err != nil {
				return err
			}
		}
		// The run as its start wrote it is rewritten in place; one
		// written otherwise (or not at all) is put whole.
		n, err := rowsOf(t.st.cronRunEnd.Exec(in.Run.ID, in.Run.Job, nanos(in.Run.StartedAt), body))
		if err != nil || n == 1 {
			return err
		}
		return putRun(t, in.Run, body)
	})
	if err != nil {
		return cronjobs.Job{}, d.fail(op, err)
	}
	if in.Job == nil {
		return cronjobs.Job{}, nil
	}
	j := *in.Job
	j.Version++
	return j, nil
}
