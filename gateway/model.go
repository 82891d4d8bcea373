package gateway

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/llm"
)

// modelParts are the main model's key pool and the client a request is
// asked of: the chain of the main model, then model.fallbacks in order;
// or Options.Model, with no pool and no fallbacks.
type modelParts struct {
	pool      *llm.Pool
	pools     []ModelPool // the main model's and the fallbacks', in order
	client    llm.Client
	fallbacks []llm.Provider // the chain's after the main model
}

// buildModel makes the model clients, each through a pool of its keys
// kept in the store, so every process on it shares the keys' cooling.
func (g *Gateway) buildModel() (*modelParts, error) {
	if g.opts.Model != nil {
		return &modelParts{client: g.opts.Model}, nil
	}
	cfg := g.cfg.Model
	pools, err := modelPools(cfg, g.db.Pools(), g.clock, g.log.With("part", "model"), g.metrics, g.keyPools.marked)
	if err != nil {
		return nil, err
	}
	for _, p := range pools {
		g.keyPools.add(p.Pool)
	}
	type endpoint struct {
		mode, baseURL, model string
		overrides            map[string]any
	}
	endpoints := []endpoint{{cfg.APIMode, cfg.BaseURL, cfg.Name, cfg.RequestOverrides}}
	for _, fb := range cfg.Fallbacks {
		endpoints = append(endpoints, endpoint{fb.APIMode, fb.BaseURL, fb.Model, nil})
	}
	providers := make([]llm.Provider, len(endpoints))
	for i, e := range endpoints {
		c, err := newModelClient(e.mode, g.modelOptions(e.baseURL, e.model, pools[i].Pool, e.overrides))
		if err != nil {
			return nil, err
		}
		providers[i] = llm.Provider{Name: pools[i].Model, Model: e.model, Client: c}
	}
	chain := llm.NewChain(g.clock, g.log.With("part", "model"), providers...).Observe(g.metrics)
	return &modelParts{pool: pools[0].Pool, pools: pools, client: chain, fallbacks: providers[1:]}, nil
}

// modelOptions are the client options of a model at baseURL whose keys
// pool gives.
func (g *Gateway) modelOptions(baseURL, model string, pool *llm.Pool, overrides map[string]any) llm.OpenAIOptions {
	return llm.OpenAIOptions{
		BaseURL:   baseURL,
		Model:     model,
		Timeout:   g.cfg.Model.Timeout,
		MaxTokens: g.cfg.Model.MaxTokens,
		// The config's 0 is no retries; the options' 0 is the default.
		MaxRetries: cmp.Or(g.cfg.Model.MaxRetries, -1),
		Clock:      g.clock,
		Pool:       pool,
		// Explicit keys win over herald's (model, messages, tools and
		// stream are refused by the config's check).
		RequestOverrides: overrides,
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
		Name:        poolName(pk.baseURL),
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

// ModelPool is the key pool of one model the config names.
type ModelPool struct {
	Model string // model@host
	Pool  *llm.Pool
}

// ModelPools are the key pools of cfg's model and of its fallbacks, in
// that order, over store, as the gateway makes them.
func ModelPools(cfg config.Model, store llm.PoolStore) ([]ModelPool, error) {
	return modelPools(cfg, store, nil, nil, nil, nil)
}

func modelPools(cfg config.Model, store llm.PoolStore, clk clock.Clock, log *slog.Logger, obs llm.Observer, marked func(context.Context, string)) ([]ModelPool, error) {
	env := "HERALD_MODEL_API_KEY"
	if len(cfg.Credentials) > 0 {
		env = "HERALD_MODEL_API_KEYS"
	}
	main, err := newPool(cfg, poolKeys{baseURL: cfg.BaseURL, keys: cfg.Keys(), setting: keySetting("model", cfg.Credentials, env), fallback: len(cfg.Fallbacks) > 0},
		store, clk, log, obs, marked)
	if err != nil {
		return nil, err
	}
	out := []ModelPool{{Model: providerName(cfg.Name, cfg.BaseURL), Pool: main}}
	for i, fb := range cfg.Fallbacks {
		pk := poolKeys{baseURL: fb.BaseURL, keys: fb.Keys(), setting: keySetting(fmt.Sprintf("model.fallbacks[%d]", i), fb.Credentials, ""), fallback: i < len(cfg.Fallbacks)-1}
		p, err := newPool(cfg, pk, store, clk, log, obs, marked)
		if err != nil {
			return nil, fmt.Errorf("model.fallbacks[%d]: %w", i, err)
		}
		out = append(out, ModelPool{Model: providerName(fb.Model, fb.BaseURL), Pool: p})
	}
	return out, nil
}

// modelKeys are the keys of the model this gateway runs on; none with
// Options.Model.
func (g *Gateway) modelKeys(ctx context.Context) ([]llm.ModelKey, error) {
	return ModelKeys(ctx, g.models.pools)
}

// ModelKeys reads the state of every key of pools, as every gateway on
// the store sees it: the model's keys, then each fallback's, each
// masked.
func ModelKeys(ctx context.Context, pools []ModelPool) ([]llm.ModelKey, error) {
	keys := []llm.ModelKey{}
	for _, p := range pools {
		st, err := p.Pool.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the keys of %s: %w", p.Model, err)
		}
		for _, s := range st {
			keys = append(keys, llm.ModelKey{Model: p.Model, Pool: p.Pool.Name(), KeyStatus: s})
		}
	}
	return keys, nil
}

// reviveKey clears the marks of key id of this gateway's model; none
// with Options.Model.
func (g *Gateway) reviveKey(ctx context.Context, id string) ([]string, error) {
	return ReviveKey(ctx, g.models.pools, id)
}

// ReviveKey clears the dead or cooling mark of key id (an llm.KeyID) in
// each of pools that holds it, for every gateway on the store, and
// returns the models whose pool it cleared it in, those cleared before
// a failure included. Errors: NotFound when none holds it; the store's.
func ReviveKey(ctx context.Context, pools []ModelPool, id string) ([]string, error) {
	ps := make([]*llm.Pool, len(pools))
	for i, p := range pools {
		ps[i] = p.Pool
	}
	revived, err := llm.Revive(ctx, ps, id)
	var models []string
	for _, p := range pools {
		if slices.Contains(revived, p.Pool) {
			models = append(models, p.Model)
		}
	}
	return models, err
}

// poolName is the store's name of the pool of a server: its host, or
// "model" when it has none (no model configured).
func poolName(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "model"
	}
	return u.Host
}

// providerName is how logs and /status name a model: model@host.
func providerName(model, baseURL string) string {
	return cmp.Or(model, "(no model)") + "@" + poolName(baseURL)
}

// auxClient is the model client of settings other than the main model's
// (delegation.*, auxiliary.review.*): fallback when they set nothing or
// Options gave the model client, else a client of their own, with what they leave empty taken from the
// main model (the main key goes only to the main endpoint) and overrides
// set in every request's body. One on the main endpoint with its keys
// (settings that name only a model, say) shares the main pool and falls
// back like the main model, to model.fallbacks in order; one on an
// endpoint of its own has neither: its failure is its own. setting names
// where ep's key is configured, for what a person is told of a refused key.
func (g *Gateway) auxClient(ep config.AuxModel, setting string, overrides map[string]any, fallback llm.Client) (llm.Client, error) {
	if g.opts.Model != nil || ep == (config.AuxModel{}) && len(overrides) == 0 {
		return fallback, nil
	}
	ep = ep.Fallback(g.cfg.Model)
	// The main model's endpoint with its keys is the main pool: children
	// and workers share its keys' state with the turns.
	pool := g.models.pool
	if ep.BaseURL != g.cfg.Model.BaseURL || ep.APIKey != g.cfg.Model.APIKey {
		var err error
		if pool, err = g.newPool(ep.BaseURL, config.Model{APIKey: ep.APIKey}.Keys(), setting); err != nil {
			return nil, err
		}
	}
	c, err := newModelClient(ep.APIMode, g.modelOptions(ep.BaseURL, ep.Model, pool, overrides))
	if err != nil {
		return nil, err
	}
	if pool == g.models.pool && len(g.models.fallbacks) > 0 {
		first := llm.Provider{Name: providerName(ep.Model, ep.BaseURL), Model: ep.Model, Client: c}
		c = llm.NewChain(g.clock, g.log.With("part", "model"), append([]llm.Provider{first}, g.models.fallbacks...)...).Observe(g.metrics)
	}
	return traceModel(g.metrics.TimeModel(c, ep.Model), ep.Model), nil
}

// newModelClient is the client of the API the model's server at
// opts.BaseURL speaks (config.ResolveAPIMode of mode).
func newModelClient(mode string, opts llm.OpenAIOptions) (llm.Client, error) {
	if config.ResolveAPIMode(mode, opts.BaseURL) == config.APIAnthropicMessages {
		c, err := llm.NewAnthropic(opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	c, err := llm.NewOpenAI(opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}
