package delegation

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// Assembly is what delegation's capability is made with: what every
// capability is, and delegation's own parts.
type Assembly interface {
	capability.Assembled
	Delegations() Store
	// ServeDelegations adds the local API's delegation routes, served
	// by svc.
	ServeDelegations(svc *Service)
	// SetChildren hands the capabilities made after delegation its
	// spawner of child agents (kanban's herald lane runs them).
	SetChildren(*Spawner)
	// HandedFiles checks and tells the files a task hands its child.
	HandedFiles() HandedFiles
}

// parts are the pieces of delegation: the spawner that runs
// children, the runner that owns them on this instance, and the
// deliverer that brings their completions back.
type parts struct {
	spawner   *Spawner
	runner    *Runner
	deliverer *Deliverer
	stopper   Stopper
	store     Store
	log       *slog.Logger
}

// Capability is delegation as a gateway runs it: it registers
// delegate_task and /agents, /background, /review and the rest, and the
// local API's delegation routes. Parents are the conversations on the
// main model; children use delegation.model, base_url and api_key when
// set.
func Capability(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	cfg := a.Config.Delegation
	store := as.Delegations()
	client, err := a.AuxClient(cfg.Endpoint(), "DELEGATION_API_KEY / delegation.api_key", cfg.RequestOverrides, a.Model)
	if err != nil {
		return nil, err
	}
	review, err := a.AuxClient(a.Config.Auxiliary.Review, "auxiliary.review.api_key", nil, client)
	if err != nil {
		return nil, err
	}
	reviewModel := cfg.Endpoint().Fallback(a.Config.Model).Model
	if a.Config.Auxiliary.Review != (config.AuxModel{}) {
		reviewModel = a.Config.Auxiliary.Review.Fallback(a.Config.Model).Model
	}
	p := &parts{store: store, log: a.Logger.With("part", "delegation")}
	transcripts := &Transcripts{
		Dir:    filepath.Join(a.Config.Home, "cache", "delegation", "live"),
		Redact: a.Redact,
	}
	p.spawner = NewSpawner(SpawnerOptions{
		Price:               a.Config.Model.Price,
		Client:              client,
		Model:               cfg.Endpoint().Fallback(a.Config.Model).Model,
		Review:              review,
		ReviewModel:         reviewModel,
		MaxIterations:       cfg.MaxIterations,
		SummaryMax:          cfg.SummaryMaxChars,
		MaxDepth:            cfg.MaxSpawnDepth,
		OrchestratorEnabled: cfg.OrchestratorEnabled,
		Timeout:             cfg.ChildTimeout(),
		Workspace:           a.Config.Tools.Workspace,
		Worktrees:           cfg.WorktreeIsolation,
		StallQuiet:          time.Duration(cfg.StallQuietSeconds) * time.Second,
		StallTool:           time.Duration(cfg.StallToolSeconds) * time.Second,
		StallGrace:          time.Duration(cfg.StallGraceSeconds) * time.Second,
		EndProcesses:        a.Workspace.EndProcesses,
		Images:              a.Images,
		Files:               as.HandedFiles(),
		Clock:               a.Clock,
		Logger:              p.log,
	})
	as.SetChildren(p.spawner)
	p.runner, err = NewRunner(RunnerOptions{
		Store:       store,
		Spawner:     p.spawner,
		Name:        a.Name,
		OwnerTTL:    cfg.OwnerTTL,
		Max:         cfg.ProcessMaxChildren,
		Transcripts: transcripts,
		Progress: StatusLines(StatusLinesOptions{
			Adapters: a.Adapters, Meta: a.Store.Sessions(), Once: a.Store.Once(), Read: store.Delegation, Owner: a.Name, Logger: p.log,
		}),
		Ended:  func() { p.deliverer.Wake() },
		Clock:  a.Clock,
		Logger: p.log,
	})
	if err != nil {
		return nil, err
	}
	p.stopper = Stopper{Store: store, Signals: a.Store.Signals(), Runner: p.runner}
	meta := a.Store.Sessions().Meta
	tool := Tool(ToolOptions{
		Store:       store,
		Spawner:     p.spawner,
		Runner:      p.runner,
		Signals:     a.Store.Signals(),
		Meta:        meta,
		MaxChildren: cfg.MaxConcurrentChildren,
		Independent: cfg.IndependentCompletions,
		Transcripts: transcripts.Path,
		Files:       as.HandedFiles(),
		Workspace:   a.Config.Tools.Workspace,
		Clock:       a.Clock,
	})
	if err := a.Registry.Register(Toolset, tool); err != nil {
		return nil, err
	}
	if err := RegisterCommands(a.Commands, CommandOptions{
		Store:       store,
		Runner:      p.runner,
		Meta:        meta,
		History:     a.Store.Sessions().History,
		MaxChildren: cfg.MaxConcurrentChildren,
		StallQuiet:  time.Duration(cfg.StallQuietSeconds) * time.Second,
		Clock:       a.Clock,
	}); err != nil {
		return nil, err
	}
	c := &capability.Capability{
		// The children run with the conversations' tools.
		ToolsReady: func(set *tools.Set) error {
			p.spawner.SetTools(set)
			return nil
		},
		Committed: map[string]func(sessions.Committed, sessions.Write){WriteDispatch: p.dispatched},
		Signals:   p.runner,
	}
	// Children run beside the turns; on a stop they end interrupted and
	// their completions wait in the store for the next deliverer. The
	// runner's part is named "delegation" in the logs.
	as.ServeDelegations(p.service(a, as.HandedFiles(), transcripts))
	c.Components = []capability.Component{{Name: "delegation", Loop: p.runner}}
	c.Routed = func(r *sessions.Router) error {
		var err error
		p.deliverer, err = NewDeliverer(DelivererOptions{
			Store:    store,
			Inbox:    r,
			Outbox:   a.Outbox,
			Meta:     meta,
			Name:     a.Name,
			ClaimTTL: max(2*a.Config.Store.LeaseTTL, 10*time.Second),
			Clock:    a.Clock,
			Logger:   a.Logger.With("part", "completions"),
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
func (p *parts) dispatched(c sessions.Committed, w sessions.Write) {
	d := w.(Dispatch)
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
func (p *parts) stopDispatch(d Delegation) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range d.Children {
		if _, err := p.stopper.Stop(ctx, d, c, Interrupted("the turn that dispatched it was stopped")); err != nil {
			p.log.Warn("stopping a stopped turn's sub-agent failed; it runs", "subagent", c.ID, "err", err)
		}
	}
}

// service is the lifecycle of delegations the HTTP API
// serves (POST /api/v1/delegations and the rest): it dispatches as
// delegate_task does, on the same limits, wakes this instance's runner,
// stops a child here at once or, through the store's signals,
// wherever it runs, and reads the transcripts of the children run here.
func (p *parts) service(a *capability.Assembly, files HandedFiles, transcripts *Transcripts) *Service {
	return &Service{
		Store:       p.store,
		Signals:     a.Store.Signals(),
		Runner:      p.runner,
		Meta:        a.Store.Sessions().Meta,
		MaxChildren: a.Config.Delegation.MaxConcurrentChildren,
		Independent: a.Config.Delegation.IndependentCompletions,
		Cancelled:   "cancelled from the API",
		Files:       files,
		Workspace:   a.Config.Tools.Workspace,
		Prices:      a.Config.Model.Price,
		Transcripts: transcripts,
		Clock:       a.Clock,
	}
}
