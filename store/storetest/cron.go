package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runCron runs the conformance cases of cronjobs.Store.
func runCron(t *testing.T, b Backend) {
	t.Run("create and read", func(t *testing.T) { runCronCreate(t, b) })
	t.Run("invalid jobs and runs", func(t *testing.T) { runCronInvalid(t, b) })
	t.Run("update is a compare-and-set", func(t *testing.T) { runCronUpdate(t, b) })
	t.Run("due jobs", func(t *testing.T) { runCronDue(t, b) })
	t.Run("remove", func(t *testing.T) { runCronRemove(t, b) })
	t.Run("runs", func(t *testing.T) { runCronRuns(t, b) })
	t.Run("a job in a turn's commit", func(t *testing.T) { runCronCommit(t, b) })
	t.Run("durability", func(t *testing.T) { runCronDurability(t, b) })
}

func (f *fixture) cron() cronjobs.Store { return f.st.Cron() }

// newJob is an enabled interval job due at next (zero: never).
func newJob(id string, next time.Time) cronjobs.Job {
	return cronjobs.Job{
		ID: id, Name: "report " + id, Prompt: "say hello",
		Schedule: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 1h", Every: time.Hour},
		Enabled:  true, State: cronjobs.StateScheduled, NextRunAt: next,
		Deliver: "telegram:100", CreatedAt: t0, Toolsets: []string{"web"},
		Origin: &cronjobs.Origin{Conv: "telegram:100", Platform: "telegram", Chat: "100", User: "u-1"},
	}
}

func (f *fixture) createJob(j cronjobs.Job) cronjobs.Job {
	f.t.Helper()
	got, err := f.cron().CreateJob(f.ctx, j)
	if err != nil {
		f.t.Fatalf("CreateJob(%s): %v", j.ID, err)
	}
	if got.Version != 1 {
		f.t.Errorf("CreateJob(%s).Version = %d, want 1", j.ID, got.Version)
	}
	return got
}

func (f *fixture) job(id string) cronjobs.Job {
	f.t.Helper()
	j, err := f.cron().Job(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Job(%s): %v", id, err)
	}
	return j
}

func (f *fixture) jobIDs(jobs []cronjobs.Job, err error) []string {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("reading jobs: %v", err)
	}
	ids := []string{}
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

func (f *fixture) dueIDs(at time.Time, n int) []string {
	f.t.Helper()
	return f.jobIDs(f.cron().DueJobs(f.ctx, at, n))
}

func (f *fixture) wantNextDue(want time.Time) {
	f.t.Helper()
	at, ok, err := f.cron().NextDue(f.ctx)
	if err != nil {
		f.t.Fatalf("NextDue: %v", err)
	}
	if ok != !want.IsZero() || !at.Equal(want) {
		f.t.Errorf("NextDue = %v, %v; want %v", at, ok, want)
	}
}

func runCronCreate(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_b", t0.Add(time.Hour)))
	f.createJob(newJob("job_a", t0.Add(2*time.Hour)))
	if diff := cmp.Diff(j, f.job("job_b"), timeOpts); diff != "" {
		t.Errorf("Job(job_b) differs from what was created (-want +got):\n%s", diff)
	}
	if got := f.jobIDs(f.cron().Jobs(f.ctx)); !cmp.Equal(got, []string{"job_a", "job_b"}) {
		t.Errorf("Jobs = %v, want ordered by id", got)
	}
	_, err := f.cron().CreateJob(f.ctx, newJob("job_b", t0))
	wantCode(t, "CreateJob of an existing id", err, errs.Conflict)
	if got := f.job("job_b"); !got.NextRunAt.Equal(j.NextRunAt) {
		t.Errorf("a refused create changed the job: next %v, want %v", got.NextRunAt, j.NextRunAt)
	}
	_, err = f.cron().Job(f.ctx, "job_none")
	wantCode(t, "Job of an unknown id", err, errs.NotFound)
}

func runCronInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	noName := newJob("job_1", t0)
	noName.Name = ""
	for _, tc := range []struct {
		desc string
		j    cronjobs.Job
	}{
		{"no id", newJob("", t0)},
		{"no name", noName},
	} {
		_, err := f.cron().CreateJob(f.ctx, tc.j)
		wantCode(t, "CreateJob with "+tc.desc, err, errs.Invalid)
	}
	if got := f.jobIDs(f.cron().Jobs(f.ctx)); len(got) != 0 {
		t.Errorf("Jobs after refused creates = %v, want none", got)
	}
	for _, r := range []cronjobs.Run{{Job: "job_1"}, {ID: "run_1"}} {
		wantCode(t, fmt.Sprintf("PutRun(%+v)", r), f.cron().PutRun(f.ctx, r), errs.Invalid)
	}
	// A turn's commit with an invalid job is refused whole; the turn
	// still holds its lease and commits without it.
	f.append(user("c", "remind me"))
	turn := f.mustClaim("w1")
	err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Writes: []sessions.Write{cronjobs.Create{Job: noName}}, Release: true})
	wantCode(t, "Finish with a job without a name", err, errs.Invalid)
	f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
	if got := f.jobIDs(f.cron().Jobs(f.ctx)); len(got) != 0 {
		t.Errorf("Jobs after a refused commit = %v, want none", got)
	}
}

func runCronUpdate(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0.Add(time.Hour)))

	j.NextRunAt = t0.Add(3 * time.Hour)
	j.LastStatus = cronjobs.StatusOK
	up, err := f.cron().UpdateJob(f.ctx, j)
	if err != nil {
		t.Fatalf("UpdateJob at version 1: %v", err)
	}
	if up.Version != 2 {
		t.Errorf("UpdateJob.Version = %d, want 2", up.Version)
	}
	if diff := cmp.Diff(up, f.job("job_1"), timeOpts); diff != "" {
		t.Errorf("Job after the update (-want +got):\n%s", diff)
	}

	// A writer that read version 1 is told, and changes nothing.
	stale := j
	stale.NextRunAt = t0
	_, err = f.cron().UpdateJob(f.ctx, stale)
	wantCode(t, "UpdateJob from a stale version", err, errs.Conflict)
	if got := f.job("job_1"); got.Version != 2 || !got.NextRunAt.Equal(up.NextRunAt) {
		t.Errorf("Job after a stale update: version %d next %v, want 2 and %v", got.Version, got.NextRunAt, up.NextRunAt)
	}
	f.wantNextDue(up.NextRunAt)

	_, err = f.cron().UpdateJob(f.ctx, newJob("job_none", t0))
	wantCode(t, "UpdateJob of an unknown id", err, errs.NotFound)
	if got := f.jobIDs(f.cron().Jobs(f.ctx)); !cmp.Equal(got, []string{"job_1"}) {
		t.Errorf("Jobs after updating an unknown id = %v, want [job_1]", got)
	}
}

func runCronDue(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.wantNextDue(time.Time{})
	f.createJob(newJob("job_late", t0.Add(3*time.Minute)))
	f.createJob(newJob("job_soon", t0.Add(time.Minute)))
	f.createJob(newJob("job_mid", t0.Add(2*time.Minute)))
	f.createJob(newJob("job_never", time.Time{}))
	paused := newJob("job_paused", t0)
	paused.Enabled, paused.State = false, cronjobs.StatePaused
	paused = f.createJob(paused)

	f.wantNextDue(t0.Add(time.Minute))
	if got := f.dueIDs(t0, 0); len(got) != 0 {
		t.Errorf("DueJobs(t0) = %v, want none (a paused job is not due)", got)
	}
	if got := f.dueIDs(t0.Add(2*time.Minute), 0); !cmp.Equal(got, []string{"job_soon", "job_mid"}) {
		t.Errorf("DueJobs(+2m) = %v, want earliest first", got)
	}
	if got := f.dueIDs(t0.Add(time.Hour), 2); !cmp.Equal(got, []string{"job_soon", "job_mid"}) {
		t.Errorf("DueJobs(+1h, 2) = %v, want the two earliest", got)
	}

	// A run asked for on a paused job makes it due at that time.
	paused.RunRequestedAt = t0.Add(30 * time.Second)
	if _, err := f.cron().UpdateJob(f.ctx, paused); err != nil {
		t.Fatalf("UpdateJob(run now): %v", err)
	}
	f.wantNextDue(t0.Add(30 * time.Second))
	if got := f.dueIDs(t0.Add(time.Minute), 0); !cmp.Equal(got, []string{"job_paused", "job_soon"}) {
		t.Errorf("DueJobs(+1m) after a run request = %v, want [job_paused job_soon]", got)
	}
}

func runCronRemove(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.createJob(newJob("job_1", t0))
	f.createJob(newJob("job_2", t0.Add(time.Minute)))
	for i := range 3 {
		f.putRun(cronjobs.Run{ID: fmt.Sprintf("run_1_%d", i), Job: "job_1", StartedAt: t0.Add(time.Duration(i) * time.Second), Status: cronjobs.StatusOK})
	}
	if err := f.cron().RemoveJob(f.ctx, "job_1"); err != nil {
		t.Fatalf("RemoveJob: %v", err)
	}
	_, err := f.cron().Job(f.ctx, "job_1")
	wantCode(t, "Job after RemoveJob", err, errs.NotFound)
	_, err = f.cron().Run(f.ctx, "run_1_0")
	wantCode(t, "Run of a removed job", err, errs.NotFound)
	if rs := f.runIDs("job_1", 0); len(rs) != 0 {
		t.Errorf("Runs of a removed job = %v, want none", rs)
	}
	if got := f.dueIDs(t0.Add(time.Hour), 0); !cmp.Equal(got, []string{"job_2"}) {
		t.Errorf("DueJobs after RemoveJob = %v, want [job_2]", got)
	}
	f.wantNextDue(t0.Add(time.Minute))
	wantCode(t, "RemoveJob again", f.cron().RemoveJob(f.ctx, "job_1"), errs.NotFound)
}

func (f *fixture) putRun(r cronjobs.Run) {
	f.t.Helper()
	if err := f.cron().PutRun(f.ctx, r); err != nil {
		f.t.Fatalf("PutRun(%s): %v", r.ID, err)
	}
}

func (f *fixture) runIDs(job string, n int) []string {
	f.t.Helper()
	rs, err := f.cron().Runs(f.ctx, job, n)
	if err != nil {
		f.t.Fatalf("Runs(%s): %v", job, err)
	}
	ids := []string{}
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func runCronRuns(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.createJob(newJob("job_1", t0))
	total := cronjobs.KeepRuns + 5
	for i := range total {
		f.putRun(cronjobs.Run{
			ID: fmt.Sprintf("run_%03d", i), Job: "job_1", Fire: fmt.Sprintf("cron:job_1:%d", i),
			ScheduledAt: t0.Add(time.Duration(i) * time.Minute), StartedAt: t0.Add(time.Duration(i) * time.Minute),
			Status: cronjobs.StatusRunning,
		})
	}
	// Updating a run keeps one row of it, with the new fields.
	last := cronjobs.Run{
		ID: fmt.Sprintf("run_%03d", total-1), Job: "job_1", Fire: fmt.Sprintf("cron:job_1:%d", total-1),
		ScheduledAt: t0.Add(time.Duration(total-1) * time.Minute), StartedAt: t0.Add(time.Duration(total-1) * time.Minute),
		EndedAt: t0.Add(time.Duration(total) * time.Minute), Status: cronjobs.StatusOK,
		Delivery: cronjobs.DeliveryDelivered, Targets: []string{"telegram:100"}, Sent: []string{"telegram:100"},
	}
	f.putRun(last)
	got, err := f.cron().Run(f.ctx, last.ID)
	if err != nil {
		t.Fatalf("Run(%s): %v", last.ID, err)
	}
	if diff := cmp.Diff(last, got, timeOpts); diff != "" {
		t.Errorf("Run after its update (-want +got):\n%s", diff)
	}
	ids := f.runIDs("job_1", 0)
	if len(ids) != cronjobs.KeepRuns {
		t.Fatalf("Runs kept = %d, want %d", len(ids), cronjobs.KeepRuns)
	}
	if ids[0] != last.ID || ids[len(ids)-1] != fmt.Sprintf("run_%03d", total-cronjobs.KeepRuns) {
		t.Errorf("Runs = %s … %s, want newest first, from %s to run_%03d", ids[0], ids[len(ids)-1], last.ID, total-cronjobs.KeepRuns)
	}
	_, err = f.cron().Run(f.ctx, "run_000")
	wantCode(t, "Run of a trimmed run", err, errs.NotFound)
	if ids := f.runIDs("job_1", 3); len(ids) != 3 || ids[0] != last.ID {
		t.Errorf("Runs(job_1, 3) = %v, want the 3 newest", ids)
	}
	if ids := f.runIDs("job_other", 0); len(ids) != 0 {
		t.Errorf("Runs of a job with none = %v", ids)
	}
}

func runCronCommit(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.append(user("c", "remind me"))
	stale := f.mustClaim("w1")
	f.clk.Advance(ttl + time.Second)
	rival := f.mustClaim("w2")
	j := newJob("job_1", t0.Add(time.Hour))
	err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{
		EntryID: stale.Entry.ID, Writes: []sessions.Write{cronjobs.Create{Job: j}}, Release: true,
	})
	wantCode(t, "stale Finish with a job", err, errs.LeaseLost)
	if got := f.jobIDs(f.cron().Jobs(f.ctx)); len(got) != 0 {
		t.Errorf("Jobs after a refused commit = %v, want none", got)
	}
	f.wantNextDue(time.Time{})

	f.finish(rival.Lease, sessions.Finish{
		EntryID: rival.Entry.ID, Writes: []sessions.Write{cronjobs.Create{Job: j}}, Release: true,
	})
	got := f.job("job_1")
	want := j
	want.Version = 1
	if diff := cmp.Diff(want, got, timeOpts); diff != "" {
		t.Errorf("job committed with the turn (-want +got):\n%s", diff)
	}
	f.wantNextDue(j.NextRunAt)
	up, err := f.cron().UpdateJob(f.ctx, got)
	if err != nil || up.Version != 2 {
		t.Errorf("UpdateJob of a committed job = version %d, %v; want 2", up.Version, err)
	}
}

func runCronDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		j := f.createJob(newJob("job_1", t0.Add(time.Minute)))
		j.LastStatus = cronjobs.StatusError
		j.LastError = "script exited 1"
		j, err := f.cron().UpdateJob(f.ctx, j)
		if err != nil {
			t.Fatalf("UpdateJob: %v", err)
		}
		r := cronjobs.Run{ID: "run_1", Job: "job_1", StartedAt: t0, Status: cronjobs.StatusError, Error: "script exited 1"}
		f.putRun(r)
		f.reopen(restart)
		if diff := cmp.Diff(j, f.job("job_1"), timeOpts); diff != "" {
			t.Errorf("job after reopening (-want +got):\n%s", diff)
		}
		got, err := f.cron().Run(f.ctx, "run_1")
		if err != nil {
			t.Fatalf("Run after reopening: %v", err)
		}
		if diff := cmp.Diff(r, got, timeOpts); diff != "" {
			t.Errorf("run after reopening (-want +got):\n%s", diff)
		}
		f.wantNextDue(j.NextRunAt)
	})
}
