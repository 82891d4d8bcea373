package cronjobs

import "github.com/heraldgw/herald/internal/errs"

// CheckJob refuses, with Invalid, a job no store may write (CreateJob,
// UpdateJob): one without an id or a name.
func CheckJob(op string, j Job) error {
	switch {
	case j.ID == "":
		return errs.E(op, errs.Invalid, "job without an id")
	case j.Name == "":
		return errs.E(op, errs.Invalid, "job %q without a name", j.ID)
	}
	return nil
}

// CheckRun refuses, with Invalid, a run no store may write (PutRun): one
// without an id or a job.
func CheckRun(op string, r Run) error {
	switch {
	case r.ID == "":
		return errs.E(op, errs.Invalid, "run without an id")
	case r.Job == "":
		return errs.E(op, errs.Invalid, "run %q without a job", r.ID)
	}
	return nil
}

// CheckFireRun validates a fire's run and the job written with it for a
// backend's StartFire or EndFire: the run has an id and a job, and j,
// when given, is that job.
func CheckFireRun(op string, r Run, j *Job) error {
	if err := CheckRun(op, r); err != nil {
		return err
	}
	if j != nil && j.ID != r.Job {
		return errs.E(op, errs.Invalid, "run %q of job %q written with job %q", r.ID, r.Job, j.ID)
	}
	return nil
}
