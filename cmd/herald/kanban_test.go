package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// kanbanEnv is the environment of a herald on a fresh home and a fresh
// store of backend, with telegram configured (a home channel, for
// notification targets).
func kanbanEnv(t *testing.T, backend string) map[string]string {
	t.Helper()
	env := map[string]string{"HERALD_HOME": t.TempDir(), "TELEGRAM_BOT_TOKEN": "1:test", "TELEGRAM_HOME_CHANNEL": "-1007"}
	if backend == "redis" {
		r := testkit.StartRedis(t)
		env["HERALD_STORE"], env["REDIS_URL"], env["HERALD_REDIS_PREFIX"] = "redis", r.URL(), r.Prefix()
	}
	return env
}

// withEnv is env with more variables.
func withEnv(env map[string]string, kv ...string) map[string]string {
	out := maps.Clone(env)
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// kb runs `herald kanban args…`, wants exit 0 and returns its stdout.
func kb(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	h := newHerald(env)
	if code := h.run(context.Background(), append([]string{"kanban"}, args...)...); code != 0 {
		t.Fatalf("kanban %q: exit %d, stderr %q", args, code, h.stderr)
	}
	return h.stdout.String()
}

// kbFails runs `herald kanban args…` and wants exit code want with
// stderr naming what.
func kbFails(t *testing.T, env map[string]string, want int, what string, args ...string) {
	t.Helper()
	h := newHerald(env)
	code := h.run(context.Background(), append([]string{"kanban"}, args...)...)
	if code != want || !strings.Contains(h.stderr.String(), what) {
		t.Errorf("kanban %q: exit %d, stderr %q; want exit %d naming %q", args, code, h.stderr, want, what)
	}
}

// kbJSON runs `herald kanban args… --json` and decodes what it prints.
func kbJSON[T any](t *testing.T, env map[string]string, args ...string) T {
	t.Helper()
	out := kb(t, env, append(args, "--json")...)
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("kanban %q --json printed %q: %v", args, out, err)
	}
	return v
}

func ids(cards []kanban.Card) []string {
	var out []string
	for _, k := range cards {
		out = append(out, k.ID)
	}
	return out
}

// TestKanbanCommands walks cards through the board with the CLI on each
// backend, as a person and as a worker reporting under its claim, and
// refuses bad input with its reason, writing nothing.
func TestKanbanCommands(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := kanbanEnv(t, backend)

			for _, tt := range []struct {
				desc string
				args []string
				code int
				want string
			}{
				{"bad status", []string{"create", "x", "--status", "bogus"}, exitFailure, `not "bogus"`},
				{"ready status", []string{"create", "x", "--status", "ready"}, exitFailure, "triage, todo, blocked or scheduled"},
				{"unknown parent", []string{"create", "x", "--parent", "t_00000000"}, exitFailure, "parent t_00000000 is not a card"},
				{"dir without its directory", []string{"create", "x", "--workspace", "dir"}, exitFailure, "needs its directory"},
				{"bad workspace", []string{"create", "x", "--workspace", "cloud"}, exitFailure, `workspace "cloud"`},
				{"negative retries", []string{"create", "x", "--max-retries", "-1"}, exitFailure, "may not be negative"},
				{"empty title", []string{"create", " "}, exitUsage, "title"},
				{"no title", []string{"create"}, exitUsage, "title"},
				{"bad board", []string{"create", "x", "--board", "Not A Slug"}, exitUsage, "--board"},
				{"unknown board", []string{"create", "x", "--board", "nope"}, exitFailure, "kanban init --board nope"},
				{"bad --at", []string{"create", "x", "--at", "tomorrow"}, exitUsage, "RFC3339"},
				{"bad list status", []string{"list", "--status", "doing"}, exitUsage, `"doing" is not a status`},
			} {
				t.Run(tt.desc, func(t *testing.T) { kbFails(t, env, tt.code, tt.want, tt.args...) })
			}
			if got := kbJSON[[]kanban.Card](t, env, "list", "--archived"); len(got) != 0 {
				t.Fatalf("list after refused creates = %v", ids(got))
			}

			a := kbJSON[kanban.Card](t, env, "create", "Write the report", "--body", "the Q3 numbers", "--assignee", "Writer", "--priority", "3", "--review", "--max-runtime", "10m", "--tenant", "acme")
			if !strings.HasPrefix(a.ID, "t_") || a.Status != kanban.StatusReady || a.Assignee != "writer" || a.Priority != 3 || !a.Review || a.MaxRuntime.Duration() != 10*time.Minute || a.Tenant != "acme" || a.CreatedBy != "cli" {
				t.Fatalf("created %+v", a)
			}
			b := kbJSON[kanban.Card](t, env, "create", "Send it", "--parent", a.ID, "--idempotency-key", "send-1")
			if b.Status != kanban.StatusTodo || !slices.Equal(b.Parents, []string{a.ID}) {
				t.Fatalf("child created %+v", b)
			}
			if again := kbJSON[kanban.Card](t, env, "create", "Send it again", "--idempotency-key", "send-1"); again.ID != b.ID {
				t.Errorf("a create with the same idempotency key made %s, want %s", again.ID, b.ID)
			}
			dir := t.TempDir()
			c := kbJSON[kanban.Card](t, env, "create", "Check the disk", "--dir", dir, "--completion-check", "true")
			if c.Workspace != (kanban.Workspace{Kind: kanban.WorkspaceDir, Path: dir}) || c.CompletionCheck != "true" {
				t.Errorf("created %+v", c)
			}
			kbFails(t, env, exitFailure, "would make a cycle", "link", b.ID, a.ID)
			kbFails(t, env, exitFailure, "own parent", "link", a.ID, a.ID)
			kbFails(t, env, exitFailure, "no card t_00000000", "show", "t_00000000")

			if got := ids(kbJSON[[]kanban.Card](t, env, "list")); !slices.Equal(got, []string{a.ID, b.ID, c.ID}) {
				t.Errorf("list = %v, want by priority then age: %v", got, []string{a.ID, b.ID, c.ID})
			}
			if got := ids(kbJSON[[]kanban.Card](t, env, "list", "--status", "todo")); !slices.Equal(got, []string{b.ID}) {
				t.Errorf("list --status todo = %v", got)
			}
			if got := ids(kbJSON[[]kanban.Card](t, env, "list", "--assignee", "writer", "--tenant", "acme")); !slices.Equal(got, []string{a.ID}) {
				t.Errorf("list --assignee writer --tenant acme = %v", got)
			}
			if out := kb(t, env, "list"); !strings.Contains(out, a.ID+"  ready") || !strings.Contains(out, "Write the report") {
				t.Errorf("list printed %q", out)
			}

			// A claim by hand, and its worker's reports under it.
			claimed := kbJSON[kanban.Card](t, env, "claim", a.ID, "--ttl", "1h")
			if claimed.Status != kanban.StatusRunning || claimed.Claim == nil || claimed.Claim.Owner != "cli" {
				t.Fatalf("claimed %+v", claimed)
			}
			token := strconv.FormatInt(claimed.Claim.Token, 10)
			kbFails(t, env, exitFailure, "running on lane writer", "reassign", a.ID, "other")
			worker := withEnv(env, "HERALD_KANBAN_TASK", a.ID, "HERALD_KANBAN_CLAIM", token)
			if out := kb(t, worker, "heartbeat", "--note", "half way"); !strings.Contains(out, a.ID+" is held until") {
				t.Errorf("heartbeat printed %q", out)
			}
			kb(t, worker, "comment", "the numbers are in")
			stale := withEnv(env, "HERALD_KANBAN_TASK", a.ID, "HERALD_KANBAN_CLAIM", "1")
			kbFails(t, stale, exitLeaseLost, "the claim on "+a.ID+" was released; stop working on it", "complete", "--summary", "done")
			kbFails(t, worker, exitUsage, "--summary", "complete")
			if out := kb(t, worker, "complete", "--summary", "wrote it", "--result", "report.pdf", "--created", c.ID); !strings.Contains(out, "now review") {
				t.Errorf("complete printed %q, want the card in review", out)
			}
			db := openTestStore(t, env)
			ctx := context.Background()
			got, err := db.Kanban().Card(ctx, a.ID)
			if err != nil || got.Status != kanban.StatusReview || got.Result == nil || got.Result.Result != "report.pdf" || !slices.Equal(got.Result.CreatedCards, []string{c.ID}) {
				t.Fatalf("card after the worker's complete = %+v, %v", got, err)
			}
			// A person approves it by completing it: the child is ready.
			if out := kb(t, env, "complete", a.ID, "--summary", "looks right"); !strings.Contains(out, "approved "+a.ID+": now done") {
				t.Errorf("a person's complete of a card in review printed %q", out)
			}
			if got, _ := db.Kanban().Card(ctx, b.ID); got.Status != kanban.StatusReady {
				t.Errorf("child after its parent is done: %s, want ready", got.Status)
			}

			v := kbJSON[cardView](t, env, "show", a.ID)
			if v.ID != a.ID || v.Status != kanban.StatusDone || len(v.Comments) != 1 || v.Comments[0].Author != "worker" || len(v.Runs) != 1 || len(v.Events) == 0 {
				t.Errorf("show --json = %+v", v)
			}
			for _, want := range []string{a.ID + "  done  Write the report", "the Q3 numbers", "wrote it", "the numbers are in", "half way", "completed"} {
				if out := kb(t, env, "show", a.ID); !strings.Contains(out, want) {
					t.Errorf("show printed %q, want %q in it", out, want)
				}
			}
			if rs := kbJSON[[]kanban.Run](t, env, "runs", a.ID); len(rs) != 1 || rs[0].Outcome != kanban.OutcomeCompleted || rs[0].Summary != "wrote it" {
				t.Errorf("runs --json = %+v", rs)
			}
			if evs := kbJSON[[]kanban.Event](t, env, "tail", a.ID); len(evs) == 0 || evs[0].Kind != kanban.EventCreated {
				t.Errorf("tail --json = %+v", evs)
			}

			// Block, diagnostics, unblock.
			kbFails(t, env, exitUsage, "--reason", "block", c.ID)
			kbFails(t, env, exitFailure, `block kind "later"`, "block", c.ID, "--reason", "r", "--kind", "later")
			kb(t, env, "block", c.ID, "--reason", "needs the disk's owner")
			d := kbJSON[kanban.Diagnosis](t, env, "diagnostics")
			if len(d.Blocked) != 1 || d.Blocked[0].ID != c.ID || d.Blocked[0].Reason != "needs the disk's owner" || len(d.Stranded) != 0 || len(d.Expired) != 0 {
				t.Errorf("diagnostics = %+v", d)
			}
			if out := kb(t, env, "unblock", c.ID); !strings.Contains(out, "now ready") {
				t.Errorf("unblock printed %q", out)
			}
			kbFails(t, env, exitFailure, "not blocked", "unblock", c.ID)

			// Reclaim: the claim's worker is told to stop.
			claimed = kbJSON[kanban.Card](t, env, "claim", c.ID)
			worker = withEnv(env, "HERALD_KANBAN_TASK", c.ID, "HERALD_KANBAN_CLAIM", strconv.FormatInt(claimed.Claim.Token, 10))
			if out := kb(t, env, "reclaim", c.ID); !strings.Contains(out, "now ready") {
				t.Errorf("reclaim printed %q", out)
			}
			kbFails(t, worker, exitLeaseLost, "the claim on "+c.ID+" was released", "heartbeat")
			kbFails(t, worker, exitLeaseLost, "the claim on "+c.ID+" was released", "block", "--reason", "r")
			kbFails(t, env, exitFailure, "not running", "reclaim", c.ID)
			kbFails(t, env, exitFailure, "not running", "heartbeat", c.ID)
			if got, _ := db.Kanban().Card(ctx, c.ID); got.Failures != 1 || got.Status != kanban.StatusReady {
				t.Errorf("card after reclaim: %s with %d failures", got.Status, got.Failures)
			}
			if rs := kbJSON[[]kanban.Run](t, env, "runs", c.ID); len(rs) != 1 || rs[0].Outcome != kanban.OutcomeReclaimed {
				t.Errorf("runs after reclaim = %+v", rs)
			}

			// Links, assignment, schedule, promote, archive.
			kb(t, env, "link", c.ID, b.ID)
			if got, _ := db.Kanban().Card(ctx, b.ID); got.Status != kanban.StatusTodo {
				t.Errorf("card after a link to a parent not done: %s", got.Status)
			}
			kb(t, env, "unlink", c.ID, b.ID)
			kbFails(t, env, exitFailure, "is not a parent", "unlink", c.ID, b.ID)
			if out := kb(t, env, "assign", b.ID, "mailer"); !strings.Contains(out, "no lane mailer in kanban.lanes") {
				t.Errorf("assign to a lane not configured printed %q", out)
			}
			kbFails(t, env, exitUsage, "--at", "schedule", b.ID)
			kb(t, env, "schedule", b.ID, "--at", "2020-01-02T03:04:05Z")
			if out := kb(t, env, "promote"); !strings.Contains(out, "promoted "+b.ID+": now ready") {
				t.Errorf("promote printed %q", out)
			}
			if out := kb(t, env, "promote"); !strings.Contains(out, "nothing to promote") {
				t.Errorf("a second promote printed %q", out)
			}
			kb(t, env, "archive", c.ID)
			kbFails(t, env, exitFailure, "archived", "archive", c.ID)

			st := kbJSON[kanban.BoardStats](t, env, "stats")
			if st.Total != 3 || st.Statuses["done"] != 1 || st.Statuses["ready"] != 1 || st.Statuses["archived"] != 1 || st.Assignees["writer"] != 1 || st.Assignees["mailer"] != 1 || st.Unassigned != 0 {
				t.Errorf("stats = %+v", st)
			}
			if out := kb(t, env, "gc"); !strings.Contains(out, "archived 0 cards") {
				t.Errorf("gc of a card done just now printed %q", out)
			}
			if out := kb(t, env, "gc", "--older-than", "0s"); !strings.Contains(out, "archived 1 card ") {
				t.Errorf("gc --older-than 0s printed %q", out)
			}
			kbFails(t, env, exitUsage, "--older-than", "gc", "--older-than", "a while")

			// Boards.
			if bs := kbJSON[[]kanban.Board](t, env, "boards"); len(bs) != 1 || bs[0].Slug != kanban.DefaultBoard {
				t.Errorf("boards before init = %+v", bs)
			}
			if out := kb(t, env, "init", "--board", "ops", "--name", "Operations"); !strings.Contains(out, "made board ops") {
				t.Errorf("init printed %q", out)
			}
			if out := kb(t, env, "init", "--board", "ops"); !strings.Contains(out, "exists") {
				t.Errorf("a second init printed %q", out)
			}
			if bs := kbJSON[[]kanban.Board](t, env, "boards"); len(bs) != 2 || bs[1].Slug != "ops" || bs[1].Name != "Operations" {
				t.Errorf("boards after init = %+v", bs)
			}
			ops := kbJSON[kanban.Card](t, env, "create", "Rotate the keys", "--board", "ops")
			if ops.Board != "ops" {
				t.Errorf("created on board %s, want ops", ops.Board)
			}
			if got := ids(kbJSON[[]kanban.Card](t, env, "list", "--board", "ops")); !slices.Equal(got, []string{ops.ID}) {
				t.Errorf("list --board ops = %v", got)
			}

			// Subscriptions.
			kbFails(t, env, exitFailure, "slack", "notify-subscribe", "--target", "slack")
			kbFails(t, env, exitUsage, `"finished" is not an event kind`, "notify-subscribe", "--target", "telegram", "--events", "finished")
			kbFails(t, env, exitFailure, "sends nothing", "notify-subscribe", "--target", "local")
			kbFails(t, env, exitUsage, "--target", "notify-subscribe")
			if ss := kbJSON[[]kanban.Subscription](t, env, "notify-list"); len(ss) != 0 {
				t.Fatalf("subscriptions after refused subscribes: %+v", ss)
			}
			s := kbJSON[kanban.Subscription](t, env, "notify-subscribe", "--target", "telegram", "--events", "completed,blocked")
			if !strings.HasPrefix(s.ID, "sub_") || s.Board != "default" || s.Target != "telegram" || !slices.Equal(s.Events, []string{"completed", "blocked"}) || s.Cursor == "" {
				t.Errorf("subscribed %+v; want its cursor at the board's latest event", s)
			}
			if ss := kbJSON[[]kanban.Subscription](t, env, "notify-list"); len(ss) != 1 || ss[0].ID != s.ID {
				t.Errorf("notify-list = %+v", ss)
			}
			kb(t, env, "notify-unsubscribe", s.ID)
			kbFails(t, env, exitFailure, "no subscription "+s.ID, "notify-unsubscribe", s.ID)
		})
	}
}

// TestKanbanLog prints a run's log, the newest run's by default.
func TestKanbanLog(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	k := kbJSON[kanban.Card](t, env, "create", "Build")
	kbFails(t, env, exitFailure, "no runs", "log", k.ID)
	first := kbJSON[kanban.Card](t, env, "claim", k.ID).Claim.Run
	kb(t, env, "reclaim", k.ID)
	second := kbJSON[kanban.Card](t, env, "claim", k.ID).Claim.Run
	dir := filepath.Join(env["HERALD_HOME"], "kanban", "logs", k.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for run, text := range map[string]string{first: "first try\n", second: "second try\n"} {
		if err := os.WriteFile(filepath.Join(dir, run+".log"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out := kb(t, env, "log", k.ID); out != "second try\n" {
		t.Errorf("log printed %q, want the newest run's", out)
	}
	if out := kb(t, env, "log", k.ID, "--run", first); out != "first try\n" {
		t.Errorf("log --run printed %q", out)
	}
	kbFails(t, env, exitFailure, "left no log", "log", k.ID, "--run", "run_none")
}

// TestKanbanTailFollow prints the events that come while it follows,
// until interrupted.
func TestKanbanTailFollow(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	k := kbJSON[kanban.Card](t, env, "create", "Watch me")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHerald(env)
	code := make(chan int, 1)
	go func() { code <- h.run(ctx, "kanban", "tail", k.ID, "--follow") }()
	waitFor(t, h.stdout, "created", code)
	kb(t, env, "comment", k.ID, "a new note")
	waitFor(t, h.stdout, "a new note", code)
	cancel()
	if c := <-code; c != 0 {
		t.Errorf("tail --follow exited %d after the interrupt, stderr %q", c, h.stderr)
	}
}

// lanesConfig writes a config with two command lanes: quick completes
// its card on its exit 0, limited exits 75 (rate limited), slow
// sleeps a minute.
func lanesConfig(t *testing.T, env map[string]string) {
	t.Helper()
	yaml := `kanban:
  lanes:
    quick:
      command: sh
      args: ["-c", "echo did $HERALD_KANBAN_TASK"]
      exit_zero_completes: true
    limited:
      command: sh
      args: ["-c", "exit 75"]
    slow:
      command: sh
      args: ["-c", "sleep 60"]
`
	if err := os.WriteFile(filepath.Join(env["HERALD_HOME"], "herald.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKanbanDispatch dispatches once: a dry run changes nothing and says
// what would be claimed and what waits, a real one runs the command
// lanes' workers and waits for them.
func TestKanbanDispatch(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := kanbanEnv(t, backend)
			lanesConfig(t, env)
			quick := kbJSON[kanban.Card](t, env, "create", "Quick one", "--assignee", "quick")
			limited := kbJSON[kanban.Card](t, env, "create", "Limited one", "--assignee", "limited")
			agent := kbJSON[kanban.Card](t, env, "create", "For the agent", "--assignee", "herald")
			nobody := kbJSON[kanban.Card](t, env, "create", "Nobody's")

			dry := kbJSON[dispatchReport](t, env, "dispatch", "--dry-run")
			slices.Sort(dry.Claimed)
			want := []string{quick.ID, limited.ID}
			slices.Sort(want)
			if !dry.DryRun || !slices.Equal(dry.Claimed, want) || dry.Waiting[agent.ID] != kanban.EventSkippedNonspawnable || dry.Waiting[nobody.ID] != kanban.EventSkippedUnassigned {
				t.Errorf("dry run = %+v", dry)
			}
			out := kb(t, env, "dispatch", "--dry-run")
			for _, want := range []string{"would claim " + quick.ID, "waits " + agent.ID, "herald lane runs only in a gateway", "waits " + nobody.ID, "kanban.default_assignee"} {
				if !strings.Contains(out, want) {
					t.Errorf("dry run printed %q, want %q in it", out, want)
				}
			}
			for _, c := range kbJSON[[]kanban.Card](t, env, "list") {
				if c.Status != kanban.StatusReady || c.Waiting != "" {
					t.Errorf("after a dry run %s is %s (waiting %q), want it untouched", c.ID, c.Status, c.Waiting)
				}
			}

			rep := kbJSON[dispatchReport](t, env, "dispatch")
			if rep.DryRun || len(rep.Claimed) != 2 || rep.Ended[quick.ID] != kanban.StatusDone || rep.Ended[limited.ID] != kanban.StatusReady {
				t.Errorf("dispatch = %+v", rep)
			}
			v := kbJSON[cardView](t, env, "show", quick.ID)
			if v.Result == nil || v.Result.Summary != "did "+quick.ID {
				t.Errorf("the quick card's result = %+v", v.Result)
			}
			if out := kb(t, env, "log", quick.ID); out != "did "+quick.ID+"\n" {
				t.Errorf("log printed %q", out)
			}
			if rs := kbJSON[[]kanban.Run](t, env, "runs", limited.ID); len(rs) != 1 || rs[0].Outcome != kanban.OutcomeLimited {
				t.Errorf("the limited card's runs = %+v", rs)
			}
			// The exit 75 paused its lane in the store: the next process
			// sees it, in a dry run and in the diagnostics.
			dry = kbJSON[dispatchReport](t, env, "dispatch", "--dry-run")
			if len(dry.Paused) != 1 || dry.Paused[0].Lane != "limited" || !strings.Contains(dry.Paused[0].Reason, "exited 75") || time.Until(dry.Paused[0].Until) < 4*time.Minute {
				t.Errorf("dry run after the rate limit: paused %+v, want the limited lane for kanban.rate_limit_wait_seconds", dry.Paused)
			}
			if out := kb(t, env, "dispatch", "--dry-run"); !strings.Contains(out, "lane limited is paused until") {
				t.Errorf("dry run printed %q, want the paused lane named", out)
			}
			if d := kbJSON[kanban.Diagnosis](t, env, "diagnostics"); len(d.Paused) != 1 || d.Paused[0].Lane != "limited" {
				t.Errorf("diagnostics = %+v, want the paused lane", d)
			}
			if out := kb(t, env, "diagnostics"); !strings.Contains(out, "lane limited is paused until") {
				t.Errorf("diagnostics printed %q, want the paused lane named", out)
			}
		})
	}
}

// TestKanbanDispatchInterrupted stops the workers a dispatch waits for
// when it is interrupted, and releases their claims without counting a
// failure.
func TestKanbanDispatchInterrupted(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	lanesConfig(t, env)
	k := kbJSON[kanban.Card](t, env, "create", "Slow one", "--assignee", "slow")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHerald(env)
	code := make(chan int, 1)
	go func() { code <- h.run(ctx, "kanban", "dispatch") }()
	waitFor(t, h.stdout, "waiting for 1 worker", code)
	cancel()
	select {
	case c := <-code:
		if c != exitFailure || !strings.Contains(h.stderr.String(), "interrupted") {
			t.Errorf("interrupted dispatch: exit %d, stderr %q", c, h.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the dispatch did not end after the interrupt")
	}
	got := kbJSON[cardView](t, env, "show", k.ID)
	if got.Status != kanban.StatusReady || got.Failures != 0 || len(got.Runs) != 1 || got.Runs[0].Outcome != kanban.OutcomeReclaimed {
		t.Errorf("card after the interrupt: %s, %d failures, runs %+v", got.Status, got.Failures, got.Runs)
	}
	if !strings.Contains(h.stdout.String(), k.ID+": its worker ended, the card is ready") {
		t.Errorf("dispatch printed %q", h.stdout)
	}
}

// daemon runs `herald kanban daemon` on env until stop, which wants
// it to exit 0; card reads a card from its store.
func daemon(t *testing.T, env map[string]string) (h *herald, card func(id string) (kanban.Card, error), stop func()) {
	t.Helper()
	db := openTestStore(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h = newHerald(env)
	code := make(chan int, 1)
	go func() { code <- h.run(ctx, "kanban", "daemon") }()
	card = func(id string) (kanban.Card, error) { return db.Kanban().Card(context.Background(), id) }
	return h, card, func() {
		t.Helper()
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("daemon exited %d, stderr %q", c, h.stderr)
		}
	}
}

// TestKanbanDaemon runs a dispatcher until interrupted.
func TestKanbanDaemon(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	lanesConfig(t, env)
	k := kbJSON[kanban.Card](t, env, "create", "Quick one", "--assignee", "quick")
	h, card, stop := daemon(t, env)
	testkit.Eventually(t, "the daemon's worker to complete the card", func() bool {
		got, err := card(k.ID)
		return err == nil && got.Status == kanban.StatusDone
	})
	stop()
	for _, want := range []string{"the kanban daemon runs", "the kanban daemon stopped"} {
		if !strings.Contains(h.stderr.String(), want) {
			t.Errorf("daemon logged %q, want %q in it", h.stderr, want)
		}
	}
}

// TestKanbanWorkerOverHTTP reports a worker's complete, block, heartbeat
// and comment to the gateway's HTTP API when the worker has it, and
// exits 3 when the gateway says the claim was released.
func TestKanbanWorkerOverHTTP(t *testing.T) {
	type request struct {
		path, auth string
		body       map[string]any
	}
	var (
		mu   sync.Mutex
		reqs []request
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		reqs = append(reqs, request{path: r.Method + " " + r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v1/kanban/cards/t_gone/"):
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"message":"t_gone is not held by claim 4 any more","type":"lease_lost_error"}}`)
		case body["summary"] == "refuse me":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"a complete needs a summary","type":"invalid_request_error"}}`)
		default:
			_, _ = io.WriteString(w, `{"id":"t_0000abcd","status":"done"}`)
		}
	}))
	defer srv.Close()

	// No store is opened: the home does not even exist.
	env := map[string]string{"HERALD_HOME": filepath.Join(t.TempDir(), "none"),
		"HERALD_KANBAN_TASK": "t_0000abcd", "HERALD_KANBAN_CLAIM": "4",
		"HERALD_KANBAN_API_URL": srv.URL + "/", "HERALD_KANBAN_TOKEN": "hkt1.t_0000abcd.4.sig"}
	kb(t, env, "complete", "--summary", "did it", "--result", "42", "--created", "t_1111aaaa,t_2222bbbb",
		"--artifact", "/work/out.txt", "--meta", "pr=42")
	kb(t, env, "block", "--reason", "needs a key", "--kind", "capability")
	kb(t, env, "heartbeat", "--note", "half way")
	if out := kb(t, env, "comment", "a note"); !strings.Contains(out, "sent the comment of t_0000abcd") {
		t.Errorf("comment printed %q", out)
	}
	want := []request{
		{"POST /api/v1/kanban/cards/t_0000abcd/complete", "", map[string]any{"summary": "did it", "result": "42", "created_cards": []any{"t_1111aaaa", "t_2222bbbb"},
			"artifacts": []any{"/work/out.txt"}, "metadata": map[string]any{"pr": "42"}}},
		{"POST /api/v1/kanban/cards/t_0000abcd/block", "", map[string]any{"reason": "needs a key", "kind": "capability"}},
		{"POST /api/v1/kanban/cards/t_0000abcd/heartbeat", "", map[string]any{"note": "half way"}},
		{"POST /api/v1/kanban/cards/t_0000abcd/comments", "", map[string]any{"text": "a note"}},
	}
	mu.Lock()
	got := slices.Clone(reqs)
	mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("requests = %+v", got)
	}
	for i, r := range got {
		if r.path != want[i].path || r.auth != "Bearer hkt1.t_0000abcd.4.sig" {
			t.Errorf("request %d = %s with %q, want %s with the worker's token", i, r.path, r.auth, want[i].path)
		}
		b1, _ := json.Marshal(r.body)
		b2, _ := json.Marshal(want[i].body)
		if string(b1) != string(b2) {
			t.Errorf("request %d body = %s, want %s", i, b1, b2)
		}
	}

	gone := withEnv(env, "HERALD_KANBAN_TASK", "t_gone", "HERALD_KANBAN_TOKEN", "hkt1.t_gone.4.sig")
	kbFails(t, gone, exitLeaseLost, "the claim on t_gone was released; stop working on it", "heartbeat")
	kbFails(t, env, exitFailure, "the gateway refused the complete of t_0000abcd: a complete needs a summary", "complete", "--summary", "refuse me")
	kbFails(t, withEnv(env, "HERALD_KANBAN_TASK", ""), exitUsage, "HERALD_KANBAN_TASK", "complete", "--summary", "s")
}
