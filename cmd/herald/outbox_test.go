package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
)

// TestOutboxCommands lists, on each backend, a pending message and a dead
// letter that another handle of the store wrote, as text and as JSON, and
// sends the dead letter again.
func TestOutboxCommands(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"HERALD_HOME": t.TempDir()}
			if backend == "redis" {
				r := testkit.StartRedis(t)
				env["HERALD_STORE"], env["REDIS_URL"], env["HERALD_REDIS_PREFIX"] = "redis", r.URL(), r.Prefix()
			}
			ctx := context.Background()
			pendingID, deadID := seedOutbox(t, env)

			h := newHerald(env)
			if code := h.run(ctx, "outbox", "pending", "--json"); code != 0 {
				t.Fatalf("outbox pending --json: exit %d, stderr %q", code, h.stderr)
			}
			pending := outboxRows(t, h.stdout.String())
			if len(pending) != 1 || pending[0].ID != pendingID || pending[0].Text != "still to go" || pending[0].Target != "telegram:100" || pending[0].CreatedAt.IsZero() {
				t.Errorf("pending = %+v, want the one message %s", pending, pendingID)
			}

			h = newHerald(env)
			if code := h.run(ctx, "outbox", "dead"); code != 0 {
				t.Fatalf("outbox dead: exit %d, stderr %q", code, h.stderr)
			}
			if out := h.stdout.String(); !strings.Contains(out, deadID) || !strings.Contains(out, "400 chat not found") || !strings.Contains(out, "LAST ERROR") ||
				!strings.Contains(out, "[report.pdf] given up on") {
				t.Errorf("outbox dead printed %q, want %s with its file and its reason under a header", out, deadID)
			}

			h = newHerald(env)
			if code := h.run(ctx, "outbox", "retry", deadID); code != 0 {
				t.Fatalf("outbox retry: exit %d, stderr %q", code, h.stderr)
			}
			h = newHerald(env)
			if code := h.run(ctx, "outbox", "pending", "--json", "--limit", "0"); code != 0 {
				t.Fatalf("outbox pending after the retry: exit %d, stderr %q", code, h.stderr)
			}
			pending = outboxRows(t, h.stdout.String())
			if len(pending) != 2 || pending[1].ID != deadID || pending[1].Attempts != 0 {
				t.Errorf("pending after the retry = %+v, want %s back with no attempts", pending, deadID)
			} else if f := pending[1].Files; len(f) != 1 || f[0] != (outboxFile{Name: "report.pdf", MIME: "application/pdf", Size: 9, Blob: "out-1"}) {
				t.Errorf("the retried message's files = %+v, want report.pdf with its blob", f)
			}
			h = newHerald(env)
			if code := h.run(ctx, "outbox", "dead"); code != 0 || !strings.Contains(h.stdout.String(), "no dead letters") {
				t.Errorf("outbox dead after the retry: exit %d, printed %q", code, h.stdout)
			}

			h = newHerald(env)
			if code := h.run(ctx, "outbox", "retry", deadID); code != 1 || !strings.Contains(h.stderr.String(), "no dead letter") {
				t.Errorf("a second retry: exit %d, stderr %q; want 1 naming the missing dead letter", code, h.stderr)
			}
		})
	}
}

func TestOutboxUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"outbox", "retry"},
		{"outbox", "retry", "a", "b"},
		{"outbox", "pending", "--limit", "-1"},
		{"outbox", "pending", "extra"},
		{"outbox", "sent"},
	} {
		h := newHerald(map[string]string{"HERALD_HOME": t.TempDir()})
		if code := h.run(context.Background(), args...); code != exitUsage {
			t.Errorf("herald %v: exit %d, stderr %q; want %d", args, code, h.stderr, exitUsage)
		}
	}
}

// seedOutbox enqueues two messages in the store env names and
// dead-letters the second, as a delivery worker would.
func seedOutbox(t *testing.T, env map[string]string) (pendingID, deadID string) {
	t.Helper()
	ctx := context.Background()
	o := openTestStore(t, env).Outbox()
	var err error
	to := outbox.Target{Platform: "telegram", Chat: "100"}
	if pendingID, _, err = o.Enqueue(ctx, outbox.Message{Target: to, Text: "still to go", Kind: "reply"}); err != nil {
		t.Fatal(err)
	}
	dead := outbox.Message{Target: outbox.Target{Platform: "slack", Chat: "C1"}, Text: "given up on", Kind: "file",
		Files: []outbox.File{{Name: "report.pdf", MIME: "application/pdf", Size: 9, Blob: "out-1"}}}
	if deadID, _, err = o.Enqueue(ctx, dead); err != nil {
		t.Fatal(err)
	}
	cs, err := o.Claim(ctx, "d1", []string{"slack"}, 10, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v; want the slack message", cs, err)
	}
	if err := o.Dead(ctx, cs[0], "400 chat not found"); err != nil {
		t.Fatal(err)
	}
	return pendingID, deadID
}

func outboxRows(t *testing.T, out string) []outboxRow {
	t.Helper()
	var rows []outboxRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	return rows
}
