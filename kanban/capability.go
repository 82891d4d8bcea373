package kanban

import (
	"context"
	"slices"
	"time"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

// Assembly is what the boards' capability is made with: what every
// capability is, and the boards' own parts.
type Assembly interface {
	capability.Assembled
	Kanban() Store
	// ServeKanban adds the local API's kanban routes: every change goes
	// through svc; tokens checks the workers' tokens; a heartbeat
	// extends a claim by claimTTL.
	ServeKanban(svc *Service, tokens Tokens, claimTTL time.Duration)
	// Children is delegation's spawner of child agents, which the
	// herald lane runs on a card. It is set once delegation's
	// capability was made.
	Children() *delegation.Spawner
}

// parts are the boards' pieces in a gateway.
type parts struct {
	service    *Service
	dispatcher *Dispatcher
	notifier   *Notifier
	tokens     Tokens
	// workers is the spawner of the herald lane's worker agents, with
	// the conversations' tools and the worker's.
	workers *delegation.Spawner
}

// Capability is the boards as a gateway runs them: it registers the
// board tools, /kanban and the local API's kanban routes, makes the
// notifier and, with kanban.enabled, the dispatcher, whose herald lane
// runs delegation's child agent on a card.
func Capability(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	cfg := a.Config.Kanban
	p := &parts{service: ServiceFor(as.Kanban(), a.Config), tokens: TokensFor(a.Config)}
	p.service.Redact = a.Redact
	if err := RegisterTools(a.Registry, p.service, cfg.ClaimTTL()); err != nil {
		return nil, err
	}
	if err := RegisterCommands(a.Commands, p.service); err != nil {
		return nil, err
	}
	targets := cronjobs.TargetsFor(a.Config, a.Platforms())
	var err error
	p.notifier, err = NewNotifier(NotifierOptions{
		Store:   as.Kanban(),
		Outbox:  a.Outbox,
		Resolve: func(target string) ([]outbox.Target, error) { return targets.Resolve(target, nil) },
		Clock:   a.Clock,
		Logger:  a.Logger.With("part", "kanban-notify"),
	})
	if err != nil {
		return nil, err
	}
	c := &capability.Capability{
		// The boards' notifications go through the outbox; workers
		// report through the store.
		Components: []capability.Component{{Name: "kanban-notify", Loop: p.notifier}},
	}
	as.ServeKanban(p.service, p.tokens, cfg.ClaimTTL())
	if !cfg.Enabled {
		return c, nil
	}
	run := func(ctx context.Context, spec WorkerSpec, model string) error {
		return RunCardAgent(ctx, p.service, p.workers.WithWork(spec.Workspace, model), spec)
	}
	opts := DispatcherOptionsFor(cfg, p.service, LanesFor(a.Config, run, a.Clock))
	opts.Name = a.Name
	// A worker may report over the API, from any machine, with a token
	// good for its card's claim only.
	opts.Env = func(k Card, token int64) []string {
		return []string{"HERALD_KANBAN_API_URL=http://" + a.Addr(), "HERALD_KANBAN_TOKEN=" + p.tokens.Mint(k.ID, token)}
	}
	opts.Signals = a.Store.Signals()
	opts.Clock = a.Clock
	opts.Logger = a.Logger.With("part", "kanban")
	p.dispatcher, err = NewDispatcher(opts)
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
		workerTools, err := a.Registry.Set(append(slices.Clone(a.Toolsets), WorkerToolset))
		if err != nil {
			return err
		}
		p.workers = as.Children().WithTools(workerTools)
		return nil
	}
	return c, nil
}
