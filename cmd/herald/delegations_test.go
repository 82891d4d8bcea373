package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
)

// seeded is what seedDelegations wrote.
type seeded struct {
	ended, running   string // delegation ids
	runningChild     string // the running one's child that runs
	doneChild        string // and the one that completed
	cursor           string // the signal log's end before any stop
	longSummaryStart string
}

// TestDelegationsCommands lists, shows and stops, on each backend,
// delegations another handle of the store wrote, as a gateway would.
func TestDelegationsCommands(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"HERALD_HOME": t.TempDir()}
			if backend == "redis" {
				r := testkit.StartRedis(t)
				env["HERALD_STORE"], env["REDIS_URL"], env["HERALD_REDIS_PREFIX"] = "redis", r.URL(), r.Prefix()
			}
			ctx := context.Background()
			s := seedDelegations(t, env)

			h := newHerald(env)
			if code := h.run(ctx, "delegations", "list", "--json"); code != 0 {
				t.Fatalf("list --json: exit %d, stderr %q", code, h.stderr)
			}
			all := delegationViews(t, h.stdout.String())
			if len(all) != 2 || all[0].ID != s.running || all[0].Status != delegation.StatusRunning || all[1].ID != s.ended || all[1].Status != delegation.StatusCompleted {
				t.Errorf("list --json = %+v, want %s running then %s completed", all, s.running, s.ended)
			}

			h = newHerald(env)
			if code := h.run(ctx, "delegations", "list"); code != 0 {
				t.Fatalf("list: exit %d, stderr %q", code, h.stderr)
			}
			out := h.stdout.String()
			for _, want := range []string{s.running + "  telegram:1  running  1/3 done", s.ended + "  api:demo  completed  1/1 done", "\n  " + s.runningChild + "  running", "count the lines"} {
				if !strings.Contains(out, want) {
					t.Errorf("list printed %q, want %q in it", out, want)
				}
			}

			for _, tt := range []struct {
				args []string
				want string
			}{
				{[]string{"--active"}, s.running},
				{[]string{"--conv", "api:demo"}, s.ended},
				{[]string{"--limit", "1"}, s.running},
			} {
				h = newHerald(env)
				if code := h.run(ctx, append([]string{"delegations", "list", "--json"}, tt.args...)...); code != 0 {
					t.Fatalf("list %v: exit %d, stderr %q", tt.args, code, h.stderr)
				}
				if got := delegationViews(t, h.stdout.String()); len(got) != 1 || got[0].ID != tt.want {
					t.Errorf("list %v = %+v, want only %s", tt.args, got, tt.want)
				}
			}

			h = newHerald(env)
			if code := h.run(ctx, "delegations", "show", s.running); code != 0 {
				t.Fatalf("show: exit %d, stderr %q", code, h.stderr)
			}
			out = h.stdout.String()
			for _, want := range []string{"1/3 done", s.doneChild + "  completed", s.runningChild + "  running", "on elsewhere", "pending", s.longSummaryStart, "the whole result: --json"} {
				if !strings.Contains(out, want) {
					t.Errorf("show printed %q, want %q in it", out, want)
				}
			}
			if strings.Contains(out, "line 30") {
				t.Errorf("show printed the whole long result: %q", out)
			}

			h = newHerald(env)
			if code := h.run(ctx, "delegations", "show", s.running, "--json"); code != 0 {
				t.Fatalf("show --json: exit %d, stderr %q", code, h.stderr)
			}
			var one delegation.View
			if err := json.Unmarshal([]byte(h.stdout.String()), &one); err != nil {
				t.Fatalf("show --json printed %q: %v", h.stdout, err)
			}
			if one.ID != s.running || one.Status != delegation.StatusRunning || len(one.Children) != 3 || !strings.Contains(h.stdout.String(), "line 30") {
				t.Errorf("show --json = %+v, want the whole delegation with its whole result", one)
			}

			h = newHerald(env)
			if code := h.run(ctx, "delegations", "stop", s.running); code != 0 {
				t.Fatalf("stop: exit %d, stderr %q", code, h.stderr)
			}
			if out := h.stdout.String(); !strings.Contains(out, "sent the stop to 2 sub-agents of") {
				t.Errorf("stop printed %q, want the running one and the one not started stopped", out)
			}
			sigs := signalsAfter(t, env, s.cursor)
			if len(sigs) != 1 || sigs[0].Kind != delegation.SignalCancel || sigs[0].Target != s.runningChild || sigs[0].Conv != "telegram:1" ||
				sigs[0].Text != "cancelled by the operator" {
				t.Errorf("stop sent %+v, want one delegation.cancel by the operator to %s in telegram:1", sigs, s.runningChild)
			}

			h = newHerald(env)
			if code := h.run(ctx, "delegations", "stop", s.ended); code != 0 || !strings.Contains(h.stdout.String(), "nothing to stop") {
				t.Errorf("stop of an ended delegation: exit %d, printed %q", code, h.stdout)
			}

			for _, verb := range []string{"show", "stop"} {
				h = newHerald(env)
				code := h.run(ctx, "delegations", verb, "deleg_nope")
				if lines := strings.Split(strings.TrimSpace(h.stderr.String()), "\n"); code != 1 || len(lines) != 1 || !strings.Contains(lines[0], `no delegation "deleg_nope"`) {
					t.Errorf("%s of an unknown delegation: exit %d, stderr %q; want 1 and one line naming it", verb, code, h.stderr)
				}
			}
		})
	}
}

func TestDelegationsEmptyAndUsage(t *testing.T) {
	env := map[string]string{"HERALD_HOME": t.TempDir()}
	h := newHerald(env)
	if code := h.run(context.Background(), "delegations", "list"); code != 0 || !strings.Contains(h.stdout.String(), "no delegations") {
		t.Errorf("list of none: exit %d, printed %q, stderr %q", code, h.stdout, h.stderr)
	}
	h = newHerald(env)
	if code := h.run(context.Background(), "delegations", "list", "--json"); code != 0 || strings.TrimSpace(h.stdout.String()) != "[]" {
		t.Errorf("list --json of none: exit %d, printed %q", code, h.stdout)
	}
	for _, args := range [][]string{
		{"delegations", "stop"},
		{"delegations", "show", "a", "b"},
		{"delegations", "list", "--limit", "0"},
		{"delegations", "list", "extra"},
		{"delegations", "cancel", "x"},
	} {
		h := newHerald(env)
		if code := h.run(context.Background(), args...); code != exitUsage {
			t.Errorf("herald %v: exit %d, stderr %q; want %d", args, code, h.stderr, exitUsage)
		}
	}
}

func openTestStore(t *testing.T, env map[string]string) gateway.Store {
	t.Helper()
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	db, err := gateway.OpenStore(context.Background(), cfg.Store, cfg.SQLitePath(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// seedDelegations writes an ended delegation of api:demo and, newer, a
// running one of telegram:1: of its three children one completed (with
// a long result), one runs on "elsewhere", one is pending.
func seedDelegations(t *testing.T, env map[string]string) seeded {
	t.Helper()
	ctx := context.Background()
	db := openTestStore(t, env)
	store := db.Delegations()
	now := time.Now()
	dispatch := func(conv string, at time.Time, goals ...string) delegation.Delegation {
		d := delegation.Delegation{
			ID: delegation.NewID("deleg_"), Conv: conv, Source: "tool", CreatedAt: at,
			Origin: outbox.Target{Platform: strings.Split(conv, ":")[0], Chat: strings.Split(conv, ":")[1]},
		}
		for i, g := range goals {
			d.Children = append(d.Children, delegation.Child{ID: delegation.NewID("sub_"), Delegation: d.ID, Index: i, Status: delegation.StatusPending, Task: delegation.Task{Goal: g}})
		}
		if err := store.Create(ctx, delegation.Dispatch{Delegation: d}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	claim := func(n int) []delegation.Claim {
		_, cs, err := store.Claim(ctx, "elsewhere", n, time.Minute)
		if err != nil || len(cs) != n {
			t.Fatalf("Claim(%d) = %v, %v", n, cs, err)
		}
		return cs
	}
	end := func(c delegation.Claim, summary string) {
		if _, err := store.End(ctx, c, delegation.Result{Status: delegation.StatusCompleted, Summary: summary}); err != nil {
			t.Fatal(err)
		}
	}

	var s seeded
	ended := dispatch("api:demo", now.Add(-time.Hour), "say hello")
	end(claim(1)[0], "hello")
	s.ended = ended.ID

	running := dispatch("telegram:1", now.Add(-time.Minute), "read the logs", "count the lines", "wait your turn")
	s.running = running.ID
	cs := claim(2)
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, "line "+strconv.Itoa(i)+" of the findings")
	}
	end(cs[0], strings.Join(lines, "\n"))
	s.doneChild, s.runningChild, s.longSummaryStart = cs[0].Name, cs[1].Name, lines[0]

	_, cur, err := db.Signals().SignalsAfter(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	s.cursor = cur
	return s
}

func signalsAfter(t *testing.T, env map[string]string, cursor string) []signals.Signal {
	t.Helper()
	sigs, _, err := openTestStore(t, env).Signals().SignalsAfter(context.Background(), cursor, 100)
	if err != nil {
		t.Fatal(err)
	}
	return sigs
}

func delegationViews(t *testing.T, out string) []delegation.View {
	t.Helper()
	var vs []delegation.View
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	return vs
}
