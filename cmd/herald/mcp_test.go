package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit/mcpserver"
)

// mcpHome is a herald home whose config names a live MCP server (its
// handler wants the header the config expands from the environment), a
// server nothing listens on, and a disabled one.
func mcpHome(t *testing.T) map[string]string {
	t.Helper()
	h := mcpserver.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	home := t.TempDir()
	yaml := `mcp_servers:
  live:
    url: ` + srv.URL + `
    headers: {Authorization: "Bearer ${LIVE_TOKEN}"}
    tools: {exclude: ["slow", "grow"]}
  gone:
    url: http://127.0.0.1:1/mcp
    connect_timeout: 5s
  off:
    url: http://127.0.0.1:1/mcp
    enabled: false
`
	if err := os.WriteFile(filepath.Join(home, "herald.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"HERALD_HOME": home, "LIVE_TOKEN": "tok-1"}
}

func TestMCPList(t *testing.T) {
	env := mcpHome(t)
	h := newHerald(env)
	if code := h.run(context.Background(), "mcp", "list", "--json"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, h.stderr)
	}
	var got []struct {
		Name, Transport, State string
		Tools                  []string
		LastError              string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(h.stdout.String()), &got); err != nil {
		t.Fatalf("%v: %s", err, h.stdout)
	}
	if len(got) != 3 || got[0].Name != "gone" || got[1].Name != "live" || got[2].Name != "off" {
		t.Fatalf("servers = %+v", got)
	}
	if got[0].State != "failed" || got[0].LastError == "" {
		t.Errorf("gone = %+v, want failed with its error", got[0])
	}
	if got[1].State != "ready" || len(got[1].Tools) != 4 || got[1].Transport != "http" {
		t.Errorf("live = %+v, want ready with 4 tools", got[1])
	}
	if got[2].State != "disabled" {
		t.Errorf("off = %+v", got[2])
	}
}

func TestMCPTest(t *testing.T) {
	env := mcpHome(t)
	h := newHerald(env)
	if code := h.run(context.Background(), "mcp", "test", "live"); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	for _, want := range []string{"live (http): connect ", ", list ", "; 4 tools", "  mcp_live_echo"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	h = newHerald(env)
	if code := h.run(context.Background(), "mcp", "test", "nope"); code == 0 || !strings.Contains(h.stderr.String(), `no server "nope"`) {
		t.Errorf("an unknown server: exit %d, stderr %q", code, h.stderr)
	}
	env["LIVE_TOKEN"] = ""
	h = newHerald(env)
	if code := h.run(context.Background(), "mcp", "test", "live"); code == 0 || !strings.Contains(h.stderr.String(), "LIVE_TOKEN is not set") {
		t.Errorf("an unset header variable: exit %d, stderr %q", code, h.stderr)
	}
}
