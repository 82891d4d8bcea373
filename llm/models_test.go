package llm_test

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// A model's pools read as one list of keys, each named by its model, and
// a revival names the models whose pool held the key.
func TestModelPoolsKeysAndRevive(t *testing.T) {
	store := llm.NewMemoryPoolStore(clock.NewFake(t0))
	ctx := context.Background()
	var ps llm.ModelPools
	for _, m := range []struct{ model, url, key string }{
		{"main", "https://a.example/v1", "sk-main"},
		{"fb", "https://b.example/v1", "sk-fb"},
	} {
		p, err := llm.NewPool(llm.PoolOptions{Name: llm.PoolName(m.url), Credentials: []llm.Credential{{Key: m.key}}, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, llm.ModelPool{Model: llm.ProviderName(m.model, m.url), Pool: p})
	}
	keys, err := ps.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Model != "main@a.example" || keys[0].Pool != "a.example" || keys[1].Model != "fb@b.example" || keys[1].ID != llm.KeyID("sk-fb") {
		t.Errorf("Keys = %+v, want main's key then the fallback's", keys)
	}
	if err := store.MarkKey(ctx, "b.example", llm.KeyState{ID: llm.KeyID("sk-fb"), Reason: llm.ClassAuth, DeadFor: ps[1].Pool.Generation()}); err != nil {
		t.Fatal(err)
	}
	if models, err := ps.Revive(ctx, llm.KeyID("sk-fb")); err != nil || len(models) != 1 || models[0] != "fb@b.example" {
		t.Errorf("Revive = %v, %v; want the fallback's model", models, err)
	}
	if _, err := ps.Revive(ctx, "k_nope"); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("reviving a key no pool has = %v, want not found", err)
	}
	if got := llm.ProviderName("", ""); got != "(no model)@model" {
		t.Errorf("ProviderName of nothing = %q", got)
	}
}
