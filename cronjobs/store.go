package cronjobs

import (
	"context"
	"time"
)

// KeepRuns is how many runs a store keeps per job, newest first; the
// same number of outputs are kept on disk.
const KeepRuns = 50

// Store keeps jobs and their runs. Every method may return errs.Closed
// after Close and errs.Unavailable when the backend cannot be reached.
// Jobs are kept whole (their encoded form) beside the two fields a
// store indexes: Version and DueAt.
type Store interface {
	// CreateJob writes a new job with Version 1. Errors: Invalid (no
	// id, no name), Conflict (the id exists).
	CreateJob(ctx context.Context, j Job) (Job, error)

	// Job returns the job id. Errors: NotFound.
	Job(ctx context.Context, id string) (Job, error)

	// Jobs returns every job, ordered by id.
	Jobs(ctx context.Context) ([]Job, error)

	// UpdateJob replaces the job j.ID when its stored Version is still
	// j.Version, and returns it with the next Version. Every change to
	// a job goes this way, so two writers (two instances, the CLI and a
	// gateway) never undo each other's change: the later one is told.
	// Errors: Conflict (the stored version moved on: read it again),
	// NotFound.
	UpdateJob(ctx context.Context, j Job) (Job, error)

	// RemoveJob removes the job id and forgets its runs. Errors:
	// NotFound.
	RemoveJob(ctx context.Context, id string) error

	// DueJobs returns up to limit jobs whose DueAt is at or before now,
	// earliest first.
	DueJobs(ctx context.Context, now time.Time, limit int) ([]Job, error)

	// NextDue returns the earliest DueAt of all jobs, and false when no
	// job is due ever.
	NextDue(ctx context.Context) (time.Time, bool, error)

	// PutRun writes r (new or updated, by ID) and keeps only the
	// KeepRuns newest runs of its job. Errors: Invalid (no id or job).
	PutRun(ctx context.Context, r Run) error

	// Run returns the run id. Errors: NotFound.
	Run(ctx context.Context, id string) (Run, error)

	// Runs returns up to limit runs of job, newest first.
	Runs(ctx context.Context, job string, limit int) ([]Run, error)
}
