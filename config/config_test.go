package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// envOf is a Lookup over a fixed environment.
func envOf(m map[string]string) config.Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// writeFile writes a config file into dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problemsOf extracts the Problems an error carries.
func problemsOf(t *testing.T, err error) config.Problems {
	t.Helper()
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v carries no Problems", err)
	}
	return ps
}

func TestDefault(t *testing.T) {
	want := config.Config{
		Home: "~/.herald",
		Store: config.Store{
			Backend:       "sqlite",
			RedisURL:      "redis://127.0.0.1:6379/0",
			RedisPrefix:   "herald:",
			MaxEntryBytes: 256 << 10,
			DedupeWindow:  168 * time.Hour,
			LeaseTTL:      30 * time.Second,
		},
		HTTP:    config.HTTP{Addr: "127.0.0.1:8642", MaxBodyBytes: 4 << 20},
		Model:   config.Model{BaseURL: "http://127.0.0.1:11434/v1", Timeout: 5 * time.Minute, MaxRetries: 3, MaxIterations: 90, HistoryBudget: 200_000},
		Workers: config.Workers{Turns: 64, Deliveries: 8, ShutdownGrace: 20 * time.Second, DeliveryDrain: 5 * time.Second},
		Display: config.Display{BusyInputMode: "interrupt"},
		Platforms: config.Platforms{
			GroupSessions: "auto",
			Telegram:      config.Telegram{Mode: "polling", GroupTrigger: "mention"},
			Discord:       config.Discord{GroupTrigger: "mention"},
		},
	}
	got := config.Default()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Default() mismatch (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v, want nil", err)
	}
	// The store limits come from the sessions package, so the two cannot
	// drift apart.
	wantLim := sessions.Limits{MaxEntryBytes: sessions.DefaultMaxEntryBytes, DedupeWindow: sessions.DefaultDedupeWindow}
	if diff := cmp.Diff(wantLim, got.Store.Limits()); diff != "" {
		t.Errorf("Store.Limits() mismatch (-want +got):\n%s", diff)
	}
}

func TestSQLitePath(t *testing.T) {
	tests := []struct {
		desc string
		home string
		path string
		want string
	}{
		{desc: "empty means herald.db in home", home: "/data", path: "", want: "/data/herald.db"},
		{desc: "relative is inside home", home: "/data", path: "db/main.db", want: "/data/db/main.db"},
		{desc: "absolute is kept", home: "/data", path: "/var/lib/herald.db", want: "/var/lib/herald.db"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := config.Default()
			c.Home, c.Store.SQLitePath = tc.home, tc.path
			if got := c.SQLitePath(); got != tc.want {
				t.Errorf("SQLitePath() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		desc string
		addr string
		want bool
	}{
		{desc: "ipv4 loopback", addr: "127.0.0.1:8642", want: true},
		{desc: "other 127/8 address", addr: "127.0.0.2:80", want: true},
		{desc: "ipv6 loopback", addr: "[::1]:8642", want: true},
		{desc: "localhost", addr: "localhost:8642", want: true},
		{desc: "every interface", addr: ":8642", want: false},
		{desc: "unspecified ipv4", addr: "0.0.0.0:8642", want: false},
		{desc: "public address", addr: "192.0.2.1:8642", want: false},
		{desc: "host name", addr: "herald.example:8642", want: false},
		{desc: "malformed", addr: "127.0.0.1", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := config.Default()
			c.HTTP.Addr = tc.addr
			if got := c.IsLoopback(); got != tc.want {
				t.Errorf("IsLoopback(%q) = %v, want %v", tc.addr, got, tc.want)
			}
		})
	}
}
