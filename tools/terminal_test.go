package tools_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/tools"
)

func TestTerminal(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	tests := []struct {
		desc    string
		command string
		want    map[string]any
	}{
		{desc: "output and exit code", command: "echo hello", want: map[string]any{"exit_code": 0.0, "output": "hello\n", "timed_out": false}},
		{desc: "a failing command", command: "echo no >&2; exit 3", want: map[string]any{"exit_code": 3.0, "output": "no\n"}},
		{desc: "stdout and stderr interleaved", command: "echo a; echo b >&2; echo c", want: map[string]any{"output": "a\nb\nc\n"}},
		{desc: "runs in the workspace root", command: "pwd", want: map[string]any{"output": root + "\n"}},
		{desc: "killed by a signal", command: "kill -TERM $$", want: map[string]any{"exit_code": 128.0 + float64(syscall.SIGTERM)}},
		{desc: "no input", command: "cat", want: map[string]any{"exit_code": 0.0, "output": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, res := callTool(t, set, nil, "terminal", fmt.Sprintf(`{"command":%q}`, tc.command))
			checkResult(t, out, res, tc.want, "")
		})
	}
}

func TestTerminalOutputCapped(t *testing.T) {
	set, _, _ := workspaceSet(t, tools.WorkspaceOptions{OutputMaxChars: 100})
	out, res := callTool(t, set, nil, "terminal", `{"command":"seq 1 100000"}`)
	if res.IsError {
		t.Fatal(res.Content)
	}
	text := out["output"].(string)
	if len([]rune(text)) != 100 || !strings.HasSuffix(text, "\n99999\n100000\n") {
		t.Errorf("output %q: want the last 100 characters", text)
	}
	if note, _ := out["note"].(string); !strings.Contains(note, "output cut: it was 588895 bytes, only its last 100 characters are shown") {
		t.Errorf("note %q: want it to say the output was cut", note)
	}
}

// readFIFO returns what the command under test writes to the named
// pipe at path: the test's way to wait until the command has started.
func readFIFO(t *testing.T, path string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(path) // blocks until a writer opens and closes it
		got <- string(bytes.TrimSpace(b))
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing was written to %s", path)
		return ""
	}
}

func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// alive reports whether pid is a live process. A zombie is not: killed,
// it waits only for its new parent to reap it.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which ends at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// waitGone waits until pid is gone.
func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%s (pid %d) to end", what, pid), func() bool { return !alive(pid) })
}

func TestTerminalKillsProcessGroup(t *testing.T) {
	tests := []struct {
		desc string
		// end ends the command: at its timeout, or by the turn's end.
		end      func(clk *clock.Fake, cancel context.CancelFunc)
		timedOut bool
		note     string
	}{
		{desc: "at its timeout", end: func(clk *clock.Fake, _ context.CancelFunc) { clk.Advance(7 * time.Second) }, timedOut: true, note: "timed out after 7 s"},
		{desc: "when the turn is stopped", end: func(_ *clock.Fake, cancel context.CancelFunc) { cancel() }, note: "stopped: the turn was interrupted"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
			set, _, root := workspaceSet(t, tools.WorkspaceOptions{Clock: clk, TerminalTimeout: time.Hour})
			fifo := mkfifo(t, root)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type called struct {
				out map[string]any
				res tools.Result
			}
			done := make(chan called, 1)
			go func() {
				// The grandchild sleeps in the background; the shell waits
				// for it, and would for 100 s.
				out, res := callToolCtx(t, ctx, set, nil, "terminal", `{"command":"sleep 100 & echo $! > fifo; wait","timeout_seconds":7}`)
				done <- called{out, res}
			}()
			pid, err := strconv.Atoi(readFIFO(t, fifo))
			if err != nil {
				t.Fatal(err)
			}
			tc.end(clk, cancel)
			var c called
			select {
			case c = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("terminal did not return")
			}
			if c.res.IsError {
				t.Fatal(c.res.Content)
			}
			if c.out["timed_out"] != tc.timedOut || c.out["exit_code"] != 128.0+float64(syscall.SIGKILL) {
				t.Errorf("got %s, want timed_out %v and the exit code of SIGKILL", c.res.Content, tc.timedOut)
			}
			if note, _ := c.out["note"].(string); !strings.Contains(note, tc.note) {
				t.Errorf("note %q, want %q", note, tc.note)
			}
			waitGone(t, "the grandchild", pid)
		})
	}
}

func TestTerminalEndsWhatItLeftRunning(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	pidFile := filepath.Join(root, "pid")
	out, res := callTool(t, set, nil, "terminal", `{"command":"sleep 100 & echo $! > pid; echo done"}`)
	checkResult(t, out, res, map[string]any{"exit_code": 0.0, "output": "done\n"}, "")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, "the process the command left", pid)
}

func TestTerminalDangerous(t *testing.T) {
	child := func(ctx context.Context) bool { return ctx.Value(childKey{}) != nil }
	inSub := context.WithValue(context.Background(), childKey{}, true)
	tests := []struct {
		desc    string
		opts    tools.WorkspaceOptions
		ctx     context.Context
		command string
		wantErr string // "" means it ran
	}{
		{desc: "refused in a conversation", opts: tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}, AutoApprove: true, Child: child},
			ctx: context.Background(), command: "rm -rf gone",
			wantErr: "refused: matches the dangerous-command list (tools.dangerous_commands); a sub-agent may run it only with delegation.subagent_auto_approve: true. Nobody can approve it here, so it cannot run"},
		{desc: "refused in a sub-agent without auto-approve", opts: tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}, Child: child},
			ctx: inSub, command: "rm -rf gone",
			wantErr: "a sub-agent may run it only with delegation.subagent_auto_approve: true. This sub-agent runs without it"},
		{desc: "run by a sub-agent with auto-approve", opts: tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}, AutoApprove: true, Child: child},
			ctx: inSub, command: "rm -rf gone"},
		{desc: "auto-approve without a way to tell a sub-agent", opts: tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}, AutoApprove: true},
			ctx: inSub, command: "rm -rf gone", wantErr: "refused"},
		{desc: "a command the list does not match", opts: tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}},
			ctx: context.Background(), command: "rm -f gone"},
		{desc: "the default list", opts: tools.WorkspaceOptions{},
			ctx: context.Background(), command: "echo mkfs.ext4", wantErr: "refused: matches the dangerous-command list"},
		{desc: "an empty list refuses nothing", opts: tools.WorkspaceOptions{Dangerous: []string{}},
			ctx: context.Background(), command: "echo mkfs.ext4"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			set, _, _ := workspaceSet(t, tc.opts)
			out, res := callToolCtx(t, tc.ctx, set, nil, "terminal", fmt.Sprintf(`{"command":%q}`, tc.command))
			want := map[string]any{"exit_code": 0.0}
			checkResult(t, out, res, want, tc.wantErr)
		})
	}
}

type childKey struct{}

// background starts command in the background in conv's name and
// returns its id and shell's pid.
func background(t *testing.T, set *tools.Set, conv, command string) (string, int) {
	t.Helper()
	out, res := callTool(t, set, &tools.Turn{Conv: conv}, "terminal", fmt.Sprintf(`{"command":%q,"background":true}`, command))
	if res.IsError || out["status"] != "started" {
		t.Fatalf("got %s, want it started", res.Content)
	}
	return out["id"].(string), int(out["pid"].(float64))
}

func TestTerminalBackground(t *testing.T) {
	set, w, root := workspaceSet(t, tools.WorkspaceOptions{})
	fifo := mkfifo(t, root)
	id, shell := background(t, set, "subagent:sub_1", "echo started; sleep 100 & echo $! > fifo; wait")
	grandchild, err := strconv.Atoi(readFIFO(t, fifo))
	if err != nil {
		t.Fatal(err)
	}
	other, otherShell := background(t, set, "c2", "sleep 100")

	out, res := callTool(t, set, &tools.Turn{Conv: "subagent:sub_1"}, "process_output", fmt.Sprintf(`{"id":%q}`, id))
	// What it has written is in the pipe, maybe not read yet: only a
	// process that is done has all its output read (TestTerminalBackgroundExit).
	checkResult(t, out, res, map[string]any{"running": true}, "")
	// Another conversation's process is not this one's to read.
	_, res = callTool(t, set, &tools.Turn{Conv: "subagent:sub_1"}, "process_output", fmt.Sprintf(`{"id":%q}`, other))
	if !res.IsError || !strings.Contains(res.Content, "no background process") {
		t.Errorf("reading another conversation's process: got %s", res.Content)
	}

	w.EndProcesses("subagent:sub_1")
	waitGone(t, "the background shell", shell)
	waitGone(t, "its grandchild", grandchild)
	if !alive(otherShell) {
		t.Error("EndProcesses ended another conversation's process")
	}
	_, res = callTool(t, set, &tools.Turn{Conv: "subagent:sub_1"}, "process_output", fmt.Sprintf(`{"id":%q}`, id))
	if !res.IsError {
		t.Errorf("an ended process is still listed: %s", res.Content)
	}
	w.EndProcesses("c2")
	waitGone(t, "the other conversation's shell", otherShell)
}

func TestTerminalBackgroundExit(t *testing.T) {
	set, _, _ := workspaceSet(t, tools.WorkspaceOptions{})
	id, shell := background(t, set, "c1", "echo out; echo err >&2; exit 4")
	waitGone(t, "the background shell", shell)
	var (
		out map[string]any
		res tools.Result
	)
	testkit.EventuallyWithin(t, 10*time.Second, func() (bool, string) {
		out, res = callTool(t, set, nil, "process_output", fmt.Sprintf(`{"id":%q}`, id))
		return out["running"] == false, "still running: " + res.Content
	})
	checkResult(t, out, res, map[string]any{"exit_code": 4.0, "output": "out\nerr\n"}, "")
}

// A command sees the base environment and the names passed through,
// never herald's secrets nor another variable named like a credential.
func TestTerminalEnvironmentHoldsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"HERALD_API_KEY":       "api-key-1111",
		"HERALD_MODEL_API_KEY": "sk-model-2222",
		"TELEGRAM_BOT_TOKEN":   "12345:tg-3333",
		"REDIS_URL":            "redis://:store-pw-4444@cache:6379",
		"GITHUB_TOKEN":         "gh-5555",
		"SOME_OTHER_SETTING":   "other-6666",
	}
	testkit.SetEnv(t, secrets)
	t.Setenv("HERALD_TEST_PASSED", "passed-7777")
	set, _, _ := workspaceSet(t, tools.WorkspaceOptions{Env: &proc.Env{
		// Even named, herald's own secrets stay out.
		Passthrough: []string{"HERALD_TEST_PASSED", "HERALD_API_KEY"},
		Withheld:    config.SecretVariables(),
		Secrets:     []string{"sk-model-2222"},
	}})
	out, res := callTool(t, set, nil, "terminal", `{"command":"env"}`)
	if res.IsError {
		t.Fatal(res.Content)
	}
	testkit.CheckEnv(t, "the command", out["output"].(string), secrets, "HERALD_TEST_PASSED=passed-7777", "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
}
