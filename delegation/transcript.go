package delegation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// Transcripts keeps the live transcripts of the children this instance
// runs, under Dir (<home>/cache/delegation/live): one directory per
// delegation holding manifest.json and task-<n>.log per child, written
// line by line as the child works, secrets redacted.
type Transcripts struct {
	Dir    string
	Redact func(string) string // nil keeps text as it is
	// KeepFor is how long a delegation's directory is kept; 0 means
	// DefaultTranscriptKeep.
	KeepFor time.Duration

	manifests sync.Map // delegation id → struct{}: its manifest is written here
}

// DefaultTranscriptKeep is how long transcripts are kept.
const DefaultTranscriptKeep = 7 * 24 * time.Hour

// toolResultMax bounds a tool result's line in a transcript.
const toolResultMax = 400

// Path is the transcript of a delegation's task at index, "" when
// transcripts are off.
func (t *Transcripts) Path(delegation string, index int) string {
	if t == nil || t.Dir == "" {
		return ""
	}
	return filepath.Join(t.Dir, delegation, fmt.Sprintf("task-%d.log", index))
}

// manifest is what manifest.json says of a delegation.
type manifest struct {
	Delegation string          `json:"delegation_id"`
	Conv       string          `json:"conv"`
	Tasks      []manifestEntry `json:"tasks"`
}

type manifestEntry struct {
	Index   int    `json:"task_index"`
	ChildID string `json:"subagent_id"`
	Goal    string `json:"goal"`
	Log     string `json:"log"`
}

// Open starts the transcript of child c of d: the delegation's manifest
// (once per process) and the child's log, appended to. It returns nil when transcripts are
// off or the file cannot be made (a transcript is worth less than the
// child's run).
func (t *Transcripts) Open(d Delegation, c Child, now time.Time) *Transcript {
	if t == nil || t.Dir == "" {
		return nil
	}
	dir := filepath.Join(t.Dir, d.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil
	}
	if _, done := t.manifests.LoadOrStore(d.ID, struct{}{}); !done {
		t.writeManifest(dir, d)
	}
	f, err := os.OpenFile(t.Path(d.ID, c.Index), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil
	}
	tr := &Transcript{f: f, redact: t.redact}
	tr.line(now, "started %s: %s", c.ID, c.Goal)
	return tr
}

// Dispatched makes the transcripts of d's children as it is dispatched,
// before any instance runs them: the delegation's manifest and, for
// each child, its log with a first line saying it waits to start, so
// the paths delegate_task and list answer are there at once. The
// instance that runs a child appends to its log (Open).
func (t *Transcripts) Dispatched(d Delegation, now time.Time) {
	if t == nil || t.Dir == "" {
		return
	}
	dir := filepath.Join(t.Dir, d.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	if _, done := t.manifests.LoadOrStore(d.ID, struct{}{}); !done {
		t.writeManifest(dir, d)
	}
	for _, c := range d.Children {
		f, err := os.OpenFile(t.Path(d.ID, c.Index), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			continue // made already: a redelivered dispatch, or its run began
		}
		tr := &Transcript{f: f, redact: t.redact}
		tr.line(now, "dispatched %s: %s (waiting for an instance to start it)", c.ID, c.Goal)
		_ = f.Close()
	}
}

// writeManifest writes dir/manifest.json for d, whole: a second
// instance running other children of d writes the same list.
func (t *Transcripts) writeManifest(dir string, d Delegation) {
	m := manifest{Delegation: d.ID, Conv: d.Conv}
	for _, ch := range d.Children {
		m.Tasks = append(m.Tasks, manifestEntry{Index: ch.Index, ChildID: ch.ID, Goal: t.redact(ch.Goal), Log: filepath.Base(t.Path(d.ID, ch.Index))})
	}
	if b, err := json.MarshalIndent(m, "", "  "); err == nil {
		tmp := filepath.Join(dir, "manifest.json.tmp")
		if os.WriteFile(tmp, b, 0o600) == nil {
			_ = os.Rename(tmp, filepath.Join(dir, "manifest.json"))
		}
	}
}

func (t *Transcripts) redact(s string) string {
	if t.Redact == nil {
		return s
	}
	return t.Redact(s)
}

// Prune removes delegations' directories not written to for KeepFor.
func (t *Transcripts) Prune(now time.Time) {
	if t == nil || t.Dir == "" {
		return
	}
	keep := t.KeepFor
	if keep <= 0 {
		keep = DefaultTranscriptKeep
	}
	entries, err := os.ReadDir(t.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "deleg_") {
			continue
		}
		info, err := e.Info()
		if err == nil && now.Sub(info.ModTime()) > keep {
			_ = os.RemoveAll(filepath.Join(t.Dir, e.Name()))
		}
	}
}

// Transcript is one child's log. A nil *Transcript writes nothing.
type Transcript struct {
	mu     sync.Mutex
	f      *os.File
	redact func(string) string
	// owner, for an orchestrator's worker, is its orchestrator's log,
	// which the worker's lines go into, each marked with prefix.
	owner  *Transcript
	prefix string
}

// worker is the log of worker id of the orchestrator tr logs: its lines
// go into tr's log, marked with its id, from its start.
func (tr *Transcript) worker(at time.Time, id, goal string) *Transcript {
	if tr == nil {
		return nil
	}
	w := &Transcript{f: tr.f, redact: tr.redact, owner: tr, prefix: "[worker " + id + "] "}
	w.line(at, "started: %s", goal)
	return w
}

// Message writes what the child added to its history: its text, its
// tool calls, their results (trimmed).
func (tr *Transcript) Message(at time.Time, m chat.Message) {
	if tr == nil {
		return
	}
	switch m.Role {
	case "assistant":
		if strings.TrimSpace(m.Content) != "" {
			tr.line(at, "%s", m.Content)
		}
		for _, c := range m.ToolCalls {
			tr.line(at, "-> %s(%s)", c.Name, excerpt(c.Arguments, toolResultMax))
		}
	case "tool":
		tr.line(at, "<- %s: %s", m.Name, excerpt(m.Content, toolResultMax))
	case "user":
		tr.line(at, "user: %s", excerpt(m.Content, toolResultMax))
	}
}

// End writes the child's final status and closes the log.
func (tr *Transcript) End(at time.Time, r Result) {
	if tr == nil {
		return
	}
	line := "ended " + string(r.Status)
	if r.Error != "" {
		line += ": " + r.Error
	}
	tr.line(at, "%s", line)
	if tr.owner != nil {
		return // the orchestrator's log: it closes it
	}
	tr.mu.Lock()
	_ = tr.f.Close()
	tr.mu.Unlock()
}

func (tr *Transcript) line(at time.Time, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if tr.redact != nil {
		text = tr.redact(text)
	}
	text = strings.ReplaceAll(text, "\n", "\n    ")
	mu := &tr.mu
	if tr.owner != nil {
		mu = &tr.owner.mu
	}
	mu.Lock()
	defer mu.Unlock()
	_, _ = fmt.Fprintf(tr.f, "%s %s%s\n", at.UTC().Format(time.RFC3339), tr.prefix, text)
}

// transcriptMax bounds what Read answers of a log: its end.
const transcriptMax = 256 << 10

// Read returns the log of delegation's task at index as this instance
// keeps it, its last transcriptMax bytes when it is longer (cut then
// true). Errors: NotFound (transcripts are off, or this instance has
// none of that task), Unavailable.
func (t *Transcripts) Read(delegation string, index int) (text string, cut bool, err error) {
	const op = "delegation.Transcripts.Read"
	path := t.Path(delegation, index)
	if path == "" {
		return "", false, errs.E(op, errs.NotFound, "transcripts are not kept")
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, errs.E(op, errs.NotFound, "no transcript of task %d of %s on this instance", index, delegation)
	}
	if err != nil {
		return "", false, errs.Wrap(op, errs.Unavailable, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", false, errs.Wrap(op, errs.Unavailable, err)
	}
	if info.Size() > transcriptMax {
		if _, err := f.Seek(info.Size()-transcriptMax, io.SeekStart); err != nil {
			return "", false, errs.Wrap(op, errs.Unavailable, err)
		}
		cut = true
	}
	b, err := io.ReadAll(io.LimitReader(f, transcriptMax))
	if err != nil {
		return "", false, errs.Wrap(op, errs.Unavailable, err)
	}
	if cut {
		// From the first whole line.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b), cut, nil
}

// workerLines are the lines of an orchestrator's log that worker id
// wrote (Transcript.worker marks them), each with the lines it ran
// on to.
func workerLines(log, id string) string {
	mark := " [worker " + id + "] "
	var b strings.Builder
	keep := false
	for _, line := range strings.SplitAfter(log, "\n") {
		if strings.HasPrefix(line, "    ") {
			if keep {
				b.WriteString(line)
			}
			continue
		}
		_, rest, _ := strings.Cut(line, " ")
		keep = strings.HasPrefix(" "+rest, mark)
		if keep {
			b.WriteString(line)
		}
	}
	return b.String()
}
