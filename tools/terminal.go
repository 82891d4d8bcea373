package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
)

const (
	// maxTerminalTimeout bounds the timeout_seconds a call may ask for.
	maxTerminalTimeout = time.Hour
	// maxBackground bounds the background processes one conversation
	// has running at once.
	maxBackground = 16
	// drainWait is how long output is still read after a command's
	// process group was killed: only a process that left the group
	// (setsid) can hold the pipe open longer.
	drainWait = 2 * time.Second
	// endWait bounds how long EndProcesses waits for a killed shell.
	endWait = 5 * time.Second
)

// errTimedOut is the cause of a foreground command's end at its timeout.
var errTimedOut = errors.New("terminal: timed out")

const terminalSchema = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The command, run as bash -c in the workspace root."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "How long the command may run before it is killed."},
    "background": {"type": "boolean", "description": "Start it and return at once with its id (for servers and watchers); read its output with process_output."}
  },
  "required": ["command"],
  "additionalProperties": false
}`

type terminalArgs struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Background     bool   `json:"background"`
}

func (w *WorkspaceTools) terminal() Tool {
	return Tool{
		Name: "terminal",
		Description: fmt.Sprintf("Run a shell command (bash -c) in the workspace root. Returns exit_code, output (stdout and stderr together; "+
			"its last %d characters when longer) and timed_out. The command and every process it started are killed when it ends, "+
			"after timeout_seconds (default %d), or when the turn is stopped. For a server or a watcher give background: true: "+
			"it returns an id at once and runs until its shell exits (a sub-agent's end when the sub-agent does); read its output with process_output. "+
			"A command on the dangerous-command list runs only once the user approved it: the call waits for their answer, and a refusal says why.",
			w.opts.OutputMaxChars, int(w.opts.TerminalTimeout/time.Second)),
		Schema:  []byte(terminalSchema),
		Handler: Func(w.runTerminal),
	}
}

func (w *WorkspaceTools) runTerminal(ctx context.Context, turn *Turn, a terminalArgs) (Result, error) {
	const op = "tools.terminal"
	if strings.TrimSpace(a.Command) == "" {
		return Result{}, errs.E(op, errs.Invalid, "command is empty: give the command to run")
	}
	if err := w.allowed(ctx, turn, a.Command); err != nil {
		return Result{}, err
	}
	dir := w.dir(turn)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Result{}, errs.E(op, errs.Unavailable, "the workspace %s is not a directory; this is the gateway's setup, not your command", dir)
	}
	if a.Background {
		return w.startBackground(op, turn, dir, a.Command)
	}
	timeout := w.opts.TerminalTimeout
	if a.TimeoutSeconds > 0 {
		timeout = min(time.Duration(a.TimeoutSeconds)*time.Second, maxTerminalTimeout)
	}
	return w.runForeground(ctx, op, dir, a.Command, timeout)
}

// allowed asks the gate (SetGate) about every command, naming the
// dangerous-command pattern it matches; without a gate it refuses a
// command the list matches, unless a sub-agent runs it with
// auto-approve.
func (w *WorkspaceTools) allowed(ctx context.Context, turn *Turn, command string) error {
	var matched *regexp.Regexp
	for _, re := range w.dangerous {
		if re.MatchString(command) {
			matched = re
			break
		}
	}
	if gate := w.gate.Load(); gate != nil {
		req := ApprovalRequest{Tool: "terminal", Action: command}
		if matched != nil {
			req.Reason = "matches the dangerous-command pattern " + matched.String()
			req.Pattern = matched.String()
		}
		return (*gate).Ask(ctx, turn, req)
	}
	if matched == nil {
		return nil
	}
	sub := w.opts.Child != nil && w.opts.Child(ctx)
	if sub && w.opts.AutoApprove {
		return nil
	}
	msg := "refused: matches the dangerous-command list (tools.dangerous_commands); a sub-agent may run it only with delegation.subagent_auto_approve: true"
	if sub {
		msg += ". This sub-agent runs without it: reach the goal another way, or say in your summary which command a person should run"
	} else {
		msg += ". Nobody can approve it here, so it cannot run: do it another way, or tell the user the command to run themselves"
	}
	return errs.E("tools.terminal", errs.Invalid, "%s (pattern %s)", msg, matched)
}

// SetGate has every command of the terminal asked of gate (approvals)
// before it runs, in place of the refusal of a dangerous one. A nil
// WorkspaceTools has no terminal.
func (w *WorkspaceTools) SetGate(gate Gate) {
	if w != nil {
		w.gate.Store(&gate)
	}
}

// runForeground runs command to its end, its timeout, or ctx's end.
func (w *WorkspaceTools) runForeground(ctx context.Context, op, dir, command string, timeout time.Duration) (Result, error) {
	// The timer is armed before the command starts, so a command is
	// never given more than its timeout.
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := w.opts.Clock.AfterFunc(timeout, func() { cancel(errTimedOut) })
	defer timer.Stop()
	p, err := startGroup(dir, command, w.opts.Env, w.opts.OutputMaxChars)
	if err != nil {
		return Result{}, errs.E(op, errs.Unavailable, "the command could not be started (%v)", err)
	}
	stop := context.AfterFunc(runCtx, p.kill)
	waitErr := p.cmd.Wait()
	stop()
	// What the command left running ends with it: a foreground command
	// owns its process group.
	p.kill()
	p.drain(w.opts.Clock)
	out := map[string]any{"exit_code": exitCode(p.cmd.ProcessState, waitErr), "timed_out": false}
	var notes []string
	switch {
	case errors.Is(context.Cause(runCtx), errTimedOut):
		out["timed_out"] = true
		notes = append(notes, fmt.Sprintf("timed out after %d s: the command and every process it started were killed; give timeout_seconds for a longer run, or background: true for a server", int(timeout/time.Second)))
	case ctx.Err() != nil:
		notes = append(notes, "stopped: the turn was interrupted, and the command with every process it started was killed")
	}
	text, cut := p.out.text(w.opts.OutputMaxChars)
	out["output"] = text
	if cut != "" {
		notes = append(notes, cut)
	}
	if len(notes) > 0 {
		out["note"] = strings.Join(notes, "; ")
	}
	return JSON(out), nil
}

// group is a command running as the leader of its own process group,
// its stdout and stderr read together into a tail.
type group struct {
	cmd  *exec.Cmd
	out  *tail
	pr   *os.File      // the read end of the output pipe
	read chan struct{} // closed when the output has been read to its end
}

// startGroup starts bash -c command in dir, in a new process group, with
// the environment env builds.
func startGroup(dir, command string, env *proc.Env, maxChars int) (*group, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = dir
	cmd.Env = env.Build()
	// One pipe for both, handed to the process itself: output keeps its
	// order, and Wait returns when the shell exits, not when the last
	// process holding the pipe does.
	cmd.Stdout, cmd.Stderr = pw, pw
	proc.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close()
	g := &group{cmd: cmd, out: newTail(maxChars), pr: pr, read: make(chan struct{})}
	go func() {
		defer close(g.read)
		_, _ = io.Copy(g.out, pr)
		pr.Close()
	}()
	return g, nil
}

// kill ends the whole process group. The group's id is the shell's pid,
// which stays reserved while any process of the group lives.
func (g *group) kill() {
	_ = proc.KillGroup(g.cmd.Process.Pid, syscall.SIGKILL)
}

// drain waits for the output to be read to its end, a while at most,
// then closes the pipe.
func (g *group) drain(c clock.Clock) {
	t := c.NewTimer(drainWait)
	select {
	case <-g.read:
	case <-t.C():
	}
	t.Stop()
	g.pr.Close()
	<-g.read
}

// exitCode is the shell's exit status; a signal's is 128 + its number,
// as shells report it.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return -1
		}
		return 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// tail keeps the last bytes written to it, enough for max characters,
// and counts them all.
type tail struct {
	mu    sync.Mutex
	keep  int // bytes: max characters of UTF-8 at most 4 bytes each
	buf   []byte
	total int64
}

func newTail(maxChars int) *tail { return &tail{keep: 4 * maxChars} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.keep {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.keep:]...)
	}
	return len(p), nil
}

// text is the last maxChars characters written, and when that is not
// all, a note that says so.
func (t *tail) text(maxChars int) (string, string) {
	t.mu.Lock()
	b, total := t.buf, t.total
	if len(b) > t.keep {
		b = b[len(b)-t.keep:]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	t.mu.Unlock()
	n := utf8.RuneCountInString(s)
	if n > maxChars {
		for i := range s {
			if n == maxChars {
				s = s[i:]
				break
			}
			n--
		}
	} else if int64(len(b)) == total {
		return s, ""
	}
	return s, fmt.Sprintf("output cut: it was %d bytes, only its last %d characters are shown; write it to a file and read_file it, or filter it (grep, tail)", total, maxChars)
}

// processes are the background commands, by the conversation whose
// agent started them: that agent owns them, and they end with it.
type processes struct {
	mu     sync.Mutex
	seq    int
	byConv map[string]map[string]*process
}

func newProcesses() *processes { return &processes{byConv: map[string]map[string]*process{}} }

// process is one background command.
type process struct {
	id      string
	command string
	g       *group
	// done is closed once the shell has exited, its group is killed and
	// its output read; exit is its exit code then.
	done chan struct{}
	exit int
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// end kills a running process's group and waits, a while at most, for
// it to be done. One already done is not killed: its group id may be
// another process's by now.
func (p *process) end(c clock.Clock) {
	if p.running() {
		p.g.kill()
		t := c.NewTimer(endWait)
		select {
		case <-p.done:
		case <-t.C():
		}
		t.Stop()
	}
}

func (w *WorkspaceTools) startBackground(op string, turn *Turn, dir, command string) (Result, error) {
	conv := turnConv(turn)
	w.procs.mu.Lock()
	defer w.procs.mu.Unlock()
	n := 0
	for _, p := range w.procs.byConv[conv] {
		if p.running() {
			n++
		}
	}
	if n >= maxBackground {
		return Result{}, errs.E(op, errs.Conflict, "%d background processes are running already, the most one conversation may have: stop one (kill -- -<pid>) before starting another", n)
	}
	g, err := startGroup(dir, command, w.opts.Env, w.opts.OutputMaxChars)
	if err != nil {
		return Result{}, errs.E(op, errs.Unavailable, "the command could not be started (%v)", err)
	}
	w.procs.seq++
	p := &process{id: fmt.Sprintf("proc_%d", w.procs.seq), command: command, g: g, done: make(chan struct{})}
	if w.procs.byConv[conv] == nil {
		w.procs.byConv[conv] = map[string]*process{}
	}
	w.procs.byConv[conv][p.id] = p
	go func() {
		err := g.cmd.Wait()
		// Its group ends with its shell, so that the group id is never
		// killed once the system may have given it to another process;
		// and a process that is done has all its output read.
		g.kill()
		g.drain(w.opts.Clock)
		p.exit = exitCode(g.cmd.ProcessState, err)
		close(p.done)
	}()
	return JSON(map[string]any{
		"status": "started",
		"id":     p.id,
		"pid":    g.cmd.Process.Pid,
		"note":   fmt.Sprintf("running in the background; read its output with process_output {\"id\": %q}; stop it with terminal: kill -- -%d", p.id, g.cmd.Process.Pid),
	}), nil
}

const processOutputSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1, "description": "The id terminal returned for a background command."}
  },
  "required": ["id"],
  "additionalProperties": false
}`

type processOutputArgs struct {
	ID string `json:"id"`
}

func (w *WorkspaceTools) processOutput() Tool {
	return Tool{
		Name:        "process_output",
		Description: "Read what a background command (terminal with background: true) has written so far, and whether it still runs.",
		Schema:      []byte(processOutputSchema),
		Handler: Func(func(_ context.Context, turn *Turn, a processOutputArgs) (Result, error) {
			const op = "tools.process_output"
			w.procs.mu.Lock()
			p := w.procs.byConv[turnConv(turn)][a.ID]
			w.procs.mu.Unlock()
			if p == nil {
				return Result{}, errs.E(op, errs.NotFound, "no background process %q in this conversation; terminal with background: true returns the id", a.ID)
			}
			out := map[string]any{"id": p.id, "command": p.command, "running": p.running()}
			if !p.running() {
				out["exit_code"] = p.exit
			}
			text, cut := p.g.out.text(w.opts.OutputMaxChars)
			out["output"] = text
			if cut != "" {
				out["note"] = cut
			}
			return JSON(out), nil
		}),
	}
}

// EndProcesses ends the background processes the agent of conv started
// (the sub-agent runner calls it when a child ends) and forgets them. A
// nil WorkspaceTools has none.
func (w *WorkspaceTools) EndProcesses(conv string) {
	if w == nil {
		return
	}
	w.procs.mu.Lock()
	ps := w.procs.byConv[conv]
	delete(w.procs.byConv, conv)
	w.procs.mu.Unlock()
	for _, p := range ps {
		p.end(w.opts.Clock)
	}
}

// ProcessRunning reports whether the background process id that the
// agent of conv started here is still running (what a goal waiting on it
// asks). One this instance does not know of, or a nil WorkspaceTools,
// is not running.
func (w *WorkspaceTools) ProcessRunning(conv, id string) bool {
	if w == nil {
		return false
	}
	w.procs.mu.Lock()
	p := w.procs.byConv[conv][id]
	w.procs.mu.Unlock()
	return p != nil && p.running()
}

// EndAllProcesses ends every background process, for the gateway's
// shutdown.
func (w *WorkspaceTools) EndAllProcesses() {
	if w == nil {
		return
	}
	w.procs.mu.Lock()
	convs := make([]string, 0, len(w.procs.byConv))
	for conv := range w.procs.byConv {
		convs = append(convs, conv)
	}
	w.procs.mu.Unlock()
	for _, conv := range convs {
		w.EndProcesses(conv)
	}
}
