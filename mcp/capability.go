package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/sessions"
)

// Toolset is the live toolset the MCP servers' tools are in; the main
// agent's set includes it when mcp_servers names a server
// (config.Config.Toolsets).
const Toolset = "mcp"

// Assembly is what the MCP capability is made with.
type Assembly interface {
	capability.Assembled
}

// Capability connects the configured MCP servers: it registers the
// live toolset their tools go to and /mcp, and its component starts the
// Manager with the gateway and closes the servers on shutdown.
func Capability(a Assembly) (*capability.Capability, error) {
	base := a.Assembly()
	live, err := base.Registry.RegisterLive(Toolset)
	if err != nil {
		return nil, err
	}
	m := New(Options{
		Servers:        base.Config.MCPServers,
		Env:            base.Config.SubprocessEnv(),
		Clock:          base.Clock,
		Logger:         base.Logger,
		Live:           live,
		OutputMaxChars: base.Config.Tools.OutputMaxChars,
		Home:           base.Config.Home,
		Observe:        base.Metrics.MCPCall,
	})
	err = base.Commands.Register(sessions.Command{
		Name: "mcp", Summary: "list the MCP servers, their state and their tools", OutOfBand: true,
		Handle: func(ctx context.Context, call *sessions.CommandCall) error {
			return call.Reply(ctx, StatusText(m.Statuses()))
		},
	})
	if err != nil {
		return nil, err
	}
	c := &capability.Capability{}
	if len(base.Config.MCPServers) > 0 {
		c.Components = []capability.Component{{Name: "mcp", Loop: m}}
	}
	return c, nil
}

// StatusText is the servers' states as /mcp shows them.
func StatusText(sts []Status) string {
	if len(sts) == 0 {
		return "No MCP servers are configured (mcp_servers)."
	}
	var b strings.Builder
	for i, st := range sts {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s (%s): %s, %d tools", st.Name, st.Transport, st.State, len(st.Tools))
		if st.LastError != "" {
			fmt.Fprintf(&b, "; last error: %s", st.LastError)
		}
		for _, t := range st.Tools {
			fmt.Fprintf(&b, "\n  %s", t)
		}
	}
	return b.String()
}
