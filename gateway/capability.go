package gateway

import (
	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// capabilities are what herald does beside running turns
// (capability.Capability), made in this order by build; their components
// start in it too. A capability is its constructor and one line here.
var capabilities = []func(*assembly) (*capability.Capability, error){
	newDelegation, // first: the ones below run its child agents
	newControllers,
	newCron,
	newKanban,
	newStatusLines,
}

// assembly is what a capability is made with: the gateway and the parts
// build made before the capabilities.
type assembly struct {
	*Gateway
	registry *tools.Registry
	commands *sessions.Commands
	// agent is the conversations' agent, on model. Its Tools are set
	// once every capability registered its tools.
	agent *agent.Agent
	model llm.Client // the main model's client, timed
	// toolsets are the conversations' tool sets (tools.Toolsets).
	toolsets []string
	// outbox wakes the delivery worker after each Enqueue. That worker
	// is made after the capabilities, whose Settled it is told, so a
	// wake finds it when it is called.
	outbox outbox.Store
	// runner is what the turns run: agent, decorated by the
	// capabilities made so far (Capability.Runner).
	runner sessions.TurnRunner
	// children is delegation's spawner of child agents, for the
	// capabilities made after it (kanban's herald lane).
	children *delegation.Spawner
	// routes are the HTTP routes the capabilities add to the local API,
	// under its key.
	routes []api.Routes
}

// serve adds r to the local API's routes.
func (a *assembly) serve(r api.Routes) { a.routes = append(a.routes, r) }

// targets are where cron's reports and the boards' notifications can go.
func (a *assembly) targets() cronjobs.Targets {
	return cronjobs.TargetsFor(a.cfg, a.served())
}

// served are the chat platforms this gateway serves beside the local
// API.
func (a *assembly) served() []string {
	var out []string
	for _, ad := range a.opts.Adapters {
		out = append(out, ad.Platform())
	}
	return out
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
			a.runner = c.Runner
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
