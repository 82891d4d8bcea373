package cronjobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Outputs keeps every run's output under Dir ($HERALD_HOME/cron/output),
// one file per run in a directory per job: <job>/<timestamp>.md, the
// KeepRuns newest of each job kept. The oldest are pruned every
// pruneEvery scheduled runs of a job and on each requested run, so that
// a save is not also a listing of the job's directory: a job has at
// most KeepRuns+pruneEvery-1 outputs between prunes.
type Outputs struct {
	Dir string
}

// pruneEvery is how many of a job's scheduled runs go between two
// prunes of its outputs.
const pruneEvery = 10

// Save writes a run's output and, now and then, prunes the job's oldest.
// It returns the file's path.
func (o Outputs) Save(j Job, r Run, body string) (string, error) {
	dir := filepath.Join(o.Dir, j.ID)
	// The scheduled time names the file, so a fire run again after a
	// crash overwrites its own output rather than adding a second.
	name := r.ScheduledAt.UTC().Format("2006-01-02T15-04-05Z") + ".md"
	if r.Manual {
		name = r.ScheduledAt.UTC().Format("2006-01-02T15-04-05.000Z") + "-run.md"
	}
	path := filepath.Join(dir, name)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", j.Name)
	fmt.Fprintf(&b, "- job: %s\n- run: %s\n- scheduled: %s\n- started: %s\n- status: %s\n",
		j.ID, r.ID, r.ScheduledAt.UTC().Format(time.RFC3339), r.StartedAt.UTC().Format(time.RFC3339), r.Status)
	if r.Error != "" {
		fmt.Fprintf(&b, "- error: %s\n", r.Error)
	}
	b.WriteString("\n")
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, []byte(b.String()), 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// The job's directory is made with the job (Prepare); one made
		// elsewhere is made at its first output, not looked for on
		// every save.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		err = os.WriteFile(tmp, []byte(b.String()), 0o600)
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	if r.Manual || j.Repeat.Completed%pruneEvery == 0 {
		o.prune(dir)
	}
	return path, nil
}

// prune removes all but the KeepRuns newest outputs in dir; the names
// sort by time.
func (o Outputs) prune(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for len(names) > KeepRuns {
		_ = os.Remove(filepath.Join(dir, names[0]))
		names = names[1:]
	}
}

// Prepare makes the directory of job's outputs, as the job is made, so
// that its first fire does not: a directory made is a write to the
// file system's metadata, the dearest part of a save when thousands of
// jobs first fire at once. Save still makes a directory it finds
// missing (a job made by an older herald, or on another instance).
func (o Outputs) Prepare(job string) error {
	if o.Dir == "" {
		return nil
	}
	return os.MkdirAll(filepath.Join(o.Dir, job), 0o700)
}

// Remove removes a job's outputs.
func (o Outputs) Remove(job string) error { return os.RemoveAll(filepath.Join(o.Dir, job)) }
