package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// Bounds for child processes.
const (
	childStartTimeout = 30 * time.Second
	childStopTimeout  = 40 * time.Second
	cliTimeout        = time.Minute
)

// The herald binary is built once per test run, without -race: the
// process tests measure herald, not the race detector.
var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	stopBrowser()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// heraldBinary returns the path of the built herald binary, building it
// on first use from the module this package is in.
func heraldBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			buildErr = errors.New("go env GOMOD names no go.mod: run the tests inside herald's module")
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "herald-e2e-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "herald")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/herald")
		cmd.Dir = filepath.Dir(gomod)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/herald: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building herald: %v", buildErr)
	}
	return buildPath
}

// child is a `herald gateway` process.
type child struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr *testkit.LogBuffer
	base   string        // http://host:port of its HTTP server
	done   chan struct{} // closed when the process exited
	err    error         // Wait's result, once done
}

// startChild runs `herald gateway` with home as HERALD_HOME (holding the
// herald.yaml the test wrote) and waits until it serves HTTP. The process
// is killed when the test ends, if it still runs.
func startChild(t *testing.T, name, home string, env ...string) *child {
	t.Helper()
	c := &child{t: t, name: name, stderr: &testkit.LogBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(heraldBinary(t), "gateway", "--log-level", "debug")
	c.cmd.Env = childEnv(home, env...)
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			t.Logf("%s log (last lines):\n%s", name, tail(c.stderr.String(), 40))
		}
	})

	deadline := time.After(childStartTimeout)
	for c.base == "" {
		if addr := startedAddr(c.stderr.String()); addr != "" {
			c.base = "http://" + addr
			break
		}
		select {
		case <-c.done:
			t.Fatalf("%s exited before serving (%v); stderr:\n%s", name, c.err, tail(c.stderr.String(), 40))
		case <-deadline:
			t.Fatalf("%s did not log \"gateway started\" within %s; stderr:\n%s", name, childStartTimeout, tail(c.stderr.String(), 40))
		case <-time.After(pollEvery):
		}
	}
	return c
}

// childEnv is the environment of a herald process on home, with extra
// besides. Only what the test says: the developer's own HERALD_*,
// REDIS_URL or OPENAI_API_KEY must not leak into the herald under test.
func childEnv(home string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"HERALD_HOME=" + home,
	}, extra...)
}

// cliResult is what one herald command printed and its exit code.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs `herald args…` with home as HERALD_HOME, as a user types it
// next to a gateway with that config, and returns what it printed. A
// command that cannot be started or outlives cliTimeout fails the test;
// a non-zero exit is the caller's to judge.
func runCLI(t *testing.T, home string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, heraldBinary(t), args...)
	cmd.Env = childEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("herald %s did not end within %s; stderr:\n%s", strings.Join(args, " "), cliTimeout, stderr.String())
	case errors.As(err, &exit):
	case err != nil:
		t.Fatalf("running herald %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// cliJSON runs a herald command with --json that must succeed and decodes
// what it printed into out.
func cliJSON(t *testing.T, home string, out any, args ...string) {
	t.Helper()
	res := runCLI(t, home, append(args, "--json")...)
	if res.code != 0 {
		t.Fatalf("herald %s: exit %d, stderr %q", strings.Join(args, " "), res.code, res.stderr)
	}
	if err := json.Unmarshal([]byte(res.stdout), out); err != nil {
		t.Fatalf("herald %s --json printed %q: %v", strings.Join(args, " "), res.stdout, err)
	}
}

// startedAddr finds the address in the "gateway started" log line.
func startedAddr(log string) string {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"gateway started"`)) {
			continue
		}
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "gateway started" {
			return rec.Addr
		}
	}
	return ""
}

func (c *child) api() *apiClient { return newAPIClient(c.base) }

// kill ends the process with SIGKILL, as a crash or an OOM kill would,
// and waits until it is gone.
func (c *child) kill() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(childStopTimeout):
		c.t.Errorf("%s (pid %d) did not exit after SIGKILL", c.name, c.cmd.Process.Pid)
	}
}

// stop ends the process with SIGTERM and checks it exits 0 in time.
func (c *child) stop() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatalf("SIGTERM to %s: %v", c.name, err)
	}
	select {
	case <-c.done:
		if c.err != nil {
			c.t.Errorf("%s exited with %v after SIGTERM; stderr:\n%s", c.name, c.err, tail(c.stderr.String(), 20))
		}
	case <-time.After(childStopTimeout):
		c.t.Fatalf("%s did not exit within %s of SIGTERM", c.name, childStopTimeout)
	}
}

// writeConfig writes home/herald.yaml.
func writeConfig(t *testing.T, home, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "herald.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}
