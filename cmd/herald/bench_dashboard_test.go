package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchDashboard(t *testing.T) {
	h := newHerald(nil)
	if code := h.run(context.Background(), "bench", "dashboard", "--loads", "1", "--changes", "2", "--temp-dir", t.TempDir(), "--json"); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	if !json.Valid([]byte(out)) {
		t.Fatalf("output is not one JSON object: %s", out)
	}
	for _, w := range []string{`"load":{"bytes":`, `"ref_load":`, `"change":{"changes":2`, `"ref_change":{"changes":2`} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestBenchDashboardUsage(t *testing.T) {
	for _, args := range [][]string{{"--store", "mysql"}, {"--loads", "0"}, {"--changes", "-1"}} {
		h := newHerald(nil)
		if code := h.run(context.Background(), append([]string{"bench", "dashboard"}, args...)...); code != 2 {
			t.Errorf("bench dashboard %v: exit %d, want 2; stderr %q", args, code, h.stderr)
		}
	}
	h := newHerald(nil)
	code := h.run(context.Background(), "bench", "dashboard", "--chromium", "/nonexistent/chromium", "--temp-dir", t.TempDir())
	if code != 1 || !strings.Contains(h.stderr.String(), "chromium") {
		t.Errorf("bench dashboard with a missing browser: exit %d, want 1; stderr %q", code, h.stderr)
	}
}
