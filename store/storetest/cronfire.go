package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/sessions"
)

// runCronFires runs the conformance cases of cronjobs.FireStore: a
// fire's start and end, each one call over the cron store and the
// once-only claims.
func runCronFires(t *testing.T, b Backend) {
	t.Run("a start claims, moves the job and writes the run", func(t *testing.T) { runFireStart(t, b) })
	t.Run("a start over a job that moved on writes only the claim", func(t *testing.T) { runFireStartMoved(t, b) })
	t.Run("a start returns an earlier attempt's run", func(t *testing.T) { runFireStartPrior(t, b) })
	t.Run("a start of a done fire only moves the job", func(t *testing.T) { runFireStartDone(t, b) })
	t.Run("an end writes the run, the job and the done mark", func(t *testing.T) { runFireEnd(t, b) })
	t.Run("an end is all or nothing", func(t *testing.T) { runFireEndRefused(t, b) })
	t.Run("an end that moves the job or the run's start writes them whole", func(t *testing.T) { runFireEndMoved(t, b) })
	t.Run("invalid arguments", func(t *testing.T) { runFireInvalid(t, b) })
}

const fireID = "cron:job_1:1767225600"

// fireStart is the start of fire on job j, moved on to next (zero: not
// moved), its run starting at the fake clock's now.
func (f *fixture) fireStart(j cronjobs.Job, owner string, next time.Time) cronjobs.FireStart {
	in := cronjobs.FireStart{
		Fire: fireID, Owner: owner, TTL: ttl, Start: true,
		Run: cronjobs.Run{
			ID: "run_f1", Job: j.ID, Fire: fireID, ScheduledAt: j.NextRunAt, Owner: owner,
			StartedAt: f.clk.Now(), Status: cronjobs.StatusRunning,
		},
	}
	if !next.IsZero() {
		j.NextRunAt = next
		j.Repeat.Completed++
		in.Job = &j
	}
	return in
}

func (f *fixture) startFire(in cronjobs.FireStart, want lease.OnceState) cronjobs.FireStarted {
	f.t.Helper()
	res, err := f.cron().StartFire(f.ctx, in)
	if err != nil {
		f.t.Fatalf("StartFire(%s, %s): %v", in.Fire, in.Owner, err)
	}
	if res.State != want {
		f.t.Fatalf("StartFire(%s, %s) = %s (%+v), want %s", in.Fire, in.Owner, res.State, res.Claim, want)
	}
	return res
}

// wantNoRun checks that the fire's run was not written.
func (f *fixture) wantNoRun(id string) {
	f.t.Helper()
	_, err := f.cron().Run(f.ctx, id)
	wantCode(f.t, "Run of a run not written", err, errs.NotFound)
}

func runFireStart(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	in := f.fireStart(j, "gw-a", t0.Add(time.Hour))
	res := f.startFire(in, lease.OnceClaimed)
	if c := res.Claim; c.Name != fireID || c.Owner != "gw-a" || c.Token <= 0 || !c.Expires.Equal(t0.Add(ttl)) {
		t.Errorf("claim = %+v, want %s by gw-a with a token, expiring at %v", c, fireID, t0.Add(ttl))
	}
	if !res.Moved || !res.Started || res.HasPrior {
		t.Errorf("StartFire = moved %v, started %v, prior %v; want moved and started, no prior", res.Moved, res.Started, res.HasPrior)
	}
	want := *in.Job
	want.Version = 2
	if diff := cmp.Diff(want, res.Job, timeOpts); diff != "" {
		t.Errorf("StartFire's job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, f.job("job_1"), timeOpts); diff != "" {
		t.Errorf("job after StartFire (-want +got):\n%s", diff)
	}
	f.wantNextDue(t0.Add(time.Hour))
	got, err := f.cron().Run(f.ctx, "run_f1")
	if err != nil {
		t.Fatalf("Run after StartFire: %v", err)
	}
	if diff := cmp.Diff(in.Run, got, timeOpts); diff != "" {
		t.Errorf("run after StartFire (-want +got):\n%s", diff)
	}

	// The claim is the once-only claims' own: another finds it held,
	// by either way in, and writes nothing.
	held := f.claimOnce(fireID, "gw-b", lease.OnceHeld)
	if held.Owner != "gw-a" || held.Token != res.Claim.Token {
		t.Errorf("ClaimOnce by another = %+v, want gw-a's claim %d", held, res.Claim.Token)
	}
	again := f.startFire(f.fireStart(j, "gw-b", t0.Add(2*time.Hour)), lease.OnceHeld)
	if again.Claim.Owner != "gw-a" || again.Moved || again.Started {
		t.Errorf("StartFire by another = %+v, want gw-a's claim and nothing written", again)
	}
	if got := f.job("job_1"); got.Version != 2 || !got.NextRunAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("job after another's StartFire: version %d next %v, want 2 and %v", got.Version, got.NextRunAt, t0.Add(time.Hour))
	}
	if renewed, err := f.once().RenewOnce(f.ctx, []lease.Claim{res.Claim}, ttl); err != nil || len(renewed) != 1 {
		t.Errorf("RenewOnce of StartFire's claim = %v, %v; want it renewed", renewed, err)
	}
}

func runFireStartMoved(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	moved := j
	moved.Prompt = "say goodbye"
	if _, err := f.cron().UpdateJob(f.ctx, moved); err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	res := f.startFire(f.fireStart(j, "gw-a", t0.Add(time.Hour)), lease.OnceClaimed)
	if res.Moved || res.Started {
		t.Errorf("StartFire over a job that moved on = moved %v, started %v; want neither", res.Moved, res.Started)
	}
	if got := f.job("job_1"); got.Version != 2 || got.Prompt != "say goodbye" || !got.NextRunAt.Equal(t0) {
		t.Errorf("job after StartFire = version %d %q next %v, want the other writer's", got.Version, got.Prompt, got.NextRunAt)
	}
	f.wantNoRun("run_f1")
	f.claimOnce(fireID, "gw-b", lease.OnceHeld)

	// A job removed since it was read: the same.
	f.clk.Advance(ttl + time.Second)
	if err := f.cron().RemoveJob(f.ctx, "job_1"); err != nil {
		t.Fatalf("RemoveJob: %v", err)
	}
	res = f.startFire(f.fireStart(j, "gw-a", t0.Add(time.Hour)), lease.OnceClaimed)
	if res.Moved || res.Started {
		t.Errorf("StartFire over a removed job = moved %v, started %v; want neither", res.Moved, res.Started)
	}
	_, err := f.cron().Job(f.ctx, "job_1")
	wantCode(t, "Job after StartFire over a removed job", err, errs.NotFound)
	f.wantNoRun("run_f1")
}

func runFireStartPrior(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	first := f.startFire(f.fireStart(j, "gw-a", t0.Add(time.Hour)), lease.OnceClaimed)
	prior := f.fireStart(j, "gw-a", time.Time{}).Run
	prior.EndedAt, prior.Status = t0.Add(time.Second), cronjobs.StatusOK
	f.putRun(prior)

	// gw-a died before marking the fire done: its claim runs out, and
	// the job, moved on already, is given unchanged.
	f.clk.Advance(ttl + time.Second)
	res := f.startFire(f.fireStart(first.Job, "gw-b", time.Time{}), lease.OnceClaimed)
	if res.Claim.Token <= first.Claim.Token {
		t.Errorf("the takeover's token %d, want above %d", res.Claim.Token, first.Claim.Token)
	}
	if !res.HasPrior || res.Started || res.Moved {
		t.Fatalf("StartFire after a dead claimer = prior %v, started %v, moved %v; want the prior run only", res.HasPrior, res.Started, res.Moved)
	}
	if diff := cmp.Diff(prior, res.Prior, timeOpts); diff != "" {
		t.Errorf("StartFire's prior run (-want +got):\n%s", diff)
	}
	got, err := f.cron().Run(f.ctx, "run_f1")
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(prior, got, timeOpts); diff != "" {
		t.Errorf("run after a StartFire that found it (-want +got):\n%s", diff)
	}
}

func runFireStartDone(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	f.doneOnce(f.claimOnce(fireID, "gw-a", lease.OnceClaimed))
	res := f.startFire(f.fireStart(j, "gw-b", t0.Add(time.Hour)), lease.OnceDone)
	if !res.Moved || res.Started || res.HasPrior {
		t.Errorf("StartFire of a done fire = moved %v, started %v, prior %v; want only moved", res.Moved, res.Started, res.HasPrior)
	}
	if got := f.job("job_1"); got.Version != 2 || !got.NextRunAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("job after StartFire of a done fire: version %d next %v, want 2 and %v", got.Version, got.NextRunAt, t0.Add(time.Hour))
	}
	f.wantNoRun("run_f1")
}

// endOf is the end of the fire res started: its run ended OK, and the
// job with it as its last run.
func (f *fixture) endOf(in cronjobs.FireStart, res cronjobs.FireStarted) cronjobs.FireEnd {
	r := in.Run
	r.EndedAt, r.Status, r.Delivery = f.clk.Now(), cronjobs.StatusOK, cronjobs.DeliveryLocal
	j := res.Job
	j.LastRunAt, j.LastStatus = r.StartedAt, r.Status
	return cronjobs.FireEnd{Claim: res.Claim, Run: r, Job: &j}
}

func runFireEnd(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	in := f.fireStart(j, "gw-a", t0.Add(time.Hour))
	res := f.startFire(in, lease.OnceClaimed)
	f.clk.Advance(time.Second)
	end := f.endOf(in, res)
	got, err := f.cron().EndFire(f.ctx, end)
	if err != nil {
		t.Fatalf("EndFire: %v", err)
	}
	want := *end.Job
	want.Version = 3
	if diff := cmp.Diff(want, got, timeOpts); diff != "" {
		t.Errorf("EndFire's job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, f.job("job_1"), timeOpts); diff != "" {
		t.Errorf("job after EndFire (-want +got):\n%s", diff)
	}
	r, err := f.cron().Run(f.ctx, "run_f1")
	if err != nil {
		t.Fatalf("Run after EndFire: %v", err)
	}
	if diff := cmp.Diff(end.Run, r, timeOpts); diff != "" {
		t.Errorf("run after EndFire (-want +got):\n%s", diff)
	}
	if ids := f.runIDs("job_1", 0); !cmp.Equal(ids, []string{"run_f1"}) {
		t.Errorf("Runs after EndFire = %v, want [run_f1]", ids)
	}
	// Done: nobody claims it again, and it is not stale when its claim
	// would have run out.
	f.claimOnce(fireID, "gw-b", lease.OnceDone)
	f.startFire(f.fireStart(want, "gw-b", time.Time{}), lease.OnceDone)
	f.clk.Advance(ttl + time.Second)
	if ids := f.staleOnce("cron:", 10); len(ids) != 0 {
		t.Errorf("StaleOnce after EndFire = %v, want none", ids)
	}

	// An end that leaves the job as it is writes the run and the mark.
	j2 := f.createJob(newJob("job_2", t0))
	in2 := f.fireStart(j2, "gw-a", time.Time{})
	in2.Fire, in2.Run.ID, in2.Run.Fire = "cron:job_2:1", "run_f2", "cron:job_2:1"
	res2 := f.startFire(in2, lease.OnceClaimed)
	end2 := f.endOf(in2, res2)
	end2.Job = nil
	if _, err := f.cron().EndFire(f.ctx, end2); err != nil {
		t.Fatalf("EndFire without a job: %v", err)
	}
	if got := f.job("job_2"); got.Version != 1 {
		t.Errorf("job after EndFire without a job: version %d, want 1", got.Version)
	}
	if r, err := f.cron().Run(f.ctx, "run_f2"); err != nil || !r.Ended() {
		t.Errorf("run after EndFire without a job = %+v, %v; want it ended", r, err)
	}
	f.claimOnce("cron:job_2:1", "gw-b", lease.OnceDone)
}

func runFireEndMoved(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	f.createJob(newJob("job_2", t0.Add(90*time.Minute)))
	in := f.fireStart(j, "gw-a", t0.Add(time.Hour))
	res := f.startFire(in, lease.OnceClaimed)
	f.clk.Advance(time.Minute)
	// The end moves the job past job_2, and its run started later than
	// the start wrote (as a run started again does).
	end := f.endOf(in, res)
	end.Job.NextRunAt = t0.Add(2 * time.Hour)
	end.Run.StartedAt = t0.Add(30 * time.Second)
	if _, err := f.cron().EndFire(f.ctx, end); err != nil {
		t.Fatalf("EndFire: %v", err)
	}
	if got := f.job("job_1"); got.Version != 3 || !got.NextRunAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("job after EndFire: version %d next %v, want 3 and %v", got.Version, got.NextRunAt, t0.Add(2*time.Hour))
	}
	if ids := f.dueIDs(t0.Add(time.Hour), 10); len(ids) != 0 {
		t.Errorf("DueJobs at the job's due time before the end = %v, want none", ids)
	}
	if ids := f.dueIDs(t0.Add(2*time.Hour), 10); !cmp.Equal(ids, []string{"job_2", "job_1"}) {
		t.Errorf("DueJobs at the end's due time = %v, want [job_2 job_1]", ids)
	}
	f.wantNextDue(t0.Add(90 * time.Minute))
	rs, err := f.cron().Runs(f.ctx, "job_1", 0)
	if err != nil || len(rs) != 1 {
		t.Fatalf("Runs after EndFire = %v, %v; want the one run", rs, err)
	}
	if diff := cmp.Diff(end.Run, rs[0], timeOpts); diff != "" {
		t.Errorf("run after EndFire (-want +got):\n%s", diff)
	}
}

func runFireEndRefused(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	in := f.fireStart(j, "gw-a", t0.Add(time.Hour))
	res := f.startFire(in, lease.OnceClaimed)
	end := f.endOf(in, res)

	// wantUnwritten checks that a refused end left the job at version
	// 2 and the run as it started.
	wantUnwritten := func(what string) {
		t.Helper()
		if got := f.job("job_1"); got.Version != 2 || !got.LastRunAt.IsZero() {
			t.Errorf("job after %s: version %d, last run %v; want 2 and none", what, got.Version, got.LastRunAt)
		}
		if r, err := f.cron().Run(f.ctx, "run_f1"); err != nil || r.Ended() {
			t.Errorf("run after %s = %+v, %v; want it as it started", what, r, err)
		}
	}

	// The job moved on: Conflict, and the fire is still held, not done.
	stale := end
	staleJob := *end.Job
	staleJob.Version = 1
	stale.Job = &staleJob
	_, err := f.cron().EndFire(f.ctx, stale)
	wantCode(t, "EndFire over a job that moved on", err, errs.Conflict)
	wantUnwritten("an end over a job that moved on")
	f.claimOnce(fireID, "gw-b", lease.OnceHeld)

	// The claim ran out and another took it: LeaseLost.
	f.clk.Advance(ttl + time.Second)
	rival := f.claimOnce(fireID, "gw-b", lease.OnceClaimed)
	_, err = f.cron().EndFire(f.ctx, end)
	wantCode(t, "EndFire under a lost claim", err, errs.LeaseLost)
	wantUnwritten("an end under a lost claim")
	if renewed, err := f.once().RenewOnce(f.ctx, []lease.Claim{rival}, ttl); err != nil || len(renewed) != 1 {
		t.Errorf("RenewOnce of the rival's claim = %v, %v; want it still held, not done", renewed, err)
	}

	// The job was removed: NotFound, and the rival's fire not done.
	end.Claim = rival
	if err := f.cron().RemoveJob(f.ctx, "job_1"); err != nil {
		t.Fatalf("RemoveJob: %v", err)
	}
	_, err = f.cron().EndFire(f.ctx, end)
	wantCode(t, "EndFire of a removed job", err, errs.NotFound)
	f.claimOnce(fireID, "gw-c", lease.OnceHeld)
	f.wantNoRun("run_f1")

	// No such fire: NotFound.
	end.Job, end.Claim = nil, lease.Claim{Name: "cron:job_1:9", Owner: "gw-a", Token: 1}
	_, err = f.cron().EndFire(f.ctx, end)
	wantCode(t, "EndFire of an unknown fire", err, errs.NotFound)
	f.wantNoRun("run_f1")
}

func runFireInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	j := f.createJob(newJob("job_1", t0))
	other := newJob("job_2", t0)
	for _, tc := range []struct {
		desc string
		edit func(*cronjobs.FireStart)
	}{
		{"no fire id", func(in *cronjobs.FireStart) { in.Fire = "" }},
		{"no owner", func(in *cronjobs.FireStart) { in.Owner = "" }},
		{"no ttl", func(in *cronjobs.FireStart) { in.TTL = 0 }},
		{"a run without an id", func(in *cronjobs.FireStart) { in.Run.ID = "" }},
		{"a run without a job", func(in *cronjobs.FireStart) { in.Run.Job = "" }},
		{"another job than the run's", func(in *cronjobs.FireStart) { in.Job = &other }},
	} {
		in := f.fireStart(j, "gw-a", t0.Add(time.Hour))
		tc.edit(&in)
		_, err := f.cron().StartFire(f.ctx, in)
		wantCode(t, "StartFire with "+tc.desc, err, errs.Invalid)
	}
	f.claimOnce(fireID, "gw-b", lease.OnceClaimed)
	if got := f.job("job_1"); got.Version != 1 {
		t.Errorf("job after refused starts: version %d, want 1", got.Version)
	}
	_, err := f.cron().EndFire(f.ctx, cronjobs.FireEnd{Run: cronjobs.Run{Job: "job_1"}})
	wantCode(t, "EndFire of a run without an id", err, errs.Invalid)
	_, err = f.cron().EndFire(f.ctx, cronjobs.FireEnd{Run: cronjobs.Run{ID: "run_f1", Job: "job_1"}, Job: &other})
	wantCode(t, "EndFire with another job than the run's", err, errs.Invalid)
}
