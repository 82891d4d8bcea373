package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/kanban"
)

// diagnostics names a running card whose worker's gateway, on this
// host, is gone: a real process that ended.
func TestKanbanDiagnosticsNamesGoneWorkers(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := kanbanEnv(t, backend)
			k := kbJSON[kanban.Card](t, env, "create", "Orphaned", "--assignee", "herald")
			// A stand-in for the worker's gateway: nothing of the test's
			// environment, a group of its own, ended however the test ends.
			gw := exec.Command("sleep", "300")
			gw.Env = []string{}
			proc.OwnGroup(gw)
			if err := gw.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = gw.Process.Kill(); _ = gw.Wait() })
			start := proc.StartTime(gw.Process.Pid)
			host, _ := os.Hostname()
			cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			db, err := gateway.OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				t.Fatal(err)
			}
			svc := &kanban.Service{Store: db.Kanban()}
			c, err := svc.Claim(ctx, k.ID, kanban.ClaimSpec{Owner: "gw-dead", Lane: "herald", TTL: time.Hour, Host: host, PID: gw.Process.Pid, ProcStart: start})
			if err == nil {
				_, err = svc.Spawned(ctx, k.ID, c.Claim.Token, host, 0, "")
			}
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if d := kbJSON[kanban.Diagnosis](t, env, "diagnostics"); len(d.Gone) != 0 {
				t.Errorf("diagnostics while the gateway lives = %+v, want nothing gone", d.Gone)
			}
			_ = gw.Process.Kill()
			_ = gw.Wait()
			d := kbJSON[kanban.Diagnosis](t, env, "diagnostics")
			if len(d.Gone) != 1 || d.Gone[0].ID != k.ID || d.Gone[0].OwnerPID != gw.Process.Pid || !strings.Contains(d.Gone[0].Why, "gone with gw-dead") {
				t.Errorf("diagnostics = %+v, want the card whose gateway died", d.Gone)
			}
			if out := kb(t, env, "diagnostics"); !strings.Contains(out, "its worker is gone") || !strings.Contains(out, k.ID) {
				t.Errorf("diagnostics printed %q, want the card named", out)
			}
		})
	}
}

// A complete whose completion check fails says so, and counts toward
// the card's limit until it gives up.
func TestKanbanCompleteWithAFailingCheck(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	k := kbJSON[kanban.Card](t, env, "create", "Checked", "--completion-check", "echo not yet; exit 1")
	if out := kb(t, env, "complete", k.ID, "--summary", "done"); !strings.Contains(out, "now ready (its completion check failed: a failed run, 1 in a row") {
		t.Errorf("the first complete printed %q", out)
	}
	if out := kb(t, env, "complete", k.ID, "--summary", "done"); !strings.Contains(out, "now blocked (its completion check failed, and it gave up") {
		t.Errorf("the complete at the failure limit printed %q", out)
	}
}
