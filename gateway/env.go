package gateway

import (
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/proc"
)

// SubprocessEnv is how the environment of every process a gateway with
// cfg starts is built (the terminal tool's commands, cron scripts, kanban
// lanes, completion checks): the base set and tools.env_passthrough,
// never a variable that sets one of herald's secrets or holds one of
// their values.
func SubprocessEnv(cfg config.Config) *proc.Env {
	return &proc.Env{
		Passthrough: cfg.Tools.EnvPassthrough,
		Withheld:    config.SecretVariables(),
		Secrets:     cfg.Secrets(),
	}
}
