// Package capability is the seam through which what herald does beside
// running turns (delegation, the session controllers, cron, the kanban
// boards, the /status lines) plugs into a gateway: the Capability a
// constructor returns and the Assembly it is made with. The constructors
// live in their domains' packages; the gateway lists them and runs what
// they return.
package capability

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// A Capability is one thing herald does beside running turns as the
// gateway runs it: what it adds to the parts they share.
//
// The gateway makes the capabilities in its list's order; then, once
// every one registered its tools, it calls each ToolsReady, and once the
// router exists, each Routed. Those two are the only things a capability
// learns after it is made. A hook may make what needs its argument and
// set the fields the gateway reads after it: Runner is read as each
// capability is made, Settled, Committed and Signals after ToolsReady,
// and Components after Routed.
//
// Its HTTP routes a capability adds through its domain's interface
// (delegation.Assembly's ServeDelegations, say): the local API that
// makes them (adapters/api) imports the domains, so neither this package
// nor they can name its routes.
type Capability struct {
	// Runner, when set, is what the turns run: the assembly's runner,
	// decorated. The capabilities made after it decorate this one.
	Runner sessions.TurnRunner
	// ToolsReady is told the conversations' tool set once every
	// capability registered its tools.
	ToolsReady func(conversations *tools.Set) error
	// Settled is told how the delivery of an outbox message with a Ref
	// or with files ended (delivery's Settled).
	Settled func(m outbox.Message, accepted bool, reason string)
	// Committed are its listeners of committed writes, by write kind
	// (sessions.Write's WriteKind): each is told of every write of its
	// kind a turn's commit carried, in the commit's order.
	Committed map[string]func(sessions.Committed, sessions.Write)
	// Signals handles the store's signals in this process, after the
	// turn worker.
	Signals signals.Handler
	// Routed is told the router once it exists.
	Routed func(*sessions.Router) error
	// Components are its background loops, in start order. They start
	// after the gateway's own (the turns last) and the components of the
	// capabilities above it, and stop before them.
	Components []Component
}

// A Component is a background loop of a capability and the name its
// start and stop are logged and reported under.
type Component struct {
	Name string
	Loop Loop
}

// A Loop runs in the background from Start to Shutdown.
type Loop interface {
	// Start starts the loop under ctx, whose end stops it hard.
	Start(ctx context.Context) error
	// Shutdown stops it gracefully within ctx, and returns when it ended.
	Shutdown(ctx context.Context) error
}

// Assembly is what every capability is made with: the parts the gateway
// made before the capabilities. What only one domain needs (its store,
// its HTTP routes) a constructor asks of its own interface, which the
// gateway's assembly implements beside Assembled.
type Assembly struct {
	Config config.Config
	// Name is this gateway process's name among the cluster's.
	Name   string
	Clock  clock.Clock
	Logger *slog.Logger
	// Redact hides the configured secrets in what is written down.
	Redact func(string) string
	Store  Store
	// Adapters are the chat platforms served beside the local API.
	Adapters []adapters.Adapter
	Registry *tools.Registry
	Commands *sessions.Commands
	Model    llm.Client // the main model's client, timed
	// Images loads the bytes of a picture a model request shows (the
	// conversations' agent's Agent.Images); nil when images are not
	// loaded. Sub-agents load theirs with it.
	Images func(ctx context.Context, img chat.Image) (chat.Image, error)
	// Toolsets are the conversations' tool sets (tools.Toolsets).
	Toolsets []string
	// Outbox wakes the delivery worker after each Enqueue. That worker
	// is made after the capabilities, whose Settled it is told, so a
	// wake finds it when it is called.
	Outbox outbox.Store
	// Runner is what the turns run: the conversations' agent,
	// decorated by the capabilities made so far (Capability.Runner).
	Runner sessions.TurnRunner
	// Workspace is the workspace tools; nil when tools.workspace is
	// unset (its methods then do nothing).
	Workspace *tools.WorkspaceTools
	// AuxClient is the model client of settings other than the main
	// model's (delegation.*, auxiliary.*): fallback when they set
	// nothing, else one of their own. setting names where ep's key is
	// configured, for what a person is told of a refused key.
	AuxClient func(ep config.AuxModel, setting string, overrides map[string]any, fallback llm.Client) (llm.Client, error)
	// Addr is the address the gateway's HTTP server listens on, once
	// it started.
	Addr func() string
	// Busy reports whether a turn of conv runs, here or in another
	// process.
	Busy func(ctx context.Context, conv string) bool
	// Metrics are the counters the capabilities move.
	Metrics Metrics
}

// Assembled is the part every domain's interface of what its
// capability is made with holds: the Assembly.
type Assembled interface {
	Assembly() *Assembly
}

// Store is what every capability may read of the gateway's store; a
// domain's own store comes through its interface.
type Store interface {
	Sessions() sessions.Store
	Signals() signals.Store
	Once() lease.OnceStore
}

// Metrics are the counters capabilities move.
type Metrics struct {
	// ControllerFired counts a controller's fire of kind and how it
	// went.
	ControllerFired func(kind, outcome string)
	// ControllerDropped counts a controller of kind dropped.
	ControllerDropped func(kind string)
	// MCPCall times an MCP server's tool call and its result.
	MCPCall func(server, tool, result string, d time.Duration)
}

// Platforms are the chat platforms a serves beside the local API.
func (a *Assembly) Platforms() []string {
	var out []string
	for _, ad := range a.Adapters {
		out = append(out, ad.Platform())
	}
	return out
}
