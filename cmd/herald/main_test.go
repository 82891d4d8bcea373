package main

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// herald is one run of the program under test.
type herald struct {
	stdout, stderr *testkit.LogBuffer
	main           *Main
}

func newHerald(env map[string]string) *herald {
	h := &herald{stdout: &testkit.LogBuffer{}, stderr: &testkit.LogBuffer{}}
	h.main = &Main{Stdout: h.stdout, Stderr: h.stderr, Getenv: func(k string) string { return env[k] }}
	return h
}

func (h *herald) run(ctx context.Context, args ...string) int { return h.main.Run(ctx, args) }

func TestVersion(t *testing.T) {
	h := newHerald(nil)
	if code := h.run(context.Background(), "version"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	for _, want := range []string{"herald ", "commit ", runtime.Version()} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}

	h = newHerald(nil)
	if code := h.run(context.Background(), "version", "--json"); code != 0 {
		t.Fatalf("--json: exit %d, stderr %q", code, h.stderr)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(h.stdout.String()), &v); err != nil {
		t.Fatalf("--json output %q: %v", h.stdout, err)
	}
	if v.Version == "" || v.Commit == "" || v.Go != runtime.Version() {
		t.Errorf("--json gave %+v", v)
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"bench"}, {"config"}, {"help", "gateway"}, {"config", "check", "--help"}} {
		h := newHerald(nil)
		if code := h.run(context.Background(), args...); code != 0 {
			t.Errorf("herald %v: exit %d, stderr %q", args, code, h.stderr)
		}
		if !strings.Contains(h.stdout.String(), "Usage:") {
			t.Errorf("herald %v printed no usage: %q", args, h.stdout)
		}
	}
}

// herald bench lists the MCP bench, not the server it starts, which is
// no command for a person.
func TestBenchHelpHidesTheMCPServer(t *testing.T) {
	h := newHerald(nil)
	if code := h.run(context.Background(), "bench", "--help"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	if !strings.Contains(out, "\n  mcp ") || strings.Contains(out, "mcp-server") {
		t.Errorf("herald bench --help: %q", out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	tests := []struct {
		desc string
		args []string
		want string // in the error line
	}{
		{desc: "unknown command", args: []string{"gatewya"}, want: `did you mean "gateway"`},
		{desc: "unknown flag", args: []string{"--nope"}, want: "unknown flag"},
		{desc: "unknown subcommand flag", args: []string{"gateway", "--bogus"}, want: "unknown flag"},
		{desc: "extra argument", args: []string{"version", "extra"}, want: "unknown command"},
		{desc: "unknown bench", args: []string{"bench", "disk"}, want: "unknown command"},
		{desc: "bad store", args: []string{"bench", "queue", "--store", "mysql"}, want: "want sqlite or redis"},
		{desc: "bad number", args: []string{"bench", "queue", "--entries", "many"}, want: "invalid argument"},
		{desc: "zero entries", args: []string{"bench", "queue", "--entries", "0"}, want: "at least 1"},
		{desc: "no photos", args: []string{"bench", "media", "--photos", "0"}, want: "--photos and --bytes must be positive"},
		{desc: "no MCP calls", args: []string{"bench", "mcp", "--calls", "0"}, want: "--calls must be positive"},
		{desc: "unknown config verb", args: []string{"config", "chek"}, want: `did you mean "check"`},
		{desc: "bad log level", args: []string{"gateway", "--log-level", "loud"}, want: "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h := newHerald(nil)
			code := h.run(context.Background(), tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, h.stderr)
			}
			first, _, _ := strings.Cut(h.stderr.String(), "\n")
			if !strings.HasPrefix(first, "herald: ") || !strings.Contains(first, tt.want) {
				t.Errorf("first stderr line %q, want herald: …%s…", first, tt.want)
			}
		})
	}
}

func TestBenchQueueJSON(t *testing.T) {
	h := newHerald(nil)
	code := h.run(context.Background(), "bench", "queue", "--store", "sqlite", "--entries", "20", "--conversations", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d; stderr %q", code, h.stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(h.stdout.String()), &got); err != nil {
		t.Fatalf("output %q is not one JSON object: %v", h.stdout, err)
	}
	for _, k := range []string{"entries_per_s", "raw_per_s", "ratio", "p50_ms", "p99_ms"} {
		if v, ok := got[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, got[k])
		}
	}
}
