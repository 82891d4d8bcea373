package cronjobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

// The agent's jobs take their scripts from cron.scripts_dir alone: a
// name is taken inside it, and /usr/bin/env, a .. escape or a symlink
// out of it is refused with a message naming the directory.
func TestToolTakesScriptsFromTheScriptsDirOnly(t *testing.T) {
	home := t.TempDir()
	dir := filepath.Join(home, "scripts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(home, "outside.sh")
	for _, p := range []string{filepath.Join(dir, "disk.sh"), outside} {
		if err := os.WriteFile(p, []byte("df -h\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/usr/bin/env", filepath.Join(dir, "env")); err != nil {
		t.Fatal(err)
	}
	m := cronjobs.Manager{
		Targets: cronjobs.Targets{Platforms: []string{"telegram"}}, Timezone: "UTC",
		ScriptsDir: dir, Clock: clock.NewFake(t0),
	}
	tool := cronjobs.Tool(m)
	for _, tc := range []struct {
		desc, script string
		want         string // the job's script; "" wants a refusal naming dir
	}{
		{desc: "a name inside", script: "disk.sh", want: filepath.Join(dir, "disk.sh")},
		{desc: "an absolute path inside", script: filepath.Join(dir, "disk.sh"), want: filepath.Join(dir, "disk.sh")},
		{desc: "an absolute path outside", script: "/usr/bin/env"},
		{desc: "a .. escape", script: "../outside.sh"},
		{desc: "a symlink out", script: "env"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			turn := &tools.Turn{Conv: "telegram:100", User: "telegram:42", Origin: outbox.Target{Platform: "telegram", Chat: "100"}}
			args := fmt.Sprintf(`{"action":"create","schedule":"every 1h","script":%q,"no_agent":true}`, tc.script)
			_, err := tool.Handler(context.Background(), turn, []byte(args))
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), dir) || len(turn.Writes()) != 0 {
					t.Fatalf("create with %s = %v, %d writes; want it refused naming %s", tc.script, err, len(turn.Writes()), dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ws := turn.Writes()
			if len(ws) != 1 || ws[0].(cronjobs.Create).Job.Script != tc.want {
				t.Fatalf("writes %+v, want a job running %s", ws, tc.want)
			}
		})
	}
}
