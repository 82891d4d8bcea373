package llm

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
)

// ModelPool is the key pool of one model the config names.
type ModelPool struct {
	Model string // model@host (ProviderName)
	Pool  *Pool
}

// ModelPools are the key pools of a model and of its fallbacks, in that
// order: what `herald model keys` and the local API read and revive.
type ModelPools []ModelPool

// Keys reads the state of every key of ps, as every process on the
// store sees it: the model's keys, then each fallback's, each masked.
func (ps ModelPools) Keys(ctx context.Context) ([]ModelKey, error) {
	keys := []ModelKey{}
	for _, p := range ps {
		st, err := p.Pool.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the keys of %s: %w", p.Model, err)
		}
		for _, s := range st {
			keys = append(keys, ModelKey{Model: p.Model, Pool: p.Pool.Name(), KeyStatus: s})
		}
	}
	return keys, nil
}

// Revive clears the dead or cooling mark of key id (a KeyID) in each of
// ps that holds it, for every process on the store, and returns the
// models whose pool it cleared it in, those cleared before a failure
// included. Errors: NotFound when none holds it; the store's.
func (ps ModelPools) Revive(ctx context.Context, id string) ([]string, error) {
	pools := make([]*Pool, len(ps))
	for i, p := range ps {
		pools[i] = p.Pool
	}
	revived, err := Revive(ctx, pools, id)
	var models []string
	for _, p := range ps {
		if slices.Contains(revived, p.Pool) {
			models = append(models, p.Model)
		}
	}
	return models, err
}

// PoolName is the store's name of the key pool of the model server at
// baseURL: its host, or "model" when it has none (no model configured).
// Clients of one server share its keys' states, whichever model they ask
// for.
func PoolName(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "model"
	}
	return u.Host
}

// ProviderName is how logs and /status name a model at baseURL:
// model@host.
func ProviderName(model, baseURL string) string {
	return cmp.Or(model, "(no model)") + "@" + PoolName(baseURL)
}
