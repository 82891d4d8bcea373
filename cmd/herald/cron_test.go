package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/testkit"
)

// TestCronCommands adds, lists, shows, pauses, resumes, runs and removes
// jobs on each backend, and refuses bad input with a reason, creating
// nothing.
func TestCronCommands(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HERALD_HOME": home, "TELEGRAM_BOT_TOKEN": "1:test", "TELEGRAM_HOME_CHANNEL": "-1007"}
			if backend == "redis" {
				r := testkit.StartRedis(t)
				env["HERALD_STORE"], env["REDIS_URL"], env["HERALD_REDIS_PREFIX"] = "redis", r.URL(), r.Prefix()
			}
			ctx := context.Background()
			script := filepath.Join(home, "disk.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\ndf -h /\n"), 0o755); err != nil {
				t.Fatal(err)
			}

			for _, tt := range []struct {
				args []string
				want string
			}{
				{[]string{"--name", "x", "--schedule", "every banana", "--prompt", "p"}, "banana"},
				{[]string{"--name", "x", "--schedule", "61 * * * *", "--prompt", "p"}, "61"},
				{[]string{"--name", "x", "--schedule", "2020-01-01T09:00", "--prompt", "p"}, "past"},
				{[]string{"--name", "x", "--schedule", "@daily", "--prompt", "p", "--timezone", "Mars/Olympus"}, "Mars/Olympus"},
				{[]string{"--name", "x", "--schedule", "@daily", "--prompt", "p", "--deliver", "slack"}, "slack"},
				{[]string{"--name", "x", "--schedule", "@daily", "--prompt", "p", "--deliver", "discord:123"}, "discord"},
				{[]string{"--name", "x", "--schedule", "@daily", "--no-agent"}, "script"},
				{[]string{"--name", "x", "--schedule", "@daily", "--no-agent", "--script", filepath.Join(home, "none.sh")}, "none.sh"},
				{[]string{"--name", "x", "--prompt", "p"}, "--schedule"},
				{[]string{"--name", "x", "--schedule", "@daily", "--prompt", "p", "--toolsets", "core,browser"}, `unknown toolset "browser"`},
			} {
				h := newHerald(env)
				if code := h.run(ctx, append([]string{"cron", "add"}, tt.args...)...); code == 0 || !strings.Contains(h.stderr.String(), tt.want) {
					t.Errorf("add %q: exit %d, stderr %q; want a failure naming %q", tt.args, code, h.stderr, tt.want)
				}
			}
			h := newHerald(env)
			if code := h.run(ctx, "cron", "list", "--json"); code != 0 || strings.TrimSpace(h.stdout.String()) != "[]" {
				t.Fatalf("list after refused adds: exit %d, %q", code, h.stdout)
			}

			h = newHerald(env)
			if code := h.run(ctx, "cron", "add", "--name", "disk", "--schedule", "every 2h", "--script", script, "--no-agent", "--deliver", "telegram", "--repeat", "3", "--toolsets", "core", "--json"); code != 0 {
				t.Fatalf("add: exit %d, stderr %q", code, h.stderr)
			}
			var j cronjobs.Job
			if err := json.Unmarshal([]byte(h.stdout.String()), &j); err != nil || j.ID == "" {
				t.Fatalf("add --json printed %q: %v", h.stdout, err)
			}
			if j.Name != "disk" || !j.NoAgent || j.Script != script || j.Deliver != "telegram" || j.Repeat.Times != 3 || j.CreatedBy != "cli" || j.NextRunAt.IsZero() || len(j.Toolsets) != 1 {
				t.Errorf("added job = %+v", j)
			}

			h = newHerald(env)
			if code := h.run(ctx, "cron", "list"); code != 0 || !strings.Contains(h.stdout.String(), j.ID+"  scheduled") || !strings.Contains(h.stdout.String(), "disk") {
				t.Errorf("list: exit %d, %q", code, h.stdout)
			}

			// A run another process recorded shows in runs and show.
			db := openTestStore(t, env)
			started := time.Now().UTC().Truncate(time.Second)
			r := cronjobs.Run{ID: "run_1", Job: j.ID, Fire: "cron:" + j.ID + ":1", StartedAt: started, EndedAt: started.Add(time.Second),
				Status: cronjobs.StatusOK, Delivery: cronjobs.DeliveryDelivered, Output: filepath.Join(home, "cron", "output", j.ID, "x.md")}
			if err := db.Cron().PutRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			h = newHerald(env)
			if code := h.run(ctx, "cron", "runs", j.ID[:9]); code != 0 {
				t.Fatalf("runs: exit %d, stderr %q", code, h.stderr)
			}
			for _, want := range []string{"run_1", "start " + started.Format(time.RFC3339), "ok", "delivery delivered", "output " + r.Output} {
				if !strings.Contains(h.stdout.String(), want) {
					t.Errorf("runs printed %q, want %q in it", h.stdout, want)
				}
			}
			h = newHerald(env)
			if code := h.run(ctx, "cron", "show", j.ID, "--json"); code != 0 || !strings.Contains(h.stdout.String(), `"run_1"`) {
				t.Errorf("show --json: exit %d, %q", code, h.stdout)
			}

			for _, step := range []struct {
				verb string
				want func(cronjobs.Job) bool
			}{
				{"pause", func(j cronjobs.Job) bool { return !j.Enabled && j.State == cronjobs.StatePaused }},
				{"resume", func(j cronjobs.Job) bool {
					return j.Enabled && j.State == cronjobs.StateScheduled && j.NextRunAt.After(time.Now())
				}},
				{"run", func(j cronjobs.Job) bool { return !j.RunRequestedAt.IsZero() }},
			} {
				h = newHerald(env)
				if code := h.run(ctx, "cron", step.verb, j.ID, "--json"); code != 0 {
					t.Fatalf("%s: exit %d, stderr %q", step.verb, code, h.stderr)
				}
				got, err := db.Cron().Job(ctx, j.ID)
				if err != nil || !step.want(got) {
					t.Errorf("job after %s = %+v, %v", step.verb, got, err)
				}
			}
			h = newHerald(env)
			if code := h.run(ctx, "cron", "remove", j.ID); code != 0 || !strings.Contains(h.stdout.String(), "removed "+j.ID) {
				t.Fatalf("remove: exit %d, %q, stderr %q", code, h.stdout, h.stderr)
			}
			h = newHerald(env)
			if code := h.run(ctx, "cron", "show", j.ID); code == 0 || !strings.Contains(h.stderr.String(), j.ID) {
				t.Errorf("show of a removed job: exit %d, stderr %q", code, h.stderr)
			}
		})
	}
}
