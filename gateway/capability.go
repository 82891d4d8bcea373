package gateway

import (
	"context"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/mcp"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// capabilities are what herald does beside running turns
// (capability.Capability), made in this order by build; their components
// start in it too. A capability is its constructor, in its package, and
// one line here.
var capabilities = []func(*assembly) (*capability.Capability, error){
	// Before any tool set is made: every set asks its gate.
	func(a *assembly) (*capability.Capability, error) { return approvals.Capability(a) },
	func(a *assembly) (*capability.Capability, error) { return agent.RememberNotes(a) },
	// First: the ones below run its child agents.
	func(a *assembly) (*capability.Capability, error) { return delegation.Capability(a) },
	func(a *assembly) (*capability.Capability, error) { return controllers.Capability(a) },
	func(a *assembly) (*capability.Capability, error) { return cronjobs.Capability(a) },
	func(a *assembly) (*capability.Capability, error) { return kanban.Capability(a) },
	func(a *assembly) (*capability.Capability, error) { return media.Outbound(a) },
	func(a *assembly) (*capability.Capability, error) { return agent.StatusLines(a) },
	func(a *assembly) (*capability.Capability, error) { return mcp.Capability(a) },
	// Last: its runner is the outermost, so every decorator above sees
	// an entry whose files are ready.
	func(a *assembly) (*capability.Capability, error) { return media.Capability(a) },
}

// assembly is what a capability is made with: the parts build made
// before the capabilities, and each domain's own (delegation.Assembly,
// controllers.Assembly, cronjobs.Assembly, kanban.Assembly,
// media.Assembly, approvals.Assembly).
type assembly struct {
	base *capability.Assembly
	db   Store
	// agent is the conversations' agent, on the main model. Its Tools
	// are set once every capability registered its tools.
	agent *agent.Agent
	// children is delegation's spawner of child agents, for the
	// capabilities made after it (kanban's herald lane).
	children *delegation.Spawner
	// routes are the HTTP routes the capabilities add to the local API,
	// under its key.
	routes []api.Routes
	// boards is the kanban service, which tests change the boards with.
	boards *kanban.Service
}

func (a *assembly) Assembly() *capability.Assembly { return a.base }

func (a *assembly) Delegations() delegation.Store  { return a.db.Delegations() }
func (a *assembly) Controllers() controllers.Store { return a.db.Controllers() }
func (a *assembly) Cron() cronjobs.Store           { return a.db.Cron() }
func (a *assembly) Kanban() kanban.Store           { return a.db.Kanban() }
func (a *assembly) Files() media.Store             { return a.db.Files() }
func (a *assembly) Approvals() approvals.Store     { return a.db.Approvals() }

func (a *assembly) Agent() *agent.Agent { return a.agent }

// HandedFiles are media's checks of the files a task hands a child.
func (a *assembly) HandedFiles() delegation.HandedFiles {
	home := a.base.Config.Home
	return delegation.HandedFiles{
		Resolve: func(path, workspace, conv string) (string, error) {
			return media.ResolveFile(path, workspace, home, conv)
		},
		Peek: media.Peek,
	}
}

func (a *assembly) SetChildren(s *delegation.Spawner) { a.children = s }
func (a *assembly) Children() *delegation.Spawner     { return a.children }

func (a *assembly) ServeDelegations(svc *delegation.Service) {
	a.routes = append(a.routes, api.DelegationRoutes(svc))
}

func (a *assembly) ServeApprovals(ap *approvals.Approver) {
	a.routes = append(a.routes, api.ApprovalRoutes(ap))
}

func (a *assembly) ServeCron(jobs cronjobs.Manager) {
	a.routes = append(a.routes, api.CronRoutes(jobs))
}

func (a *assembly) ServeKanban(svc *kanban.Service, tokens kanban.Tokens, claimTTL time.Duration) {
	a.boards = svc
	a.routes = append(a.routes, api.KanbanRoutes(svc, tokens, claimTTL))
}

// DelegationEnded is the controllers' wait on a delegation: one that is
// not there will not end, so the wait is over.
func (a *assembly) DelegationEnded(ctx context.Context, id string) bool {
	d, err := a.db.Delegations().Delegation(ctx, id)
	return errs.Is(err, errs.NotFound) || (err == nil && d.Status().Terminal())
}

// assembled are the capabilities made, in list order.
type assembled []*capability.Capability

// make makes the capabilities of the list, in order.
func (a *assembly) make() (assembled, error) {
	var out assembled
	for _, newCapability := range capabilities {
		c, err := newCapability(a)
		if err != nil {
			return nil, err
		}
		if c.Runner != nil {
			a.base.Runner = c.Runner
		}
		out = append(out, c)
	}
	return out, nil
}

// toolsReady tells each capability the conversations' tool set.
func (cs assembled) toolsReady(conversations *tools.Set) error {
	for _, c := range cs {
		if c.ToolsReady == nil {
			continue
		}
		if err := c.ToolsReady(conversations); err != nil {
			return err
		}
	}
	return nil
}

// routed tells each capability the router.
func (cs assembled) routed(r *sessions.Router) error {
	for _, c := range cs {
		if c.Routed == nil {
			continue
		}
		if err := c.Routed(r); err != nil {
			return err
		}
	}
	return nil
}

// settled tells each capability how a message's delivery ended.
func (cs assembled) settled(m outbox.Message, accepted bool, reason string) {
	for _, c := range cs {
		if c.Settled != nil {
			c.Settled(m, accepted, reason)
		}
	}
}

// committed tells each capability of a turn's committed writes.
func (cs assembled) committed(done sessions.Committed) {
	for _, w := range done.Writes {
		for _, c := range cs {
			if listen := c.Committed[w.WriteKind()]; listen != nil {
				listen(done, w)
			}
		}
	}
}

// signals are the capabilities' signal handlers, in list order.
func (cs assembled) signals() []signals.Handler {
	var out []signals.Handler
	for _, c := range cs {
		if c.Signals != nil {
			out = append(out, c.Signals)
		}
	}
	return out
}

// components are the capabilities' background loops, in start order.
func (cs assembled) components() components {
	var out components
	for _, c := range cs {
		for _, nc := range c.Components {
			out = append(out, namedComponent{name: nc.Name, c: nc.Loop})
		}
	}
	return out
}

// convBusy is the scheduler's idle check: whether a turn of conv runs,
// in this process or, by the lease the metadata tells of, in another.
// Unread, the metadata says idle: the tick's turn looks again when it
// starts.
func (g *Gateway) convBusy(ctx context.Context, conv string) bool {
	if _, ok := g.turns.RunningTurn(conv); ok {
		return true
	}
	meta, err := g.db.Sessions().Meta(ctx, conv)
	return err == nil && meta[sessions.ConvMetaTurn] != ""
}
