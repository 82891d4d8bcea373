package kanban_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// A CLI lane runs any command with the card in its environment, keeps
// its output in the card's log and maps its exit.
func TestCommandLane(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		dir := t.TempDir()
		script := filepath.Join(dir, "worker.sh")
		body := `#!/bin/bash
echo "card $HERALD_KANBAN_TASK board $HERALD_KANBAN_BOARD run $HERALD_KANBAN_RUN_ID claim $HERALD_KANBAN_CLAIM in $PWD"
case "$1" in
  fail) echo "the tests failed" >&2; exit 3 ;;
  quota) echo "usage limit reached" >&2; echo "retry-after: 600" >&2; exit 75 ;;
  hang) sleep 300 & echo $! > "$HERALD_KANBAN_WORKSPACE/child.pid"; wait ;;
  *) exit 0 ;;
esac
`
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		lanes := map[string]kanban.LaneConfig{}
		for _, arg := range []string{"fail", "quota", "hang", "ok"} {
			lanes[arg] = kanban.LaneConfig{Lane: kanban.CommandLane{Command: script, Args: []string{arg}, Clock: h.clk}, ExitZeroCompletes: arg == "ok"}
		}
		d, ended := h.dispatcher("gw-a", h.svc, lanes, nil)
		fail := h.create(kanban.CreateSpec{Title: "x", Assignee: "fail"})
		quota := h.create(kanban.CreateSpec{Title: "x", Assignee: "quota"})
		hang := h.create(kanban.CreateSpec{Title: "x", Assignee: "hang", MaxRuntime: time.Minute})
		ok := h.create(kanban.CreateSpec{Title: "x", Assignee: "ok"})
		if rep := h.tick(d); len(rep.Claimed) != 4 {
			t.Fatalf("claimed %v", rep.Claimed)
		}
		waitEnded(t, ended, 3)
		if k := h.wantStatus(fail.ID, kanban.StatusReady); !strings.Contains(k.LastError, "code 3: the tests failed") {
			t.Errorf("a failing command's card = %+v, want its stderr's tail", k)
		}
		// It said how long its limit lasts: the card waits that long.
		if k := h.wantStatus(quota.ID, kanban.StatusReady); k.Failures != 0 || !k.RetryAt.Equal(t0.Add(10*time.Minute)) {
			t.Errorf("exit 75 after retry-after: 600 = %+v, want ready at %s", k, t0.Add(10*time.Minute))
		}
		k := h.wantStatus(ok.ID, kanban.StatusDone)
		if !strings.Contains(k.Result.Summary, "card "+ok.ID+" board default run ") {
			t.Errorf("the worker's output = %q, want its card in its environment", k.Result.Summary)
		}
		// Its output is in the card's log.
		runs := mustRuns(t, h, ok.ID)
		logs, _ := filepath.Glob(h.svc.LogPath(ok.ID, runs[0].ID))
		if len(logs) != 1 {
			t.Fatalf("no log for the run")
		}
		if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "card "+ok.ID) {
			t.Errorf("log = %q", b)
		}
		// The hanging one, with what it started, is killed past its
		// max runtime.
		running := h.wantStatus(hang.ID, kanban.StatusRunning)
		if running.Claim.PID == 0 || running.Claim.ProcStart == "" {
			t.Errorf("claim = %+v, want the worker's process recorded", running.Claim)
		}
		h.clk.Advance(time.Minute)
		d.Heartbeat(h.ctx)
		waitEnded(t, ended, 1)
		if k := h.wantStatus(hang.ID, kanban.StatusReady); !strings.Contains(k.LastError, "max runtime") {
			t.Errorf("the hanging card = %+v", k)
		}
	})
}

// A lane's worker sees the base environment, the lane's own variables,
// its card's and the names passed through, never herald's secrets nor
// another variable named like a credential.
func TestCommandLaneEnvironmentHoldsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"HERALD_API_KEY":       "api-key-1111",
		"HERALD_MODEL_API_KEY": "sk-model-2222",
		"DISCORD_BOT_TOKEN":    "discord-3333",
		"REDIS_URL":            "redis://:store-pw-4444@cache:6379",
		"NPM_TOKEN":            "npm-5555",
	}
	testkit.SetEnv(t, secrets)
	t.Setenv("HERALD_TEST_PASSED", "passed-7777")
	eachStore(t, func(t *testing.T, h *harness) {
		lane := kanban.CommandLane{
			Command: "env", Env: []string{"LANE_OWN=lane-8888"}, Clock: h.clk,
			Inherit: &proc.Env{Passthrough: []string{"HERALD_TEST_PASSED", "REDIS_URL"}, Withheld: config.SecretVariables()},
		}
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"env": {Lane: lane, ExitZeroCompletes: true}}, nil)
		k := h.create(kanban.CreateSpec{Title: "x", Assignee: "env"})
		if rep := h.tick(d); len(rep.Claimed) != 1 {
			t.Fatalf("claimed %v", rep.Claimed)
		}
		waitEnded(t, ended, 1)
		runs := mustRuns(t, h, k.ID)
		b, err := os.ReadFile(h.svc.LogPath(k.ID, runs[0].ID))
		if err != nil {
			t.Fatal(err)
		}
		testkit.CheckEnv(t, "the worker", string(b), secrets, "HERALD_TEST_PASSED=passed-7777", "LANE_OWN=lane-8888", "HERALD_KANBAN_TASK="+k.ID, "PATH=")
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		out  string
		want time.Duration
	}{
		{"", 0},
		{"rate limited, try later", 0},
		{"retry-after: 90", 90 * time.Second},
		{"Retry-After=1.5", 1500 * time.Millisecond},
		{"retry-after: 15m", 15 * time.Minute},
		{"reset-at: 2026-12-03T13:00:00Z", time.Hour},
		{"reset-at: " + strconv.FormatInt(now.Add(2*time.Hour).Unix(), 10), 2 * time.Hour},
		{"retry-after: 10\nmore output\nretry-after: 20", 20 * time.Second}, // the last one
		{"reset-at: 2026-12-03T11:00:00Z", 0},                               // past
		{"retry-after: 1000000", 24 * time.Hour},                            // bounded
		{"retry-after: 1e12", 24 * time.Hour},
		{"retry-after: NaN", 0},
		{"retry-after: soon", 0},
		{"the server said retry-after: 90 in the middle", 0}, // a line of its own
	} {
		if got := kanban.ParseRetryAfter(tc.out, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %s, want %s", tc.out, got, tc.want)
		}
	}
}
