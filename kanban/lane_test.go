package kanban_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
  quota) exit 75 ;;
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
		if k := h.wantStatus(quota.ID, kanban.StatusReady); k.Failures != 0 || k.RetryAt.IsZero() {
			t.Errorf("exit 75 = %+v", k)
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
