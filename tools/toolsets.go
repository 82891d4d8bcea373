package tools

import "github.com/heraldgw/herald/config"

// Toolsets are the tool sets herald's agent runs with under cfg: Core,
// delegation, cron, the kanban board, and Workspace when tools.workspace
// is set. The packages of the middle three import this one, so their
// names are written out here; Registry.Set refuses a name no package
// registered, which a gateway's start would report.
func Toolsets(cfg config.Config) []string {
	sets := []string{Core, "delegation", "cron", "kanban"}
	if cfg.Tools.Workspace != "" {
		sets = append(sets, Workspace)
	}
	return sets
}
