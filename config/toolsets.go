package config

import "github.com/heraldgw/herald/tools"

// Toolsets are the tool sets herald's agent runs with under c: Core,
// delegation, cron, the kanban board, and Workspace when tools.workspace
// is set. The packages of the middle three import tools and config, so
// their names are written out here; Registry.Set refuses a name no
// package registered, which a gateway's start would report.
func (c Config) Toolsets() []string {
	sets := []string{tools.Core, "delegation", "cron", "kanban"}
	if c.Tools.Workspace != "" {
		sets = append(sets, tools.Workspace)
	}
	return sets
}
