package cronjobs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldgw/herald/cronjobs"
)

// A job's outputs are pruned to the newest KeepRuns every tenth run, not
// on each save: between two prunes a job keeps fewer than KeepRuns+10,
// and the newest are always kept.
func TestOutputsArePrunedEveryTenthRun(t *testing.T) {
	o := cronjobs.Outputs{Dir: t.TempDir()}
	j := cronjobs.Job{ID: "job_1", Name: "digest"}
	count := func() int {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(o.Dir, j.ID))
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	var last string
	for i := 1; i <= cronjobs.KeepRuns+25; i++ {
		j.Repeat.Completed = i
		r := cronjobs.Run{ID: "run", Job: j.ID, ScheduledAt: t0.Add(time.Duration(i) * time.Minute), Status: cronjobs.StatusOK}
		path, err := o.Save(j, r, "report")
		if err != nil {
			t.Fatalf("Save %d: %v", i, err)
		}
		last = path
		n := count()
		switch {
		case i <= cronjobs.KeepRuns && n != i:
			t.Fatalf("after %d saves %d outputs, want all %d", i, n, i)
		case i%10 == 0 && n != min(i, cronjobs.KeepRuns):
			t.Fatalf("after the prune of save %d: %d outputs, want %d", i, n, cronjobs.KeepRuns)
		case n >= cronjobs.KeepRuns+10:
			t.Fatalf("after %d saves %d outputs, want fewer than %d", i, n, cronjobs.KeepRuns+10)
		}
	}
	if _, err := os.Stat(last); err != nil {
		t.Fatalf("the newest output: %v", err)
	}
	oldest := filepath.Join(o.Dir, j.ID, t0.Add(time.Minute).UTC().Format("2006-01-02T15-04-05Z")+".md")
	if _, err := os.Stat(oldest); !os.IsNotExist(err) {
		t.Fatalf("the oldest output %s: %v, want it pruned", oldest, err)
	}

	// A requested run prunes at once.
	r := cronjobs.Run{ID: "run", Job: j.ID, ScheduledAt: t0.Add(time.Hour * 24), Manual: true, Status: cronjobs.StatusOK}
	j.Repeat.Completed++
	if _, err := o.Save(j, r, "report"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != cronjobs.KeepRuns {
		t.Fatalf("after a requested run %d outputs, want %d", n, cronjobs.KeepRuns)
	}
}

// A save finds its file's name taken when its fire is run again: the
// earlier attempt's output, whole or cut short by a crash, is replaced
// whole, and no file is left aside.
func TestAnOutputSavedAgainReplacesTheEarlierAttempts(t *testing.T) {
	o := cronjobs.Outputs{Dir: t.TempDir()}
	j := cronjobs.Job{ID: "job_1", Name: "digest", Repeat: cronjobs.Repeat{Completed: 1}}
	r := cronjobs.Run{ID: "run", Job: j.ID, ScheduledAt: t0, StartedAt: t0, Status: cronjobs.StatusOK}
	path := filepath.Join(o.Dir, j.ID, t0.UTC().Format("2006-01-02T15-04-05Z")+".md")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("# digest\n\n- job: job_1\n- ru"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := o.Save(j, r, "the second attempt's report")
	if err != nil {
		t.Fatal(err)
	}
	if got != path {
		t.Fatalf("Save = %s, want %s", got, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# digest\n\n- job: job_1\n- run: run\n- scheduled: " + t0.UTC().Format(time.RFC3339) +
		"\n- started: " + t0.UTC().Format(time.RFC3339) + "\n- status: ok\n\nthe second attempt's report\n"
	if string(b) != want {
		t.Fatalf("the output:\n%s\nwant\n%s", b, want)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("%d files in the job's directory, want the one output", len(entries))
	}
}
