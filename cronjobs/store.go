package cronjobs

import (
	"context"
	"time"

	"github.com/heraldgw/herald/lease"
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

	FireStore
}

// FireStart is what Store.StartFire is asked to do at a fire's start.
type FireStart struct {
	Fire  string        // the fire's identity in the once-only claims
	Owner string        // the claimer: this instance
	TTL   time.Duration // how long the claim holds between renewals
	// Job, when set, is the job moved past the fire, at the Version it
	// was read at: written as UpdateJob writes it when the call claims
	// the fire or finds it done.
	Job *Job
	// Run is the fire's run record as it starts (its ID the fire's run
	// id): when the call claims the fire it returns the record stored
	// under that id, and writes Run when there is none and Start is set.
	Run   Run
	Start bool
}

// FireStarted is what Store.StartFire did.
type FireStarted struct {
	// Claim and State are what lease.OnceStore.ClaimOnce would return.
	Claim lease.Claim
	State lease.OnceState
	// Job is FireStart.Job as written, at its next Version; Moved says it
	// was. A Job not written while the fire was claimed or done (its
	// stored Version moved on, or it was removed) leaves the run
	// unwritten too, for the caller to decide again from the job as it
	// stands.
	Job   Job
	Moved bool
	// Prior is the fire's run record from an earlier attempt, when the
	// call claimed the fire and there was one (HasPrior); then Run was
	// not written.
	Prior    Run
	HasPrior bool
	// Started says FireStart.Run was written.
	Started bool
}

// FireEnd is what Store.EndFire writes at a fire's end.
type FireEnd struct {
	Claim lease.Claim // the fire's claim, marked done
	Run   Run         // the run as it ended
	// Job, when set, is the job with the run recorded (its last run and
	// status), at the Version it was read at.
	Job *Job
}

// FireStore records a cron fire's start and its end in one call each,
// the once-only claim (lease.OnceStore, on the same store) included: a
// fire is then two store calls rather than seven. Both backends
// implement it; the scheduler falls back to the separate calls when the
// one call does not fit the case.
type FireStore interface {
	// StartFire claims s.Fire once-only (as lease.OnceStore.ClaimOnce)
	// and, in the same step, when it claimed the fire or found it done,
	// writes s.Job over its stored version; when it claimed it and the
	// job (if given) was written, it reads the fire's run record and
	// writes s.Run as it starts when there is none and s.Start is set.
	// A job whose version moved on or that was removed is not an error:
	// Moved is false, and nothing but the claim is written. Errors:
	// Invalid (ClaimOnce's, a run without id or job).
	StartFire(ctx context.Context, s FireStart) (FireStarted, error)

	// EndFire records a fire's end in one step: e.Run written (as
	// PutRun), e.Job written over its version (as UpdateJob) when
	// given, and e.Claim's fire marked done (as OnceStore.DoneOnce).
	// All or nothing. Errors: Invalid (a run without id or job),
	// Conflict (the job's version moved on), NotFound (no such job, or
	// no such fire), LeaseLost (e.Claim is not the fire's current
	// claim).
	EndFire(ctx context.Context, e FireEnd) (Job, error)
}
