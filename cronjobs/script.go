package cronjobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
)

// Limits on what a script's run keeps.
const (
	scriptOutputMax = 1 << 20 // bytes of stdout kept
	stderrTail      = 800     // characters of stderr a failure notice quotes
)

// scriptResult is one run of a job's script.
type scriptResult struct {
	Stdout string
	Err    error // nil when it exited 0; its message is what a notice says
}

// shellScript reports whether script, a job's, is run with bash: a .sh
// file is, whatever its mode.
func shellScript(script string) bool { return strings.EqualFold(filepath.Ext(script), ".sh") }

// errScriptTimeout is the cause of a script run that ran out of time.
var errScriptTimeout = errors.New("the script timed out")

// runScript runs path (with bash when shell is set, else the file itself)
// in dir in its own process group, with the environment env builds, given its
// own variables vars; it is killed whole when timeout passes on c or ctx
// ends. A failure's error holds the exit status and the tail of stderr.
func runScript(ctx context.Context, c clock.Clock, path string, shell bool, dir string, env *proc.Env, vars []string, timeout time.Duration) scriptResult {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The timer is armed before the script starts, so a script is never
	// given more than its timeout.
	timer := c.AfterFunc(timeout, func() { cancel(errScriptTimeout) })
	defer timer.Stop()

	cmd := exec.Command(path)
	if shell {
		cmd = exec.Command("bash", path)
	}
	cmd.Dir = dir
	cmd.Env = env.Build(vars...)
	var stdout, stderr capped
	stdout.max, stderr.max = scriptOutputMax, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	proc.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		return scriptResult{Err: fmt.Errorf("the script %s could not be started: %v", path, err)}
	}
	stop := context.AfterFunc(runCtx, func() { _ = proc.KillGroup(cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	// What the script left running ends with it.
	_ = proc.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
	res := scriptResult{Stdout: strings.ToValidUTF8(stdout.String(), "\uFFFD")}
	tail := lastChars(strings.TrimSpace(strings.ToValidUTF8(stderr.String(), "\uFFFD")), stderrTail)
	switch {
	case errors.Is(context.Cause(runCtx), errScriptTimeout):
		res.Err = fmt.Errorf("the script timed out after %s and was killed", timeout)
	case ctx.Err() != nil:
		res.Err = fmt.Errorf("the script was stopped: herald is shutting down")
	case err != nil:
		res.Err = fmt.Errorf("the script failed (%v)", err)
	}
	if res.Err != nil && tail != "" {
		res.Err = fmt.Errorf("%w: %s", res.Err, tail)
	}
	return res
}

// capped is a buffer that keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// lastChars is the last n characters of s.
func lastChars(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n:])
}

// wakeAgent reports whether a script's output lets the agent run: a last
// line {"wakeAgent": false} says not to.
func wakeAgent(stdout string) bool {
	lines := strings.Split(strings.TrimRight(stdout, "\n\r\t "), "\n")
	last := strings.Join(strings.Fields(lines[len(lines)-1]), "")
	return last != `{"wakeAgent":false}`
}
