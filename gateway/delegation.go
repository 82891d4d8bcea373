package gateway

import (
	"cmp"
	"context"
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
}

// buildDelegation makes the delegation parts and registers delegate_task
// in registry and /agents, /background in commands. parent is the
// model client of the conversations; children use delegation.model,
// base_url and api_key when set.
func (g *Gateway) buildDelegation(registry *tools.Registry, commands *sessions.Commands, parent llm.Client, workspace *tools.WorkspaceTools) (*delegationParts, error) {
	cfg := g.cfg.Delegation
	store := g.db.Delegations()
	client, err := g.auxClient(cfg.Endpoint(), cfg.RequestOverrides, parent)
	if err != nil {
		return nil, err
	}
	review, err := g.auxClient(g.cfg.Auxiliary.Review, nil, client)
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
		Progress:    newBackgroundStatus(g.opts.Adapters, g.db.Sessions(), g.log.With("part", "subagents")).show,
		Ended:       func() { p.deliverer.Wake() },
		Clock:       g.clock,
		Logger:      g.log.With("part", "subagents"),
	})
	if err != nil {
		return nil, err
	}
	meta := g.db.Sessions().Meta
	tool := delegation.Tool(delegation.ToolOptions{
		Store:       store,
		Spawner:     p.spawner,
		Runner:      p.runner,
		Signals:     g.db.Sessions(),
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

// committed wakes the runner when a commit carried a dispatch.
func (p *delegationParts) committed(ws []sessions.Write) {
	for _, w := range ws {
		if _, ok := w.(delegation.Dispatch); ok {
			p.runner.Wake()
			return
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

// CommittingSessions returns s whose Finish, once committed, tells
// committed of the other domains' writes it carried (Finish.Writes), so
// that the component that acts on them (the runner, for a dispatch)
// starts at once instead of at its next poll.
func CommittingSessions(s sessions.Store, committed func([]sessions.Write)) sessions.Store {
	return committingSessions{Store: s, committed: committed}
}

type committingSessions struct {
	sessions.Store
	committed func([]sessions.Write)
}

func (s committingSessions) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	err := s.Store.Finish(ctx, l, f)
	if err == nil && len(f.Writes) > 0 {
		s.committed(f.Writes)
	}
	return err
}

func (s committingSessions) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	turn, err := s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
	if err == nil && len(f.Writes) > 0 {
		s.committed(f.Writes)
	}
	return turn, err
}

// auxClient is the model client of settings other than the main model's
// (delegation.*, auxiliary.review.*): fallback when they set nothing,
// else a client of their own, with what they leave empty taken from the
// main model (the main key goes only to the main endpoint) and overrides
// set in every request's body.
func (g *Gateway) auxClient(ep config.AuxModel, overrides map[string]any, fallback llm.Client) (llm.Client, error) {
	if ep == (config.AuxModel{}) && len(overrides) == 0 {
		return fallback, nil
	}
	ep = ep.Fallback(g.cfg.Model)
	c, err := llm.NewOpenAI(llm.OpenAIOptions{
		BaseURL:    ep.BaseURL,
		APIKey:     ep.APIKey,
		Model:      ep.Model,
		Timeout:    g.cfg.Model.Timeout,
		MaxRetries: cmp.Or(g.cfg.Model.MaxRetries, -1),
		Clock:      g.clock,

		RequestOverrides: overrides,
	})
	if err != nil {
		return nil, err
	}
	return g.metrics.TimeModel(c), nil
}
