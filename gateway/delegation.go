package gateway

import (
	"context"
	"github.com/heraldgw/herald/capability"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// delegationParts are the pieces of delegation: the spawner that runs
// children, the runner that owns them on this instance, and the
// deliverer that brings their completions back.
type delegationParts struct {
	spawner   *delegation.Spawner
	runner    *delegation.Runner
	deliverer *delegation.Deliverer
	stopper   delegation.Stopper
	log       *slog.Logger
}

// newDelegation is delegation: it registers delegate_task and /agents,
// /background, /review and the rest. Parents are the conversations on
// the main model; children use delegation.model, base_url and api_key
// when set.
func newDelegation(a *assembly) (*capability.Capability, error) {
	cfg := a.cfg.Delegation
	store := a.db.Delegations()
	client, err := a.auxClient(cfg.Endpoint(), "DELEGATION_API_KEY / delegation.api_key", cfg.RequestOverrides, a.model)
	if err != nil {
		return nil, err
	}
	review, err := a.auxClient(a.cfg.Auxiliary.Review, "auxiliary.review.api_key", nil, client)
	if err != nil {
		return nil, err
	}
	reviewModel := cfg.Endpoint().Fallback(a.cfg.Model).Model
	if a.cfg.Auxiliary.Review != (config.AuxModel{}) {
		reviewModel = a.cfg.Auxiliary.Review.Fallback(a.cfg.Model).Model
	}
	p := &delegationParts{log: a.log.With("part", "delegation")}
	transcripts := &delegation.Transcripts{
		Dir:    filepath.Join(a.cfg.Home, "cache", "delegation", "live"),
		Redact: a.redact.String,
	}
	p.spawner = delegation.NewSpawner(delegation.SpawnerOptions{
		Price:               a.cfg.Model.Price,
		Client:              client,
		Model:               cfg.Endpoint().Fallback(a.cfg.Model).Model,
		Review:              review,
		ReviewModel:         reviewModel,
		MaxIterations:       cfg.MaxIterations,
		SummaryMax:          cfg.SummaryMaxChars,
		MaxDepth:            cfg.MaxSpawnDepth,
		OrchestratorEnabled: cfg.OrchestratorEnabled,
		Timeout:             cfg.ChildTimeout(),
		Workspace:           a.cfg.Tools.Workspace,
		Worktrees:           cfg.WorktreeIsolation,
		StallQuiet:          time.Duration(cfg.StallQuietSeconds) * time.Second,
		StallTool:           time.Duration(cfg.StallToolSeconds) * time.Second,
		StallGrace:          time.Duration(cfg.StallGraceSeconds) * time.Second,
		EndProcesses:        a.workspace.EndProcesses,
		Clock:               a.clock,
		Logger:              p.log,
	})
	a.children = p.spawner
	p.runner, err = delegation.NewRunner(delegation.RunnerOptions{
		Store:       store,
		Spawner:     p.spawner,
		Name:        a.opts.Name,
		OwnerTTL:    cfg.OwnerTTL,
		Max:         cfg.ProcessMaxChildren,
		Transcripts: transcripts,
		Progress: delegation.StatusLines(delegation.StatusLinesOptions{
			Adapters: a.opts.Adapters, Meta: a.db.Sessions(), Once: a.db.Once(), Read: store.Delegation, Owner: a.opts.Name, Logger: p.log,
		}),
		Ended:  func() { p.deliverer.Wake() },
		Clock:  a.clock,
		Logger: p.log,
	})
	if err != nil {
		return nil, err
	}
	p.stopper = delegation.Stopper{Store: store, Signals: a.db.Signals(), Runner: p.runner}
	meta := a.db.Sessions().Meta
	tool := delegation.Tool(delegation.ToolOptions{
		Store:       store,
		Spawner:     p.spawner,
		Runner:      p.runner,
		Signals:     a.db.Signals(),
		Meta:        meta,
		MaxChildren: cfg.MaxConcurrentChildren,
		Independent: cfg.IndependentCompletions,
		Transcripts: transcripts.Path,
		Clock:       a.clock,
	})
	if err := a.registry.Register(delegation.Toolset, tool); err != nil {
		return nil, err
	}
	if err := delegation.RegisterCommands(a.commands, delegation.CommandOptions{
		Store:       store,
		Runner:      p.runner,
		Meta:        meta,
		History:     a.db.Sessions().History,
		MaxChildren: cfg.MaxConcurrentChildren,
		StallQuiet:  time.Duration(cfg.StallQuietSeconds) * time.Second,
		Clock:       a.clock,
	}); err != nil {
		return nil, err
	}
	c := &capability.Capability{
		// The children run with the conversations' tools.
		ToolsReady: func(set *tools.Set) error {
			p.spawner.SetTools(set)
			return nil
		},
		Committed: map[string]func(sessions.Committed, sessions.Write){delegation.WriteDispatch: p.dispatched},
		Signals:   p.runner,
	}
	// Children run beside the turns; on a stop they end interrupted and
	// their completions wait in the store for the next deliverer. The
	// runner's part is named "delegation" in the logs.
	a.serve(api.DelegationRoutes(a.delegationService(p)))
	c.Components = []capability.Component{{Name: "delegation", Loop: p.runner}}
	c.Routed = func(r *sessions.Router) error {
		var err error
		p.deliverer, err = delegation.NewDeliverer(delegation.DelivererOptions{
			Store:    store,
			Inbox:    r,
			Outbox:   a.outbox,
			Meta:     meta,
			Name:     a.opts.Name,
			ClaimTTL: max(2*a.cfg.Store.LeaseTTL, 10*time.Second),
			Clock:    a.clock,
			Logger:   a.log.With("part", "completions"),
		})
		if err != nil {
			return err
		}
		c.Components = append(c.Components, capability.Component{Name: "completions", Loop: p.deliverer})
		return nil
	}
	return c, nil
}

// dispatched acts on a dispatch a turn committed: the runner starts it
// at once, unless /stop or /new ended the turn, whose dispatches are
// stopped before any instance runs them. The deliverer is woken too: a
// dispatch the commit found no room for was written ended, its
// completion due.
func (p *delegationParts) dispatched(c sessions.Committed, w sessions.Write) {
	d := w.(delegation.Dispatch)
	p.runner.Committed(d.Delegation)
	if c.Stopped {
		p.stopDispatch(d.Delegation)
		return
	}
	p.runner.Wake()
	if p.deliverer != nil {
		p.deliverer.Wake()
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

// delegationService is the lifecycle of delegations the HTTP API
// serves (POST /api/v1/delegations and the rest): it dispatches as
// delegate_task does, on the same limits, wakes this instance's runner,
// and stops a child here at once or, through the store's signals,
// wherever it runs.
func (g *Gateway) delegationService(p *delegationParts) *delegation.Service {
	return &delegation.Service{
		Store:       g.db.Delegations(),
		Signals:     g.db.Signals(),
		Runner:      p.runner,
		Meta:        g.db.Sessions().Meta,
		MaxChildren: g.cfg.Delegation.MaxConcurrentChildren,
		Independent: g.cfg.Delegation.IndependentCompletions,
		Cancelled:   "cancelled from the API",
		Clock:       g.clock,
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
