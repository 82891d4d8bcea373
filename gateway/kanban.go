package gateway

import (
	"context"
	"github.com/heraldgw/herald/capability"
	"slices"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

// kanbanParts are the boards' pieces in a gateway.
type kanbanParts struct {
	service    *kanban.Service
	dispatcher *kanban.Dispatcher
	notifier   *kanban.Notifier
	tokens     kanban.Tokens
	// workers is the spawner of the herald lane's worker agents, with
	// the conversations' tools and the worker's.
	workers *delegation.Spawner
}

// newKanban is the boards: it registers the board tools and /kanban,
// makes the notifier and, with kanban.enabled, the dispatcher, whose
// herald lane runs delegation's child agent on a card.
func newKanban(a *assembly) (*capability.Capability, error) {
	cfg := a.cfg.Kanban
	p := &kanbanParts{service: kanban.ServiceFor(a.db.Kanban(), a.cfg), tokens: kanban.TokensFor(a.cfg)}
	a.boards = p
	p.service.Redact = a.redact.String
	if err := kanban.RegisterTools(a.registry, p.service, cfg.ClaimTTL()); err != nil {
		return nil, err
	}
	if err := kanban.RegisterCommands(a.commands, p.service); err != nil {
		return nil, err
	}
	targets := a.targets()
	var err error
	p.notifier, err = kanban.NewNotifier(kanban.NotifierOptions{
		Store:   a.db.Kanban(),
		Outbox:  a.outbox,
		Resolve: func(target string) ([]outbox.Target, error) { return targets.Resolve(target, nil) },
		Clock:   a.clock,
		Logger:  a.log.With("part", "kanban-notify"),
	})
	if err != nil {
		return nil, err
	}
	c := &capability.Capability{
		// The boards' notifications go through the outbox; workers
		// report through the store.
		Components: []capability.Component{{Name: "kanban-notify", Loop: p.notifier}},
	}
	a.serve(api.KanbanRoutes(p.service, p.tokens, cfg.ClaimTTL()))
	if !cfg.Enabled {
		return c, nil
	}
	run := func(ctx context.Context, spec kanban.WorkerSpec, model string) error {
		return kanban.RunCardAgent(ctx, p.service, p.workers.WithWork(spec.Workspace, model), spec)
	}
	p.dispatcher, err = kanban.NewDispatcher(kanban.DispatcherOptions{
		Service:         p.service,
		Lanes:           kanban.LanesFor(a.cfg, run, a.clock),
		Name:            a.opts.Name,
		Interval:        cfg.DispatchInterval(),
		ClaimTTL:        cfg.ClaimTTL(),
		MaxSpawn:        cfg.MaxSpawn,
		DefaultAssignee: cfg.DefaultAssignee,
		ReviewDispatch:  cfg.ReviewDispatch,
		ReviewLane:      cfg.ReviewLane,
		RateLimitWait:   cfg.RateLimitWait(),
		// A worker may report over the API, from any machine, with a
		// token good for its card's claim only.
		Env: func(k kanban.Card, token int64) []string {
			return []string{"HERALD_KANBAN_API_URL=http://" + a.Addr(), "HERALD_KANBAN_TOKEN=" + p.tokens.Mint(k.ID, token)}
		},
		Signals: a.db.Signals(),
		Clock:   a.clock,
		Logger:  a.log.With("part", "kanban"),
	})
	if err != nil {
		return nil, err
	}
	p.service.Ready = func() {
		p.dispatcher.Wake()
		p.notifier.Wake()
	}
	c.Signals = p.dispatcher
	c.Components = append(c.Components, capability.Component{Name: "kanban", Loop: p.dispatcher})
	c.ToolsReady = func(*tools.Set) error {
		workerTools, err := a.registry.Set(append(slices.Clone(a.toolsets), kanban.WorkerToolset))
		if err != nil {
			return err
		}
		p.workers = a.children.WithTools(workerTools)
		return nil
	}
	return c, nil
}
