package kanban

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
)

// ExitRateLimited is the exit code a worker uses to say it was rate
// limited: its card is requeued without a failure counted.
const ExitRateLimited = 75

// Lane works cards: a dispatcher starts one worker per claimed card.
type Lane interface {
	// Start starts a worker on spec's card and returns it at once.
	Start(ctx context.Context, spec WorkerSpec) (Worker, error)
}

// WorkerSpec is what a worker is started with.
type WorkerSpec struct {
	Card      Card
	Board     string
	Token     int64  // the claim's; the worker's reports name it
	Run       string // the run's id
	Workspace string // the card's workspace directory
	Review    bool   // a reviewer's run
	// Attachments are the absolute paths of the card's attachments,
	// oldest first.
	Attachments []string
	// Env is the worker's environment beside HERALD_KANBAN_*: the API
	// address and the card's token, when the dispatcher has them.
	Env []string
	// Log is where its output is kept ("" none).
	Log string
}

// Worker is one running worker.
type Worker interface {
	// Done is closed when the worker has ended; Exit then says how.
	Done() <-chan struct{}
	Exit() Exit
	// Stop ends the worker and everything it started, and returns once
	// it is gone (or ctx ends).
	Stop(ctx context.Context) error
	// PID and ProcStart name its process (0, "" for one in process).
	PID() int
	ProcStart() string
}

// Exit is how a worker ended.
type Exit struct {
	Code int // the process's exit code; -1 when it was killed or failed to run
	// Err is why it failed, in words: the tail of its stderr, or what
	// went wrong.
	Err string
	// Output is the end of what it printed, for a lane whose silent exit
	// 0 completes (exit_zero_completes).
	Output string
	// RetryAfter is how long a rate-limited worker (exit 75) said its
	// limit lasts; 0 when it did not say.
	RetryAfter time.Duration
	// Violation says how an in-process worker broke the completion
	// contract (a NoReportError), for its run's error.
	Violation string
}

// RateLimitedError is what an in-process worker returns when its model
// provider rate limited it: its card is requeued as after an exit 75,
// held back After (0: the default delay).
type RateLimitedError struct {
	After  time.Duration
	Reason string
}

func (e *RateLimitedError) Error() string { return "rate limited: " + e.Reason }

// NoReportError is what an in-process worker returns when its work
// ended without a complete or block call: the run fails as a protocol
// violation, as a command's exit 0 without one does.
type NoReportError struct {
	Detail    string // what the worker did instead
	LastReply string // its last words, of which the end is said
}

func (e *NoReportError) Error() string {
	s := "protocol violation: " + e.Detail
	if last := tail(e.LastReply, 300); last != "" {
		s += "; its last reply: " + last
	}
	return s
}

// maxRetryAfter bounds how long a reported rate limit holds a lane.
const maxRetryAfter = 24 * time.Hour

// retryAfterLine is how a CLI worker says when its rate limit ends,
// on a line of its output before it exits 75: "retry-after: 90" or
// "retry-after: 15m" (from now), or "reset-at:" an RFC 3339 time or a
// Unix time in seconds.
var retryAfterLine = regexp.MustCompile(`(?im)^\s*(retry-after|reset-at)\s*[:=]\s*(\S+)\s*$`)

// ParseRetryAfter reads the last retry-after or reset-at line of out
// (see retryAfterLine), measured from now; 0 when there is none or it
// is not in the future. It is bounded by a day.
func ParseRetryAfter(out string, now time.Time) time.Duration {
	ms := retryAfterLine.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		return 0
	}
	m := ms[len(ms)-1]
	var d time.Duration
	switch v := m[2]; strings.ToLower(m[1]) {
	case "retry-after":
		if n, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(n) {
			// Bounded before it is a Duration, which a huge count overflows.
			d = time.Duration(min(max(n, 0), maxRetryAfter.Seconds()) * float64(time.Second))
		} else if pd, err := time.ParseDuration(v); err == nil {
			d = pd
		}
	default:
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			d = t.Sub(now)
		} else if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			d = time.Unix(n, 0).Sub(now)
		}
	}
	return min(max(d, 0), maxRetryAfter)
}

// CommandLane runs a command per card, any CLI agent or script, with the
// card in its environment (HERALD_KANBAN_*), its output kept in the
// card's log, in a process group of its own.
type CommandLane struct {
	Command string
	Args    []string
	Env     []string // NAME=value, the lane's own
	// Inherit builds the rest of the worker's environment from herald's
	// (the base set and tools.env_passthrough); nil gives the base set.
	Inherit *proc.Env
	Workdir string // "": the card's workspace
	Clock   clock.Clock
}

// Start implements Lane.
func (l CommandLane) Start(ctx context.Context, spec WorkerSpec) (Worker, error) {
	if l.Command == "" {
		return nil, errors.New("the lane has no command")
	}
	cmd := exec.Command(l.Command, l.Args...)
	if strings.EqualFold(filepath.Ext(l.Command), ".sh") {
		cmd = exec.Command("bash", append([]string{l.Command}, l.Args...)...)
	}
	cmd.Dir = l.Workdir
	if cmd.Dir == "" {
		cmd.Dir = spec.Workspace
	}
	cmd.Env = l.Inherit.Build(slices.Concat(l.Env, WorkerEnv(spec), spec.Env)...)
	proc.OwnGroup(cmd)
	clk := l.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	w := &commandWorker{done: make(chan struct{}), clk: clk}
	w.out.max, w.errTail.max = 4<<10, 4<<10
	var sinks []io.Writer
	if spec.Log != "" {
		if err := os.MkdirAll(filepath.Dir(spec.Log), 0o755); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		w.log = f
		sinks = append(sinks, f)
	}
	cmd.Stdout = io.MultiWriter(append([]io.Writer{&w.out}, sinks...)...)
	cmd.Stderr = io.MultiWriter(append([]io.Writer{&w.errTail}, sinks...)...)
	if err := cmd.Start(); err != nil {
		if w.log != nil {
			w.log.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", l.Command, err)
	}
	w.cmd = cmd
	w.pid = cmd.Process.Pid
	w.start = proc.StartTime(w.pid)
	go w.wait()
	return w, nil
}

// WorkerEnv is the environment that tells a worker its card;
// HERALD_KANBAN_ATTACHMENTS holds its attachments' paths, one a line.
func WorkerEnv(spec WorkerSpec) []string {
	return []string{
		"HERALD_KANBAN_TASK=" + spec.Card.ID,
		"HERALD_KANBAN_BOARD=" + spec.Board,
		"HERALD_KANBAN_WORKSPACE=" + spec.Workspace,
		"HERALD_KANBAN_RUN_ID=" + spec.Run,
		"HERALD_KANBAN_CLAIM=" + strconv.FormatInt(spec.Token, 10),
		"HERALD_KANBAN_ATTACHMENTS=" + strings.Join(spec.Attachments, "\n"),
	}
}

type commandWorker struct {
	clk   clock.Clock
	cmd   *exec.Cmd
	pid   int
	start string
	log   *os.File

	out, errTail tailBuffer

	mu   sync.Mutex
	exit Exit
	done chan struct{}
}

func (w *commandWorker) wait() {
	err := w.cmd.Wait()
	// What the worker left running ends with it.
	_ = proc.KillGroup(w.pid, syscall.SIGKILL)
	e := Exit{Code: w.cmd.ProcessState.ExitCode(), Output: strings.TrimSpace(w.out.String())}
	if e.Code == ExitRateLimited {
		e.RetryAfter = ParseRetryAfter(e.Output+"\n"+w.errTail.String(), w.clk.Now())
	}
	if err != nil {
		e.Err = strings.TrimSpace(w.errTail.String())
		if e.Err == "" {
			e.Err = err.Error()
		}
	}
	if w.log != nil {
		w.log.Close()
	}
	w.mu.Lock()
	w.exit = e
	w.mu.Unlock()
	close(w.done)
}

func (w *commandWorker) Done() <-chan struct{} { return w.done }

func (w *commandWorker) Exit() Exit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exit
}

// stopGrace is how long a stopped worker has after SIGTERM before the
// group is killed.
const stopGrace = 5 * time.Second

func (w *commandWorker) Stop(ctx context.Context) error {
	_ = proc.KillGroup(w.pid, syscall.SIGTERM)
	t := w.clk.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-w.done:
		return nil
	case <-t.C():
	case <-ctx.Done():
	}
	_ = proc.KillGroup(w.pid, syscall.SIGKILL)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *commandWorker) PID() int          { return w.pid }
func (w *commandWorker) ProcStart() string { return w.start }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ToValidUTF8(t.buf.String(), "")
}

// StopOrphan ends a worker process this host started in an earlier life
// of its gateway (a claim's Host, PID and ProcStart): its group is
// killed, and StopOrphan returns once the process is gone or ctx ends.
// A process that is not the one the claim names (gone, or its PID
// reused) is left alone.
func StopOrphan(ctx context.Context, pid int, start string, poll func(context.Context) error) error {
	if !proc.Alive(pid, start) {
		return nil
	}
	_ = proc.KillGroup(pid, syscall.SIGKILL)
	for proc.Alive(pid, start) {
		if err := poll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// FuncLane runs each worker in process: Run works the card and reports
// with the service (complete, block) under spec's claim; an error it
// returns ends the run as a crash with that error. The gateway's herald
// lane is one, over its worker agent.
type FuncLane struct {
	Run func(ctx context.Context, spec WorkerSpec) error
}

// Start implements Lane.
func (l FuncLane) Start(_ context.Context, spec WorkerSpec) (Worker, error) {
	if l.Run == nil {
		return nil, errors.New("the lane has nothing to run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &funcWorker{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		defer cancel()
		err := l.Run(ctx, spec)
		var (
			limited  *RateLimitedError
			noReport *NoReportError
		)
		switch {
		case err == nil:
		case errors.As(err, &noReport):
			// It ended as a silent exit 0 ends, the reason its own.
			w.exit = Exit{Code: 0, Violation: err.Error()}
		case errors.As(err, &limited):
			w.exit = Exit{Code: ExitRateLimited, Err: err.Error(), RetryAfter: min(max(limited.After, 0), maxRetryAfter)}
		case ctx.Err() != nil:
			w.exit = Exit{Code: -1, Err: err.Error()}
		default:
			w.exit = Exit{Code: 1, Err: err.Error()}
		}
	}()
	return w, nil
}

type funcWorker struct {
	done   chan struct{}
	cancel context.CancelFunc
	exit   Exit // written before done is closed
}

func (w *funcWorker) Done() <-chan struct{} { return w.done }
func (w *funcWorker) Exit() Exit            { <-w.done; return w.exit }
func (w *funcWorker) PID() int              { return 0 }
func (w *funcWorker) ProcStart() string     { return "" }

func (w *funcWorker) Stop(ctx context.Context) error {
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
