package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// syncBuffer is a bytes.Buffer safe to read while herald writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// herald is one run of the program under test.
type herald struct {
	stdout, stderr *syncBuffer
	main           *Main
}

func newHerald(env map[string]string) *herald {
	h := &herald{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
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
	for _, args := range [][]string{{}, {"--help"}, {"bench"}, {"help", "gateway"}} {
		h := newHerald(nil)
		if code := h.run(context.Background(), args...); code != 0 {
			t.Errorf("herald %v: exit %d, stderr %q", args, code, h.stderr)
		}
		if !strings.Contains(h.stdout.String(), "Usage:") {
			t.Errorf("herald %v printed no usage: %q", args, h.stdout)
		}
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

func TestGatewayOpensStoreAndStopsOnCancel(t *testing.T) {
	tests := []struct {
		desc  string
		env   func(t *testing.T) map[string]string
		check func(t *testing.T, env map[string]string)
	}{
		{
			desc: "sqlite under HERALD_HOME",
			env: func(t *testing.T) map[string]string {
				return map[string]string{"HERALD_HOME": filepath.Join(t.TempDir(), "home")}
			},
			check: func(t *testing.T, env map[string]string) {
				if _, err := os.Stat(filepath.Join(env["HERALD_HOME"], "herald.db")); err != nil {
					t.Errorf("no SQLite file: %v", err)
				}
			},
		},
		{
			desc: "redis",
			env: func(t *testing.T) map[string]string {
				r := testkit.StartRedis(t)
				return map[string]string{"HERALD_STORE": "redis", "REDIS_URL": r.URL(), "HERALD_REDIS_PREFIX": r.Prefix()}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			env := tt.env(t)
			h := newHerald(env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			exit := make(chan int, 1)
			go func() { exit <- h.run(ctx, "gateway") }()

			waitFor(t, h.stderr, `"msg":"gateway ready"`, exit)
			cancel() // what SIGINT does in main
			select {
			case code := <-exit:
				if code != 0 {
					t.Fatalf("exit %d; stderr %q", code, h.stderr)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("gateway did not stop within 10s of its context ending; stderr %q", h.stderr)
			}
			if !strings.Contains(h.stderr.String(), `"msg":"gateway stopped"`) {
				t.Errorf("no stop logged: %q", h.stderr)
			}
			if tt.check != nil {
				tt.check(t, env)
			}
		})
	}
}

func waitFor(t *testing.T, buf *syncBuffer, want string, exit <-chan int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for !strings.Contains(buf.String(), want) {
		select {
		case code := <-exit:
			t.Fatalf("herald exited %d before logging %s; stderr %q", code, want, buf)
		case <-deadline:
			t.Fatalf("no %s within 15s; stderr %q", want, buf)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestGatewayFailsWithOneLine(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		want string
	}{
		{desc: "unknown backend", env: map[string]string{"HERALD_STORE": "mongo"}, want: "HERALD_STORE"},
		{desc: "bad redis url", env: map[string]string{"HERALD_STORE": "redis", "REDIS_URL": "http://nope"}, want: "redis"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h := newHerald(tt.env)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if code := h.run(ctx, "gateway"); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, h.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(h.stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "herald: ") || !strings.Contains(lines[0], tt.want) {
				t.Errorf("stderr %q, want one herald: line naming %s", h.stderr, tt.want)
			}
		})
	}
}

func TestStoreSettingsFromEnv(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		want storeSettings
	}{
		{
			desc: "defaults",
			env:  map[string]string{"HOME": "/home/ada"},
			want: storeSettings{
				Backend: "sqlite", Home: "/home/ada/.herald", SQLitePath: "/home/ada/.herald/herald.db",
				RedisURL: "redis://127.0.0.1:6379/0", RedisPrefix: "herald:",
			},
		},
		{
			desc: "everything set",
			env: map[string]string{
				"HOME": "/home/ada", "HERALD_HOME": "/srv/herald", "HERALD_STORE": "redis",
				"REDIS_URL": "redis://cache:6380/2", "HERALD_REDIS_PREFIX": "h1:",
			},
			want: storeSettings{
				Backend: "redis", Home: "/srv/herald", SQLitePath: "/srv/herald/herald.db",
				RedisURL: "redis://cache:6380/2", RedisPrefix: "h1:",
			},
		},
		{
			desc: "unexpanded tilde",
			env:  map[string]string{"HOME": "/home/ada", "HERALD_HOME": "~/data/herald"},
			want: storeSettings{
				Backend: "sqlite", Home: "/home/ada/data/herald", SQLitePath: "/home/ada/data/herald/herald.db",
				RedisURL: "redis://127.0.0.1:6379/0", RedisPrefix: "herald:",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := storeSettingsFromEnv(func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestStoreSettingsHideRedisPassword(t *testing.T) {
	s := storeSettings{Backend: "redis", RedisURL: "redis://:hunter2@cache:6379/0"}
	if w := s.where(); strings.Contains(w, "hunter2") {
		t.Errorf("where() = %q shows the password", w)
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
