package cronjobs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// A second "run now" before the first run started asks for nothing more:
// it says one is requested, and the job runs once. Once that run went, a
// new request is taken.
func TestRunNowTwiceSaysOneIsRequested(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.create(cronjobs.Spec{Name: "n", Schedule: "@daily", Prompt: "p"})
		if _, err := h.mgr.RunNow(ctx, j.ID); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		_, err := h.mgr.RunNow(ctx, j.ID)
		if !errs.Is(err, errs.Conflict) || !strings.Contains(errs.Reason(err), "requested already") {
			t.Fatalf("the second RunNow = %v, want Conflict saying a run is requested already", err)
		}
		h.start("a", h.targets)
		h.clk.Advance(time.Second)
		if r := h.next(); !r.Manual {
			t.Fatalf("run = %+v, want the requested one", r)
		}
		h.quiet()
		if _, err := h.mgr.RunNow(ctx, j.ID); err != nil {
			t.Fatalf("RunNow once the requested run went: %v", err)
		}
		// Seen within a poll or two: the last fire's end wakes the
		// loop, which may set its timer after the first step.
		h.clk.Advance(time.Second)
		h.idle()
		h.clk.Advance(time.Second)
		if r := h.next(); !r.Manual {
			t.Fatalf("run = %+v, want the second requested one", r)
		}
		if runs, _ := h.db.Cron().Runs(ctx, j.ID, 100); len(runs) != 2 {
			t.Errorf("%d runs, want 2: one a request", len(runs))
		}
	})
}

// A job's runs are read by its id or a short prefix of it, newest
// first; an id no job has is not found.
func TestRunsOfAJob(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.create(cronjobs.Spec{Name: "n", Schedule: "@daily", Prompt: "p"})
		if runs, err := h.mgr.Runs(ctx, j.ID); err != nil || len(runs) != 0 {
			t.Fatalf("Runs before any = %v, %v; want none", runs, err)
		}
		if _, err := h.mgr.RunNow(ctx, j.ID); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		h.start("a", h.targets)
		h.clk.Advance(time.Second)
		ran := h.next()
		h.quiet()
		runs, err := h.mgr.Runs(ctx, strings.TrimPrefix(j.ID, "job_")[:6])
		if err != nil || len(runs) != 1 || runs[0].ID != ran.ID {
			t.Errorf("Runs by a short id = %+v, %v; want the run %s", runs, err, ran.ID)
		}
		if _, err := h.mgr.Runs(ctx, "job_000000000000"); !errs.Is(err, errs.NotFound) {
			t.Errorf("Runs of no job = %v, want not found", err)
		}
	})
}

// A job's output directory is made with the job, so that its first fire
// makes none; removing the job, fired or not, removes it.
func TestAJobsOutputDirectoryIsMadeWithIt(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.mgr.Outputs = cronjobs.Outputs{Dir: filepath.Join(h.home, "cron", "output")}
		j := h.create(cronjobs.Spec{Name: "digest", Schedule: "@daily", Prompt: "p"})
		dir := filepath.Join(h.mgr.Outputs.Dir, j.ID)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			t.Fatalf("the new job's output directory: %v", err)
		}
		if _, err := h.mgr.Remove(ctx, j.ID); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the removed job's output directory: %v, want it gone", err)
		}
	})
}

// A removed job's outputs go with it; another job's stay.
func TestRemoveTakesTheJobsOutputs(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.mgr.Outputs = cronjobs.Outputs{Dir: filepath.Join(h.home, "cron", "output")}
		gone := h.create(cronjobs.Spec{Name: "gone", Schedule: "@daily", Prompt: "p"})
		kept := h.create(cronjobs.Spec{Name: "kept", Schedule: "@daily", Prompt: "p"})
		for _, j := range []cronjobs.Job{gone, kept} {
			if _, err := h.mgr.RunNow(ctx, j.ID); err != nil {
				t.Fatalf("RunNow: %v", err)
			}
		}
		h.start("a", h.targets)
		h.clk.Advance(time.Second)
		for range 2 {
			if r := h.next(); r.Output == "" {
				t.Fatalf("run %+v saved no output", r)
			}
		}
		h.quiet()
		if _, err := h.mgr.Remove(ctx, gone.ID); err != nil {
			t.Fatalf("Remove: %v", err)
		}
		if _, err := os.Stat(filepath.Join(h.mgr.Outputs.Dir, gone.ID)); !os.IsNotExist(err) {
			t.Errorf("the removed job's outputs: %v, want them gone", err)
		}
		if _, err := os.Stat(filepath.Join(h.mgr.Outputs.Dir, kept.ID)); err != nil {
			t.Errorf("the other job's outputs: %v", err)
		}
	})
}

// A run's output is read where it was saved; a run that is not the
// job's, or an output outside this instance's Outputs.Dir, is not
// found.
func TestOutputOfARun(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.mgr.Outputs = cronjobs.Outputs{Dir: filepath.Join(h.home, "cron", "output")}
		j := h.create(cronjobs.Spec{Name: "out", Schedule: "@daily", Prompt: "p"})
		if _, err := h.mgr.RunNow(ctx, j.ID); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		h.start("a", h.targets)
		h.clk.Advance(time.Second)
		ran := h.next()
		h.quiet()
		out, err := h.mgr.Output(ctx, j.ID, ran.ID)
		if err != nil || !strings.Contains(out, "- run: "+ran.ID) {
			t.Errorf("Output = %q, %v; want the saved output of %s", out, err, ran.ID)
		}
		if _, err := h.mgr.Output(ctx, j.ID, "run_none"); !errs.Is(err, errs.NotFound) {
			t.Errorf("Output of no run = %v, want not found", err)
		}
		elsewhere := h.mgr
		elsewhere.Outputs = cronjobs.Outputs{Dir: t.TempDir()}
		if _, err := elsewhere.Output(ctx, j.ID, ran.ID); !errs.Is(err, errs.NotFound) {
			t.Errorf("Output kept outside Outputs.Dir = %v, want not found", err)
		}
	})
}

// Through the scheduler on the fake clock, in New York: a daily 02:30,
// which March 8's spring-forward skips, fires once that day, at 03:30
// EDT; a daily 01:30, which November 1's fall-back repeats, fires once
// that day, at its first occurrence (EDT), not again an hour later.
func TestSchedulerFiresOnceOverDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc     string
		start    time.Time
		schedule string
		fires    []time.Time // in order, each the next after the one before
		quietTil time.Time   // no other fire until then
	}{
		{
			desc: "02:30 over spring-forward", start: time.Date(2026, 3, 8, 0, 0, 0, 0, ny), schedule: "30 2 * * *",
			fires: []time.Time{
				time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC), // 03:30 EDT
				time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), // 02:30 EDT
			},
		},
		{
			desc: "01:30 over fall-back", start: time.Date(2026, 11, 1, 0, 0, 0, 0, ny), schedule: "30 1 * * *",
			fires: []time.Time{
				time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), // 01:30 EDT
				time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC), // 01:30 EST, the next day
			},
		},
	} {
		for name, open := range backends {
			t.Run(tc.desc+"/"+name, func(t *testing.T) {
				clk := clock.NewFake(tc.start)
				h := newHarness(t, open(t, clk), clk)
				h.mgr.Timezone = "America/New_York"
				j := h.create(cronjobs.Spec{Name: "dst", Schedule: tc.schedule, Prompt: "p"})
				h.start("a", h.targets)
				for i, at := range tc.fires {
					h.clk.Advance(at.Add(-time.Second).Sub(h.clk.Now()))
					h.quiet()
					h.clk.Advance(time.Second)
					r := h.next()
					if !r.ScheduledAt.Equal(at) || !r.StartedAt.Equal(at) {
						t.Errorf("fire %d scheduled %s, started %s; want both at %s", i+1, r.ScheduledAt.UTC(), r.StartedAt.UTC(), at)
					}
					h.quiet()
				}
				if runs, _ := h.db.Cron().Runs(context.Background(), j.ID, 100); len(runs) != len(tc.fires) {
					t.Errorf("%d runs, want %d", len(runs), len(tc.fires))
				}
			})
		}
	}
}
