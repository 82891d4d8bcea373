package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/signals"
)

// signalKeysMarked tells every gateway on the store that a key of the
// pool its Text names was marked (cooling, dead) or revived: their
// pools of that name read the store at their next request instead of
// going on with the view they hold (llm.Pool.Forget).
const signalKeysMarked signals.Kind = "model.keys_marked"

// signalKeysConv is the conversation the signal is filed under: a mark
// is the pool's, no conversation's.
const signalKeysConv = "herald:model"

// keyPools are the key pools this gateway made: told of other gateways'
// marks, and flushed of their counted uses as it stops.
type keyPools struct {
	signals signals.Store
	log     *slog.Logger

	mu  sync.Mutex
	all []*llm.Pool
}

// add keeps p and returns it.
func (k *keyPools) add(p *llm.Pool) *llm.Pool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.all = append(k.all, p)
	return p
}

// marked tells the other gateways that pool's keys changed in the store
// (llm.PoolOptions.Marked).
func (k *keyPools) marked(ctx context.Context, pool string) {
	if k.signals == nil {
		return
	}
	err := k.signals.Signal(ctx, signals.Signal{Conv: signalKeysConv, Kind: signalKeysMarked, Text: pool})
	if err != nil && ctx.Err() == nil {
		k.log.Warn("telling the other gateways of a key's mark failed; they see it within a minute", "pool", pool, "err", err)
	}
}

// HandleSignal makes the pools a mark names read the store again.
func (k *keyPools) HandleSignal(s signals.Signal) {
	if s.Kind != signalKeysMarked {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.all {
		if p.Name() == s.Text {
			p.Forget()
		}
	}
	k.log.Debug("a key of the pool was marked or revived; its next request reads the store", "pool", s.Text)
}

// flush writes the uses the pools counted and did not write yet.
func (k *keyPools) flush(ctx context.Context) {
	k.mu.Lock()
	all := append([]*llm.Pool(nil), k.all...)
	k.mu.Unlock()
	for _, p := range all {
		p.Flush(ctx)
	}
}

// newPool is the pool of keys of the model server at baseURL, over the
// gateway's store, for a model with no fallback after it; setting names
// where its key is configured.
func (g *Gateway) newPool(baseURL string, keys []config.Credential, setting string) (*llm.Pool, error) {
	p, err := newPool(g.cfg.Model, poolKeys{baseURL: baseURL, keys: keys, setting: setting}, g.db.Pools(), g.clock, g.log.With("part", "model"), g.metrics, g.keyPools.marked)
	if err != nil {
		return nil, err
	}
	return g.keyPools.add(p), nil
}

// poolKeys are the keys of one model's server: where they are
// configured (setting, for what a person is told to check), and whether
// a fallback model comes after it (a pool of one key is marked only then).
type poolKeys struct {
	baseURL  string
	keys     []config.Credential
	setting  string
	fallback bool
}

// newPool is the pool of keys of the model server at baseURL, named by
// its host in the store: clients of one server share its keys' states,
// whichever model they ask for.
func newPool(cfg config.Model, pk poolKeys, store llm.PoolStore, clk clock.Clock, log *slog.Logger, obs llm.Observer, marked func(context.Context, string)) (*llm.Pool, error) {
	creds := make([]llm.Credential, len(pk.keys))
	for i, k := range pk.keys {
		creds[i] = llm.Credential{Key: k.Key, Priority: k.Priority, Label: k.Label}
	}
	return llm.NewPool(llm.PoolOptions{
		Name:        llm.PoolName(pk.baseURL),
		Credentials: creds,
		Strategy:    cfg.Strategy,
		Cooldowns:   llm.Cooldowns(cfg.Cooldowns),
		Store:       store,
		Clock:       clk,
		Logger:      log,
		Observer:    obs,
		Fallback:    pk.fallback,
		Setting:     pk.setting,
		Marked:      marked,
	})
}

// keySetting is where keys are configured, under the config key prefix
// (model, model.fallbacks[0], delegation, …) and, when there is one, its
// environment variable: the list (credentials) when it holds keys, else
// the one key (api_key).
func keySetting(prefix string, creds []config.Credential, env string) string {
	name := prefix + ".api_key"
	if len(creds) > 0 {
		name = prefix + ".credentials"
	}
	if env == "" {
		return name
	}
	return env + " / " + name
}

// ModelPools are the key pools of cfg's model and of its fallbacks, in
// that order, over store, as the gateway makes them.
func ModelPools(cfg config.Model, store llm.PoolStore) (llm.ModelPools, error) {
	return modelPools(cfg, store, nil, nil, nil, nil)
}

func modelPools(cfg config.Model, store llm.PoolStore, clk clock.Clock, log *slog.Logger, obs llm.Observer, marked func(context.Context, string)) (llm.ModelPools, error) {
	env := "HERALD_MODEL_API_KEY"
	if len(cfg.Credentials) > 0 {
		env = "HERALD_MODEL_API_KEYS"
	}
	main, err := newPool(cfg, poolKeys{baseURL: cfg.BaseURL, keys: cfg.Keys(), setting: keySetting("model", cfg.Credentials, env), fallback: len(cfg.Fallbacks) > 0},
		store, clk, log, obs, marked)
	if err != nil {
		return nil, err
	}
	out := llm.ModelPools{{Model: llm.ProviderName(cfg.Name, cfg.BaseURL), Pool: main}}
	for i, fb := range cfg.Fallbacks {
		pk := poolKeys{baseURL: fb.BaseURL, keys: fb.Keys(), setting: keySetting(fmt.Sprintf("model.fallbacks[%d]", i), fb.Credentials, ""), fallback: i < len(cfg.Fallbacks)-1}
		p, err := newPool(cfg, pk, store, clk, log, obs, marked)
		if err != nil {
			return nil, fmt.Errorf("model.fallbacks[%d]: %w", i, err)
		}
		out = append(out, llm.ModelPool{Model: llm.ProviderName(fb.Model, fb.BaseURL), Pool: p})
	}
	return out, nil
}

// modelKeys are the keys of the model this gateway runs on; none with
// Options.Model.
func (g *Gateway) modelKeys(ctx context.Context) ([]llm.ModelKey, error) {
	return g.models.pools.Keys(ctx)
}

// reviveKey clears the marks of key id of this gateway's model; none
// with Options.Model.
func (g *Gateway) reviveKey(ctx context.Context, id string) ([]string, error) {
	return g.models.pools.Revive(ctx, id)
}
