package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// delegationParts are the pieces of background work: the spawner that
// runs children, the runner that owns them on this instance, and the
// deliverer that brings their completions back.
type delegationParts struct {
	spawner   *delegation.Spawner
	runner    *delegation.Runner
	deliverer *delegation.Deliverer
	stopper   delegation.Stopper
	log       *slog.Logger
}

// buildDelegation makes the delegation parts and registers delegate_task
// in registry and /agents, /background in commands. parent is the
// model client of the conversations; children use delegation.model,
// base_url and api_key when set.
func (g *Gateway) buildDelegation(registry *tools.Registry, commands *sessions.Commands, parent llm.Client, workspace *tools.WorkspaceTools) (*delegationParts, error) {
	cfg := g.cfg.Delegation
	store := g.db.Delegations()
	client, err := g.auxClient(cfg.Endpoint(), "DELEGATION_API_KEY / delegation.api_key", cfg.RequestOverrides, parent)
	if err != nil {
		return nil, err
	}
	review, err := g.auxClient(g.cfg.Auxiliary.Review, "auxiliary.review.api_key", nil, client)
	if err != nil {
		return nil, err
	}
	reviewModel := cfg.Endpoint().Fallback(g.cfg.Model).Model
	if g.cfg.Auxiliary.Review != (config.AuxModel{}) {
		reviewModel = g.cfg.Auxiliary.Review.Fallback(g.cfg.Model).Model
	}
	p := &delegationParts{}
	transcripts := &delegation.Transcripts{
		Dir:    filepath.Join(g.cfg.Home, "cache", "delegation", "live"),
		Redact: g.redact.String,
	}
	p.spawner = delegation.NewSpawner(delegation.SpawnerOptions{
		Price: func(model string) (float64, float64, bool) {
			price, ok := g.cfg.Model.Prices[model]
			return price.Input, price.Output, ok
		},
		Client:              client,
		Model:               cfg.Endpoint().Fallback(g.cfg.Model).Model,
		Review:              review,
		ReviewModel:         reviewModel,
		MaxIterations:       cfg.MaxIterations,
		SummaryMax:          cfg.SummaryMaxChars,
		MaxDepth:            cfg.MaxSpawnDepth,
		OrchestratorEnabled: cfg.OrchestratorEnabled,
		Timeout:             cfg.ChildTimeout(),
		Workspace:           g.cfg.Tools.Workspace,
		Worktrees:           cfg.WorktreeIsolation,
		StallQuiet:          time.Duration(cfg.StallQuietSeconds) * time.Second,
		StallTool:           time.Duration(cfg.StallToolSeconds) * time.Second,
		StallGrace:          time.Duration(cfg.StallGraceSeconds) * time.Second,
		EndProcesses:        workspace.EndProcesses,
		Clock:               g.clock,
		Logger:              g.log.With("part", "subagents"),
	})
	p.runner, err = delegation.NewRunner(delegation.RunnerOptions{
		Store:       store,
		Spawner:     p.spawner,
		Name:        g.opts.Name,
		OwnerTTL:    cfg.OwnerTTL,
		Max:         cfg.ProcessMaxChildren,
		Transcripts: transcripts,
		Progress: newBackgroundStatus(g.opts.Adapters, g.db.Sessions(), g.db.Once(), store.Delegation, g.opts.Name,
			g.log.With("part", "subagents")).hook(),
		Ended:  func() { p.deliverer.Wake() },
		Clock:  g.clock,
		Logger: g.log.With("part", "subagents"),
	})
	if err != nil {
		return nil, err
	}
	p.stopper = delegation.Stopper{Store: store, Signals: g.db.Signals(), Runner: p.runner}
	p.log = g.log.With("part", "subagents")
	meta := g.db.Sessions().Meta
	tool := delegation.Tool(delegation.ToolOptions{
		Store:       store,
		Spawner:     p.spawner,
		Runner:      p.runner,
		Signals:     g.db.Signals(),
		Meta:        meta,
		MaxChildren: cfg.MaxConcurrentChildren,
		Independent: cfg.IndependentCompletions,
		Transcripts: transcripts.Path,
		Clock:       g.clock,
	})
	if err := registry.Register(delegation.Toolset, tool); err != nil {
		return nil, err
	}
	if err := delegation.RegisterCommands(commands, delegation.CommandOptions{
		Store:       store,
		Runner:      p.runner,
		Meta:        meta,
		History:     g.db.Sessions().History,
		MaxChildren: cfg.MaxConcurrentChildren,
		StallQuiet:  time.Duration(cfg.StallQuietSeconds) * time.Second,
		Clock:       g.clock,
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// committed acts on a turn's committed dispatches: the runner starts
// them at once, unless /stop or /new ended the turn, whose dispatches are
// stopped before any instance runs them. The deliverer is woken too: a
// dispatch the commit found no room for was written ended, its
// completion due.
func (p *delegationParts) committed(c sessions.Committed) {
	for _, w := range c.Writes {
		d, ok := w.(delegation.Dispatch)
		if !ok {
			continue
		}
		p.runner.Dispatched(d.Delegation)
		if c.Stopped {
			p.stopDispatch(d.Delegation)
			continue
		}
		p.runner.Wake()
		if p.deliverer != nil {
			p.deliverer.Wake()
		}
	}
}

// stopDispatch stops the children of a dispatch its stopped turn made.
func (p *delegationParts) stopDispatch(d delegation.Delegation) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range d.Children {
		if _, err := p.stopper.Stop(ctx, d, c, delegation.Interrupted("the turn that dispatched it was stopped")); err != nil {
			p.log.Warn("stopping a stopped turn's sub-agent failed; it runs", "subagent", c.ID, "err", err)
		}
	}
}

// startDeliverer makes the deliverer, once the router it hands
// completions to exists.
func (p *delegationParts) startDeliverer(g *Gateway, inbox delegation.Inbox) error {
	var err error
	p.deliverer, err = delegation.NewDeliverer(delegation.DelivererOptions{
		Store:    g.db.Delegations(),
		Inbox:    inbox,
		Outbox:   notifyingOutbox{Store: g.db.Outbox(), notify: g.delivery.Notify},
		Meta:     g.db.Sessions().Meta,
		Name:     g.opts.Name,
		ClaimTTL: max(2*g.cfg.Store.LeaseTTL, 10*time.Second),
		Clock:    g.clock,
		Logger:   g.log.With("part", "completions"),
	})
	return err
}

// auxClient is the model client of settings other than the main model's
// (delegation.*, auxiliary.review.*): fallback when they set nothing,
// else a client of their own, with what they leave empty taken from the
// main model (the main key goes only to the main endpoint) and overrides
// set in every request's body. One on the main endpoint with its keys
// (settings that name only a model, say) shares the main pool and falls
// back like the main model, to model.fallbacks in order; one on an
// endpoint of its own has neither: its failure is its own. setting names
// where ep's key is configured, for what a person is told of a refused key.
func (g *Gateway) auxClient(ep config.AuxModel, setting string, overrides map[string]any, fallback llm.Client) (llm.Client, error) {
	if ep == (config.AuxModel{}) && len(overrides) == 0 {
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
	return g.metrics.TimeModel(c, ep.Model), nil
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
