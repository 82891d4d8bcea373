package cronjobs

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Limits on what a job holds.
const (
	MaxNameChars   = 120
	MaxPromptBytes = 64 << 10
)

// Spec is a job as a person or the agent asks for it: what the CLI's
// flags, the cronjob tool's arguments and /cron add give.
type Spec struct {
	Name     string
	Schedule string
	Prompt   string
	Script   string
	NoAgent  bool
	Deliver  string
	Repeat   int // runs; 0 or less: forever (a one-shot runs once)
	Timezone string
	Model    string
	Toolsets []string
	Workdir  string
	Origin   *Origin
	// CreatedBy says who made it: "cli", "api", or the chat user.
	CreatedBy string
}

// Manager makes and changes jobs for the CLI, the cronjob tool, /cron
// and the HTTP API: each change is checked here, the same way for all,
// and written with Store.UpdateJob so none undoes another's.
type Manager struct {
	Store Store
	// Outputs is where the runs' outputs are kept: a removed job's go
	// with it. A zero Dir keeps none to remove.
	Outputs Outputs
	Targets Targets
	// Timezone is the zone of a schedule without one (cron.timezone).
	Timezone string
	// Toolsets are the tool sets a job may name; none: any is taken, and
	// one the gateway does not have fails the run that needs it.
	Toolsets []string
	// ScriptsDir is the only directory the script of a job the agent
	// makes (the cronjob tool) may come from (cron.scripts_dir); empty
	// gives the agent no scripts. The CLI and the API take any absolute
	// path: they are the operator's.
	ScriptsDir string
	// Changed is told of each change this process made, so its
	// scheduler looks at once; other processes see it within their poll.
	Changed func()
	Clock   clock.Clock
}

func (m Manager) clock() clock.Clock {
	if m.Clock == nil {
		return clock.Real{}
	}
	return m.Clock
}

func (m Manager) now() time.Time { return m.clock().Now() }

func (m Manager) changed() {
	if m.Changed != nil {
		m.Changed()
	}
}

// New checks spec and returns the job it makes, not yet written: the
// cronjob tool has it written with its turn's commit. Errors: Invalid,
// saying what is wrong.
func (m Manager) New(spec Spec) (Job, error) {
	const op = "cronjobs.New"
	now := m.now()
	spec.Prompt = strings.TrimSpace(spec.Prompt)
	spec.Script = strings.TrimSpace(spec.Script)
	switch {
	case spec.Prompt == "" && spec.Script == "":
		return Job{}, errs.E(op, errs.Invalid, "a job needs a prompt (what the agent is asked each run) or a script")
	case spec.NoAgent && spec.Script == "":
		return Job{}, errs.E(op, errs.Invalid, "a no_agent job needs a script: its output is the report")
	case len(spec.Prompt) > MaxPromptBytes:
		return Job{}, errs.E(op, errs.Invalid, "the prompt is %d bytes, over the limit of %d", len(spec.Prompt), MaxPromptBytes)
	}
	if spec.Script != "" {
		if err := checkScript(spec.Script); err != nil {
			return Job{}, errs.Wrap(op, errs.Invalid, err)
		}
	}
	if spec.Workdir != "" {
		if st, err := os.Stat(spec.Workdir); err != nil || !st.IsDir() {
			return Job{}, errs.E(op, errs.Invalid, "workdir %q is not a directory", spec.Workdir)
		}
	}
	for _, ts := range spec.Toolsets {
		if len(m.Toolsets) > 0 && !slices.Contains(m.Toolsets, ts) {
			return Job{}, errs.E(op, errs.Invalid, "unknown toolset %q (this gateway has %s)", ts, strings.Join(m.Toolsets, ", "))
		}
	}
	sched, err := Parse(spec.Schedule, cmp.Or(spec.Timezone, m.Timezone), now)
	if err != nil {
		return Job{}, err
	}
	if _, err := m.Targets.Resolve(spec.Deliver, spec.Origin); err != nil {
		return Job{}, err
	}
	next, _ := sched.Next(time.Time{}, now)
	name := strings.TrimSpace(spec.Name)
	if name == "" {
		name = defaultName(spec)
	}
	if utf8.RuneCountInString(name) > MaxNameChars {
		return Job{}, errs.E(op, errs.Invalid, "the name is over %d characters", MaxNameChars)
	}
	j := Job{
		ID:        NewID(),
		Name:      name,
		Prompt:    spec.Prompt,
		Script:    spec.Script,
		NoAgent:   spec.NoAgent,
		Schedule:  sched,
		Repeat:    Repeat{Times: max(spec.Repeat, 0)},
		Enabled:   true,
		State:     StateScheduled,
		NextRunAt: next,
		Deliver:   strings.TrimSpace(spec.Deliver),
		Origin:    spec.Origin,
		Model:     spec.Model,
		Toolsets:  spec.Toolsets,
		Workdir:   spec.Workdir,
		CreatedBy: spec.CreatedBy,
		CreatedAt: now,
	}
	if sched.Kind == KindOnce {
		j.Repeat.Times = 1
	}
	return j, nil
}

// Create makes the job spec asks for and writes it.
func (m Manager) Create(ctx context.Context, spec Spec) (Job, error) {
	j, err := m.New(spec)
	if err != nil {
		return Job{}, err
	}
	j, err = m.Store.CreateJob(ctx, j)
	if err == nil {
		m.Made(j)
	}
	return j, err
}

// Made is told of each job this process wrote (Create, /cron add, the
// cronjob tool's commit): the job's output directory is made now rather
// than by its first fire, and the scheduler looks at once. A directory
// that cannot be made is left to the first save, which tries again.
func (m Manager) Made(j Job) {
	_ = m.Outputs.Prepare(j.ID)
	m.changed()
}

// Patch is a change to a job; nil fields stay as they are.
type Patch struct {
	Name     *string
	Schedule *string
	Prompt   *string
	Deliver  *string
	Repeat   *int
	Timezone *string
}

// Update applies p to the job id. A new schedule or zone moves its next
// run. Errors: NotFound, Invalid.
func (m Manager) Update(ctx context.Context, id string, p Patch) (Job, error) {
	const op = "cronjobs.Update"
	return m.change(ctx, id, func(j *Job) error {
		if p.Name != nil {
			if strings.TrimSpace(*p.Name) == "" {
				return errs.E(op, errs.Invalid, "the name cannot be empty")
			}
			j.Name = strings.TrimSpace(*p.Name)
		}
		if p.Prompt != nil {
			if strings.TrimSpace(*p.Prompt) == "" && j.Script == "" {
				return errs.E(op, errs.Invalid, "a job without a script needs a prompt")
			}
			j.Prompt = strings.TrimSpace(*p.Prompt)
		}
		if p.Deliver != nil {
			if _, err := m.Targets.Resolve(*p.Deliver, j.Origin); err != nil {
				return err
			}
			j.Deliver = strings.TrimSpace(*p.Deliver)
		}
		if p.Repeat != nil {
			j.Repeat.Times = max(*p.Repeat, 0)
		}
		if p.Schedule != nil || p.Timezone != nil {
			expr, zone := j.Schedule.Expr, j.Schedule.Timezone
			if p.Schedule != nil {
				expr = *p.Schedule
			}
			if p.Timezone != nil {
				zone = *p.Timezone
			}
			sched, err := Parse(expr, cmp.Or(zone, m.Timezone), m.now())
			if err != nil {
				return err
			}
			j.Schedule = sched
			j.NextRunAt, _ = sched.Next(time.Time{}, m.now())
			if j.State != StatePaused {
				j.State, j.Enabled = StateScheduled, true
			}
		}
		return nil
	})
}

// Pause stops the job id firing until Resume. Errors: NotFound.
func (m Manager) Pause(ctx context.Context, id string) (Job, error) {
	return m.change(ctx, id, func(j *Job) error {
		j.Enabled, j.State = false, StatePaused
		return nil
	})
}

// Resume lets the job id fire again, from now: a recurring job's next
// run is its schedule's next after now, so a pause is not made up with
// a burst. Errors: NotFound, Invalid (a one-shot whose time passed).
func (m Manager) Resume(ctx context.Context, id string) (Job, error) {
	const op = "cronjobs.Resume"
	return m.change(ctx, id, func(j *Job) error {
		now := m.now()
		next, ok := j.Schedule.Next(time.Time{}, now)
		if j.Schedule.Kind == KindOnce && (!ok || next.Before(now.Add(-onceSlack))) {
			return errs.E(op, errs.Invalid, "job %s was a one-shot due at %s, which has passed: give it a new schedule with update", j.ID, j.Schedule.At.Format(time.RFC3339))
		}
		j.Enabled, j.State, j.NextRunAt = true, StateScheduled, next
		return nil
	})
}

// onceSlack is how far in the past a one-shot may be and still run.
const onceSlack = 120 * time.Second

// RunNow asks for the job id to fire now, once, besides its schedule,
// through the same claim as a scheduled fire: whichever instance claims
// it runs it. A second request before the first fired asks for nothing
// more: it is refused, saying one is requested. Errors: NotFound,
// Conflict (a run is requested already).
func (m Manager) RunNow(ctx context.Context, id string) (Job, error) {
	const op = "cronjobs.RunNow"
	return m.change(ctx, id, func(j *Job) error {
		if !j.RunRequestedAt.IsZero() {
			return errs.E(op, errs.Conflict, "a run of job %s is requested already (at %s) and has not started yet; it runs once",
				j.ID, j.RunRequestedAt.UTC().Format(time.RFC3339))
		}
		j.RunRequestedAt = m.now()
		return nil
	})
}

// Remove removes the job id, and its runs' outputs with it.
// Errors: NotFound.
func (m Manager) Remove(ctx context.Context, id string) (Job, error) {
	const op = "cronjobs.Remove"
	j, err := Find(ctx, m.Store, id)
	if err != nil {
		return Job{}, err
	}
	if err := m.Store.RemoveJob(ctx, j.ID); err != nil {
		return Job{}, err
	}
	m.changed()
	if m.Outputs.Dir != "" {
		if err := m.Outputs.Remove(j.ID); err != nil {
			return j, errs.E(op, errs.Internal, "job %s is removed, but its outputs are not: %v", j.ID, err)
		}
	}
	return j, nil
}

// change reads the job id and writes what fn makes of it.
func (m Manager) change(ctx context.Context, id string, fn func(*Job) error) (Job, error) {
	j, err := Find(ctx, m.Store, id)
	if err != nil {
		return Job{}, err
	}
	var ferr error
	j, err = Modify(ctx, m.Store, m.clock(), j, func(j *Job) bool {
		ferr = fn(j)
		return ferr == nil
	})
	if ferr != nil {
		return Job{}, ferr
	}
	if err == nil {
		m.changed()
	}
	return j, err
}

// checkScript checks a job's script is a file herald can run.
func checkScript(path string) error {
	if !filepath.IsAbs(path) {
		return errs.E("cronjobs.checkScript", errs.Invalid, "script %q must be an absolute path", path)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return errs.E("cronjobs.checkScript", errs.Invalid, "script %q cannot be read: %v", path, err)
	case st.IsDir():
		return errs.E("cronjobs.checkScript", errs.Invalid, "script %q is a directory", path)
	case !shellScript(path) && st.Mode()&0o111 == 0:
		return errs.E("cronjobs.checkScript", errs.Invalid, "script %q is not executable (chmod +x it, or name it .sh to run it with bash)", path)
	}
	return nil
}

// agentScript is the script the agent named, resolved in m.ScriptsDir:
// a relative name is taken inside it, and a path that lies outside it,
// lexically or once its symlinks are followed, is refused with a message
// that names the directory. "" stays "".
func (m Manager) agentScript(script string) (string, error) {
	const op = "cronjobs.tool"
	script = strings.TrimSpace(script)
	if script == "" {
		return "", nil
	}
	if m.ScriptsDir == "" {
		return "", errs.E(op, errs.Invalid, "this gateway gives the agent no scripts (cron.scripts_dir is not set): make the job with a prompt alone")
	}
	dir := filepath.Clean(m.ScriptsDir)
	p := script
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	switch _, err := resolveIn(dir, p); {
	case errors.Is(err, errOutside):
		return "", errs.E(op, errs.Invalid, "script %q is outside %s, the only directory a job's script may come from (cron.scripts_dir): a person puts the script there, and you give its name", script, dir)
	case err != nil:
		return "", errs.E(op, errs.Invalid, "script %q cannot be read in %s: %v", script, dir, err)
	}
	return p, nil
}

// errOutside is resolveIn's answer for a path outside its directory.
var errOutside = errors.New("outside the directory")

// resolveIn returns the file p names once its symlinks are followed, or
// errOutside when p, or that file, lies outside dir (itself resolved).
func resolveIn(dir, p string) (string, error) {
	if !within(dir, p) {
		return "", errOutside
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		realDir = dir
	}
	if !within(realDir, real) {
		return "", errOutside
	}
	return real, nil
}

// within reports whether path p lies inside directory dir.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// defaultName names a job after its prompt or its script.
func defaultName(spec Spec) string {
	if spec.Prompt != "" {
		name := strings.Join(strings.Fields(spec.Prompt), " ")
		if r := []rune(name); len(r) > 40 {
			name = string(r[:40]) + "…"
		}
		return name
	}
	return filepath.Base(spec.Script)
}

// NewID returns a new job id, job_<12 hex>.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "job_" + hex.EncodeToString(b[:])
}

// Find returns the job id or, given a short prefix of one (at least 4
// characters, with or without job_), the one job it names. Errors:
// NotFound, Invalid (a prefix more than one job has).
func Find(ctx context.Context, s Store, id string) (Job, error) {
	j, err := s.Job(ctx, id)
	if !errs.Is(err, errs.NotFound) {
		return j, err
	}
	prefix := id
	if !strings.HasPrefix(prefix, "job_") {
		prefix = "job_" + prefix
	}
	if len(id) < 4 {
		return Job{}, err
	}
	jobs, lerr := s.Jobs(ctx)
	if lerr != nil {
		return Job{}, lerr
	}
	var found []Job
	for _, j := range jobs {
		if strings.HasPrefix(j.ID, prefix) {
			found = append(found, j)
		}
	}
	switch len(found) {
	case 0:
		return Job{}, errs.E("cronjobs.Find", errs.NotFound, "no cron job %q", id)
	case 1:
		return found[0], nil
	}
	return Job{}, errs.E("cronjobs.Find", errs.Invalid, "%q names %d jobs; give more of the id", id, len(found))
}

// Runs returns the runs kept of job id (or of the one a short prefix
// names), newest first. Errors: NotFound, Invalid (as Find).
func (m Manager) Runs(ctx context.Context, id string) ([]Run, error) {
	j, err := Find(ctx, m.Store, id)
	if err != nil {
		return nil, err
	}
	return m.Store.Runs(ctx, j.ID, KeepRuns)
}

// MaxOutputBytes bounds the part of a run's output Output returns.
const MaxOutputBytes = 1 << 20

// Output returns the output saved of run runID of job id (or of the one
// a short prefix names), its first MaxOutputBytes. The output is a file
// of the instance that ran it (Run.Owner), read here when this instance
// keeps it too (the same Outputs.Dir). Errors: NotFound (no such run,
// or its output is not kept here), Invalid (as Find).
func (m Manager) Output(ctx context.Context, id, runID string) (string, error) {
	const op = "cronjobs.Output"
	runs, err := m.Runs(ctx, id)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(runs, func(r Run) bool { return r.ID == runID })
	if i < 0 {
		return "", errs.E(op, errs.NotFound, "job %s has no run %q among its last %d", id, runID, KeepRuns)
	}
	r := runs[i]
	rel, err := filepath.Rel(m.Outputs.Dir, r.Output)
	if r.Output == "" || m.Outputs.Dir == "" || err != nil || !filepath.IsLocal(rel) {
		return "", errs.E(op, errs.NotFound, "run %s has no output kept on this instance", r.ID)
	}
	f, err := os.Open(r.Output)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errs.E(op, errs.NotFound, "the output of run %s is not on this instance (it ran on %s)", r.ID, r.Owner)
	}
	if err != nil {
		return "", errs.Wrap(op, errs.Internal, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxOutputBytes))
	if err != nil {
		return "", errs.Wrap(op, errs.Internal, err)
	}
	return string(b), nil
}

// List returns every job, ordered by id.
func (m Manager) List(ctx context.Context) ([]Job, error) { return m.Store.Jobs(ctx) }

// Show returns the job id (or the one a short prefix names) and its
// recent runs, newest first. Errors: NotFound.
func (m Manager) Show(ctx context.Context, id string) (Job, []Run, error) {
	j, err := Find(ctx, m.Store, id)
	if err != nil {
		return Job{}, nil, err
	}
	runs, err := m.Store.Runs(ctx, j.ID, 20)
	return j, runs, err
}
