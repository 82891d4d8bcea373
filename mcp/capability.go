package mcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
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
	file := base.Config.File
	r := NewReloader(ReloaderOptions{
		Manager: m, File: file, Clock: base.Clock, Logger: base.Logger, Name: base.Name,
		Load: func() (map[string]config.MCPServer, error) {
			cfg, err := config.Load(file, os.LookupEnv)
			var problems config.Problems
			if errors.As(err, &problems) {
				return nil, problems // each names its key; no wrapping
			}
			return cfg.MCPServers, err
		},
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
	err = base.Commands.Register(sessions.Command{
		Name: "reload-mcp", Aliases: []string{"reload_mcp"}, OutOfBand: true,
		Summary: "read the MCP servers from the config file again: changed ones reconnect, unchanged ones go on",
		Handle: func(ctx context.Context, call *sessions.CommandCall) error {
			reloaded, err := r.Reload()
			text := ReloadedText(file, reloaded)
			if err != nil {
				text = "The MCP servers were not reloaded: " + err.Error()
			}
			if err := call.Reply(ctx, text); err != nil || call.Redelivered() || file == "" {
				return err
			}
			// Every other gateway reads its own file again too.
			return base.Store.Signals().Signal(ctx, signals.Signal{Conv: call.In.Conv, Kind: SignalReload, Text: base.Name})
		},
	})
	if err != nil {
		return nil, err
	}
	c := &capability.Capability{Signals: r}
	if len(base.Config.MCPServers) > 0 || file != "" {
		c.Components = []capability.Component{{Name: "mcp", Loop: m}, {Name: "mcp-reload", Loop: r}}
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
