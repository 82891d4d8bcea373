package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
)

// TestModelKeys lists, on each backend, the keys of the model's pool
// with the state another handle of the store gave them, masked.
func TestModelKeys(t *testing.T) {
	const first, second = "sk-first-key-secret-0001", "sk-second-key-secret-0002"
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := map[string]string{"HERALD_HOME": t.TempDir(), "HERALD_MODEL": "m", "HERALD_MODEL_API_KEYS": first + "," + second}
			if backend == "redis" {
				r := testkit.StartRedis(t)
				env["HERALD_STORE"], env["REDIS_URL"], env["HERALD_REDIS_PREFIX"] = "redis", r.URL(), r.Prefix()
			}
			cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			db, err := gateway.OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				t.Fatal(err)
			}
			pools, err := gateway.ModelPools(cfg.Model, db.Pools())
			if err != nil {
				t.Fatal(err)
			}
			until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			name := pools[0].Pool.Name()
			if err := db.Pools().MarkKey(ctx, name, llm.KeyState{ID: llm.KeyID(first), CoolingUntil: until, Reason: llm.ClassPayment}); err != nil {
				t.Fatal(err)
			}
			if err := db.Pools().UseKey(ctx, name, llm.KeyID(second), ""); err != nil {
				t.Fatal(err)
			}
			_ = db.Close()

			h := newHerald(env)
			if code := h.run(ctx, "model", "keys", "--json"); code != 0 {
				t.Fatalf("model keys --json: exit %d, stderr %q", code, h.stderr)
			}
			var rows []struct {
				ID, Key, Status, Reason string
				CoolingUntil            time.Time `json:"cooling_until"`
				Uses                    int
			}
			if err := json.Unmarshal([]byte(h.stdout.String()), &rows); err != nil {
				t.Fatalf("output %q: %v", h.stdout, err)
			}
			if len(rows) != 2 || rows[0].Status != "cooling" || !rows[0].CoolingUntil.Equal(until) || rows[0].Reason != "payment" ||
				rows[1].Status != "ok" || rows[1].Uses != 1 || rows[0].Key != "****0001" || rows[0].ID != llm.KeyID(first) {
				t.Errorf("keys = %+v", rows)
			}
			h = newHerald(env)
			if code := h.run(ctx, "model", "keys"); code != 0 {
				t.Fatalf("model keys: exit %d, stderr %q", code, h.stderr)
			}
			out := h.stdout.String()
			if !strings.Contains(out, "cooling") || !strings.Contains(out, "m@127.0.0.1:11434") {
				t.Errorf("model keys printed %q", out)
			}
			if strings.Contains(out, first) || strings.Contains(out, "secret") {
				t.Errorf("model keys printed a key: %q", out)
			}
			// A revival clears the mark for every gateway on the store; an
			// unknown id is refused.
			h = newHerald(env)
			if code := h.run(ctx, "model", "keys", "--revive", llm.KeyID(first)); code != 0 || !strings.Contains(h.stdout.String(), "revived key "+llm.KeyID(first)) {
				t.Fatalf("model keys --revive: exit %d, stdout %q, stderr %q", code, h.stdout, h.stderr)
			}
			h = newHerald(env)
			if code := h.run(ctx, "model", "keys", "--json"); code != 0 || strings.Contains(h.stdout.String(), "cooling") {
				t.Errorf("after reviving: exit %d, keys %s", code, h.stdout)
			}
			h = newHerald(env)
			if code := h.run(ctx, "model", "keys", "--revive", "k_000000000000"); code == 0 || !strings.Contains(h.stderr.String(), "no key of id") {
				t.Errorf("reviving an unknown id: exit %d, stderr %q", code, h.stderr)
			}
		})
	}
}
