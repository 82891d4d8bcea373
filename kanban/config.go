package kanban

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
)

// ServiceFor is the board service over store with cfg's settings, its
// board home in $HERALD_HOME/kanban; the CLI and the gateway make theirs
// here. Completion checks run with bash in the card's workspace directory
// (or the current one), in the environment cfg.SubprocessEnv builds.
// Its Redact is the caller's to set (the gateway's redactor, or the
// CLI's).
func ServiceFor(store Store, cfg config.Config) *Service {
	return &Service{
		Store: store, FailureLimit: cfg.Kanban.FailureLimit, CrashGrace: cfg.Kanban.CrashGrace(), Check: completionCheck(cfg.SubprocessEnv()),
		Root: filepath.Join(cfg.Home, "kanban"), Repository: cfg.Tools.Workspace,
		AttachmentMaxBytes: cfg.Kanban.AttachmentMaxBytes,
	}
}

// completionCheck runs a card's completion check in dir with env: it
// passes when the command exits 0.
func completionCheck(env *proc.Env) func(ctx context.Context, k Card, dir string) (string, bool, error) {
	return func(ctx context.Context, k Card, dir string) (string, bool, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", k.CompletionCheck)
		cmd.Dir = dir
		cmd.Env = env.Build()
		proc.OwnGroup(cmd)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), true, nil
		case errors.As(err, &exit):
			return fmt.Sprintf("%s\n(exit %d)", out, exit.ExitCode()), false, nil
		}
		return "", false, fmt.Errorf("running the completion check %q: %w", k.CompletionCheck, err)
	}
}

// LanesFor are the lanes of cfg: a command for each lane that has one,
// its environment built by cfg.SubprocessEnv, and herald's worker agent
// (run, when set) for the lane named HeraldLane and for every lane
// without a command.
func LanesFor(cfg config.Config, run func(ctx context.Context, spec WorkerSpec, model string) error, clk clock.Clock) map[string]LaneConfig {
	env := cfg.SubprocessEnv()
	lanes := map[string]LaneConfig{}
	agentLane := func(model string) LaneConfig {
		return LaneConfig{Lane: FuncLane{Run: func(ctx context.Context, spec WorkerSpec) error {
			return run(ctx, spec, model)
		}}}
	}
	if run != nil {
		lanes[HeraldLane] = agentLane("")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Kanban.Lanes)) {
		l := cfg.Kanban.Lanes[name]
		if l.Command == "" {
			if run != nil {
				lc := agentLane(l.Model)
				lc.MaxConcurrent = l.MaxConcurrent
				lanes[name] = lc
			}
			continue
		}
		given := make([]string, 0, len(l.Env))
		for _, k := range slices.Sorted(maps.Keys(l.Env)) {
			given = append(given, k+"="+l.Env[k])
		}
		lanes[name] = LaneConfig{
			Lane:              CommandLane{Command: l.Command, Args: l.Args, Env: given, Inherit: env, Workdir: l.Workdir, Clock: clk},
			MaxConcurrent:     l.MaxConcurrent,
			ExitZeroCompletes: l.ExitZeroCompletes,
		}
	}
	return lanes
}

// TokensFor are the worker tokens of a gateway with cfg. Their key comes
// from http.api_key, so every instance that shares it checks the tokens
// of all; with no API key each process has a key of its own, and a
// worker reports to the gateway that started it.
func TokensFor(cfg config.Config) Tokens {
	if cfg.HTTP.APIKey != "" {
		sum := sha256.Sum256([]byte("herald kanban worker tokens\x00" + cfg.HTTP.APIKey))
		return Tokens{Key: sum[:]}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return Tokens{Key: key}
}

// DispatcherOptionsFor are the options of a dispatcher of svc running
// lanes, set from kanban.*: the gateway's and `herald kanban daemon`'s
// alike. The caller names the process (Name, Host) and sets what its
// workers are told (Env), the signals it hears, its clock and logger.
func DispatcherOptionsFor(cfg config.Kanban, svc *Service, lanes map[string]LaneConfig) DispatcherOptions {
	return DispatcherOptions{
		Service:         svc,
		Lanes:           lanes,
		Interval:        cfg.DispatchInterval(),
		ClaimTTL:        cfg.ClaimTTL(),
		MaxSpawn:        cfg.MaxSpawn,
		DefaultAssignee: cfg.DefaultAssignee,
		ReviewDispatch:  cfg.ReviewDispatch,
		ReviewLane:      cfg.ReviewLane,
		RateLimitWait:   cfg.RateLimitWait(),
	}
}
