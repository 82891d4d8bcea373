package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheckPrintsTheMaskedConfig(t *testing.T) {
	const secret = "sk-check-secret-31415"
	home := t.TempDir()
	h := newHerald(map[string]string{"HERALD_HOME": home, "HERALD_MODEL_API_KEY": secret, "HERALD_STORE": "redis", "REDIS_URL": "redis://:" + secret + "@cache:6379/0"})
	if code := h.run(context.Background(), "config", "check"); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	if strings.Contains(out, secret) {
		t.Errorf("a secret was printed:\n%s", out)
	}
	for _, want := range []string{"# no config file", "backend: redis", "api_key: '****'", "redis://:****@cache:6379/0", "sqlite_path: " + filepath.Join(home, "herald.db")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if h.stderr.String() != "" {
		t.Errorf("stderr %q for a good config", h.stderr)
	}
}

func TestConfigCheckNamesEveryBadKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, file, "store:\n  backend: mongo\nworkers:\n  turns: -1\nmodle:\n  name: x\n")
	h := newHerald(map[string]string{"HERALD_HOME": t.TempDir(), "HERALD_HTTP_ADDR": "0.0.0.0:8642"})
	if code := h.run(context.Background(), "config", "check", "--config", file); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, h.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(h.stderr.String(), "\n"), "\n")
	keys := []string{"store.backend", "workers.turns", "modle", "http.api_key"}
	if len(lines) != len(keys) {
		t.Errorf("stderr has %d lines, want one per problem (%d):\n%s", len(lines), len(keys), h.stderr)
	}
	for _, k := range keys {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, "herald: config: ") && strings.Contains(l, k) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line names %s:\n%s", k, h.stderr)
		}
	}
	if !strings.Contains(h.stdout.String(), "# config file: "+file) {
		t.Errorf("the effective config is not printed beside the problems:\n%s", h.stdout)
	}
}

func TestConfigCheckJSON(t *testing.T) {
	h := newHerald(map[string]string{"HERALD_HOME": t.TempDir(), "HERALD_STORE": "mongo", "HERALD_API_KEY": "json-secret-27182"})
	if code := h.run(context.Background(), "config", "check", "--json"); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, h.stderr)
	}
	var res checkResult
	if err := json.Unmarshal([]byte(h.stdout.String()), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, h.stdout)
	}
	if res.OK || len(res.Problems) != 1 || res.Problems[0].Key != "store.backend" {
		t.Errorf("got ok %v, problems %+v", res.OK, res.Problems)
	}
	httpCfg, _ := res.Config["http"].(map[string]any)
	if httpCfg["api_key"] != "****" {
		t.Errorf("http.api_key = %v, want masked", httpCfg["api_key"])
	}
	store, _ := res.Config["store"].(map[string]any)
	if store["lease_ttl"] != "30s" {
		t.Errorf("store.lease_ttl = %v, want 30s", store["lease_ttl"])
	}
	if strings.Contains(h.stdout.String(), "json-secret-27182") {
		t.Error("a secret was printed")
	}

	h = newHerald(map[string]string{"HERALD_HOME": t.TempDir()})
	if code := h.run(context.Background(), "config", "check", "--json"); code != 0 {
		t.Fatalf("good config: exit %d; stderr %q", code, h.stderr)
	}
	if err := json.Unmarshal([]byte(h.stdout.String()), &res); err != nil || !res.OK || len(res.Problems) != 0 {
		t.Errorf("good config: %+v, %v", res, err)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	h := newHerald(map[string]string{"HERALD_CONFIG": "/nonexistent/h.yaml"})
	if code := h.run(context.Background(), "config", "check"); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if got := h.stderr.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "/nonexistent/h.yaml does not exist") {
		t.Errorf("stderr %q, want one line naming the file", got)
	}
}
