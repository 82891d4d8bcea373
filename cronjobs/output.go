package cronjobs

import (
	"errors"
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
//
// The file is made at its name at once (O_EXCL) and written there, not
// written aside and renamed: a rename is a second change to the
// directory, a third of a save's cost when thousands of fires end at
// once. Nothing names the file until the run's end is recorded, after
// Save returns, so a reader going by the run (Manager.Output) never
// finds it half written. A name that is taken is a fire run again (after
// a crash, or by a claim's next holder): an earlier attempt's output,
// whole or cut short, that a run record may name already, so it is
// replaced whole, written aside and renamed over. A crash mid-write
// leaves a short file that no run names, replaced when the fire is run
// again here, else pruned with the job's oldest.
func (o Outputs) Save(j Job, r Run, body string) (string, error) {
	dir := filepath.Join(o.Dir, j.ID)
	// The scheduled time names the file, so a fire run again after a
	// crash overwrites its own output rather than adding a second.
	name := r.ScheduledAt.UTC().Format("2006-01-02T15-04-05Z") + ".md"
	if r.Manual {
		name = r.ScheduledAt.UTC().Format("2006-01-02T15-04-05.000Z") + "-run.md"
	}
	path := filepath.Join(dir, name)
	text := outputText(j, r, body)
	err := writeNew(path, text)
	if errors.Is(err, fs.ErrNotExist) {
		// The job's directory is made with the job (Prepare); one made
		// elsewhere is made at its first output, not looked for on
		// every save.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		err = writeNew(path, text)
	}
	if errors.Is(err, fs.ErrExist) {
		err = replace(path, text)
	}
	if err != nil {
		return "", err
	}
	if r.Manual || j.Repeat.Completed%pruneEvery == 0 {
		o.prune(dir)
	}
	return path, nil
}

// outputText is a run's output file: a header naming the job and the
// run, then body.
func outputText(j Job, r Run, body string) []byte {
	b := make([]byte, 0, 160+len(j.Name)+len(j.ID)+len(r.ID)+len(r.Error)+len(body))
	b = append(b, "# "...)
	b = append(b, j.Name...)
	b = append(b, "\n\n- job: "...)
	b = append(b, j.ID...)
	b = append(b, "\n- run: "...)
	b = append(b, r.ID...)
	b = append(b, "\n- scheduled: "...)
	b = r.ScheduledAt.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, "\n- started: "...)
	b = r.StartedAt.UTC().AppendFormat(b, time.RFC3339)
	b = append(b, "\n- status: "...)
	b = append(b, r.Status...)
	b = append(b, '\n')
	if r.Error != "" {
		b = append(b, "- error: "...)
		b = append(b, r.Error...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	b = append(b, body...)
	if !strings.HasSuffix(body, "\n") {
		b = append(b, '\n')
	}
	return b
}

// writeNew makes the file path, which must not exist, holding text. A
// write that fails removes what it made.
func writeNew(path string, text []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// replace puts text at path whole, over what is there: written aside,
// then renamed over it, so that a reader finds the old file or the new.
func replace(path string, text []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, text, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
