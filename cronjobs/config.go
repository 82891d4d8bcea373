package cronjobs

import (
	"path/filepath"

	"github.com/heraldgw/herald/config"
)

// localAPI is the local API's platform (adapters/api.Platform; that
// package imports this one): every gateway serves it.
const localAPI = "api"

// TargetsFor is where the jobs of a gateway with cfg's platforms can
// deliver: each platform's home channel, and the platforms served (the
// local API always is).
func TargetsFor(cfg config.Config, platforms []string) Targets {
	return Targets{
		Homes: map[string]string{
			"telegram": cfg.Platforms.Telegram.HomeChannel,
			"slack":    cfg.Platforms.Slack.HomeChannel,
			"discord":  cfg.Platforms.Discord.HomeChannel,
		},
		Platforms: append([]string{localAPI}, platforms...),
	}
}

// OutputsFor is where the runs' outputs of a gateway with cfg are kept:
// $HERALD_HOME/cron/output.
func OutputsFor(cfg config.Config) Outputs {
	return Outputs{Dir: filepath.Join(cfg.Home, "cron", "output")}
}

// ManagerFor is the manager of the jobs on store of a gateway with cfg
// and the platforms named (TargetsFor): the one the gateway and the CLI
// both build, which sets Changed and Clock where it needs them.
func ManagerFor(cfg config.Config, store Store, platforms []string) Manager {
	return Manager{
		Store:      store,
		Outputs:    OutputsFor(cfg),
		Targets:    TargetsFor(cfg, platforms),
		Timezone:   cfg.Cron.Timezone,
		Toolsets:   cfg.Toolsets(),
		ScriptsDir: cfg.CronScriptsDir(),
	}
}
