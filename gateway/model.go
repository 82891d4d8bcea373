package gateway

import (
	"cmp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/llm"
)

// modelParts are the main model's key pool and the client a request is
// asked of: the chain of the main model, then model.fallbacks in order;
// or Options.Model, with no pool and no fallbacks.
type modelParts struct {
	pool      *llm.Pool
	pools     llm.ModelPools // the main model's and the fallbacks', in order
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
		first := llm.Provider{Name: llm.ProviderName(ep.Model, ep.BaseURL), Model: ep.Model, Client: c}
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
