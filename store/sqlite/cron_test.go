package sqlite

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/sessions"
)

// A fire's start trims its job's runs every trimEvery-th new run, not
// at every start: the job holds fewer than KeepRuns+trimEvery runs, and
// Runs lists the KeepRuns newest.
func TestFireStartsTrimRunsNowAndThen(t *testing.T) {
	d, clk, path := testDB(t)
	ctx := context.Background()
	cron := d.Cron()
	j, err := cron.CreateJob(ctx, cronjobs.Job{
		ID: "job_1", Name: "report", Prompt: "say hello",
		Schedule: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 1m", Every: time.Minute},
		Enabled:  true, State: cronjobs.StateScheduled, NextRunAt: t0, CreatedAt: t0,
	})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(db *DB) int {
		var n int
		if err := db.rdb.QueryRow(`SELECT count(*) FROM cron_runs WHERE job = 'job_1'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fire := func(db *DB, i int) {
		t.Helper()
		at := t0.Add(time.Duration(i) * time.Minute)
		next := j
		next.NextRunAt = at.Add(time.Minute)
		id := fmt.Sprintf("cron:job_1:%d", at.Unix())
		run := cronjobs.Run{ID: fmt.Sprintf("run_%03d", i), Job: "job_1", Fire: id, ScheduledAt: at,
			StartedAt: at, Status: cronjobs.StatusRunning}
		res, err := db.Cron().StartFire(ctx, cronjobs.FireStart{Fire: id, Owner: "gw", TTL: time.Minute,
			Job: &next, Run: run, Start: true})
		if err != nil || !res.Started {
			t.Fatalf("StartFire %d = %+v, %v; want started", i, res, err)
		}
		j = res.Job
		run.EndedAt, run.Status = at.Add(time.Second), cronjobs.StatusOK
		if j, err = db.Cron().EndFire(ctx, cronjobs.FireEnd{Claim: res.Claim, Run: run, Job: &j}); err != nil {
			t.Fatalf("EndFire %d: %v", i, err)
		}
		clk.Advance(time.Minute)
	}
	total := cronjobs.KeepRuns + 3*trimEvery + 3
	most := 0 // the most runs the job held after a fire
	for i := range total {
		fire(d, i)
		n := stored(d)
		if n >= cronjobs.KeepRuns+trimEvery {
			t.Fatalf("after %d fires the job holds %d runs, want fewer than %d", i+1, n, cronjobs.KeepRuns+trimEvery)
		}
		most = max(most, n)
	}
	// Where the cycle starts is random, so the last fire may be a trim's:
	// what shows trims are not at every start is a count past KeepRuns.
	if most <= cronjobs.KeepRuns {
		t.Errorf("over %d fires the job never held more than %d runs: trimmed at every start", total, most)
	}
	rs, err := cron.Runs(ctx, "job_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != cronjobs.KeepRuns || rs[0].ID != fmt.Sprintf("run_%03d", total-1) ||
		rs[len(rs)-1].ID != fmt.Sprintf("run_%03d", total-cronjobs.KeepRuns) {
		t.Fatalf("Runs = %d runs, want the %d newest", len(rs), cronjobs.KeepRuns)
	}
	if !rs[0].Ended() {
		t.Errorf("newest run %+v, want it ended", rs[0])
	}

	// Opened again, one of the next trimEvery new runs trims.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := openAt(t, path, clk, d.lim)
	trimmed := false
	for i := range trimEvery {
		fire(d2, total+i)
		trimmed = trimmed || stored(d2) == cronjobs.KeepRuns
	}
	if !trimmed {
		t.Errorf("%d fires since the store opened left the job's runs untrimmed (%d)", trimEvery, stored(d2))
	}
}

// A version 28 file's due jobs are listed as before from the index on
// (due_at, id) that replaces the one on due_at.
func TestVersion28FileListsItsDueJobsInOrder(t *testing.T) {
	ctx := context.Background()
	job := func(id string) string {
		return fmt.Sprintf(`INSERT INTO cron_jobs (id, version, due_at, job) VALUES ('%s', 1, %d,
			'{"id":"%s","name":"report","prompt":"hi","enabled":true}')`, id, nanos(t0), id)
	}
	path := oldFile(t, 28, job("job_c"), job("job_a"), job("job_b"),
		`INSERT INTO cron_jobs (id, version, due_at, job) VALUES ('job_0', 1, NULL, '{"id":"job_0","name":"off","prompt":"hi"}')`)
	d := openAt(t, path, nil, sessions.Limits{})
	var cols []string
	rows, err := d.rdb.Query(`SELECT name FROM pragma_index_info('cron_jobs_due')`)
	if err == nil {
		cols, err = scanRows(scanString)(rows, nil)
	}
	if err != nil || !slices.Equal(cols, []string{"due_at", "id"}) {
		t.Fatalf("cron_jobs_due columns = %v, %v; want [due_at id]", cols, err)
	}
	due, err := d.Cron().DueJobs(ctx, t0, 2)
	if err != nil || len(due) != 2 || due[0].ID != "job_a" || due[1].ID != "job_b" {
		t.Fatalf("DueJobs = %+v, %v; want job_a and job_b", due, err)
	}
}
