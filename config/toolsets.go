package config

import "github.com/heraldgw/herald/tools"

// Toolsets are the tool sets herald's agent runs with under c: Core,
// delegation, cron, the kanban board, Workspace when tools.workspace is
// set, and the MCP servers' live toolset (mcp), empty while no server
// is configured, so that a server the config file gains while herald
// runs (/reload-mcp) is offered at once. The
// packages of delegation, cron, kanban and mcp import tools and config,
// so their names are written out here; Registry.Set refuses a name no
// package registered, which a gateway's start would report.
func (c Config) Toolsets() []string {
	sets := []string{tools.Core, "delegation", "cron", "kanban"}
	if c.Tools.Workspace != "" {
		sets = append(sets, tools.Workspace)
	}
	return append(sets, "mcp") // the MCP servers' live toolset
}
