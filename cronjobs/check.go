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
