package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/redact"
)

// shutdownSlack is added to the grace and drain periods to bound a
// shutdown: closing the store and the HTTP server take a moment too.
const shutdownSlack = 5 * time.Second

func (m *Main) gatewayCommand() *cobra.Command {
	var (
		path     string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway until SIGINT or SIGTERM",
		Long: `Run the gateway until SIGINT or SIGTERM: the local HTTP API, the turn
workers, the delivery workers and the adapters configured.

The config is read from --config, else $HERALD_CONFIG, else
$HERALD_HOME/herald.yaml if it exists; the environment overrides it (see
'herald config check'). Logs are JSON lines on stderr, secrets masked.

On SIGINT or SIGTERM the gateway stops taking work, lets running turns
finish within the grace period (workers.shutdown_grace, 20s unless set),
hands back those that do not, and sends the replies already written
(for workers.delivery_drain, 5s unless set). A second signal stops it at
once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := parseLevel(logLevel)
			if err != nil {
				return err
			}
			cfg, err := m.loadConfig(path)
			if err != nil {
				return err
			}
			log := redact.NewLogger(m.Stderr, level, redact.New(cfg.Secrets()))
			gateway.LogRedisClient(log)
			g, err := gateway.New(cfg, gateway.Options{Logger: log, Lookup: m.lookupEnv, Version: buildVersion().Version})
			if err != nil {
				return err
			}
			// The command's context ends on the first signal; the gateway
			// must outlive it to shut down gracefully.
			ctx := cmd.Context()
			if err := g.Start(context.WithoutCancel(ctx)); err != nil {
				_ = g.Shutdown(context.Background())
				return err
			}
			<-ctx.Done()
			stopCtx, cancel := context.WithTimeout(context.Background(), g.StopTimeout()+shutdownSlack)
			defer cancel()
			if err := g.Shutdown(stopCtx); err != nil {
				return fmt.Errorf("stopping the gateway: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	configFlag(f, &path)
	f.StringVar(&logLevel, "log-level", "info", "least severe log level shown: debug, info, warn or error")
	return cmd
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, usagef("--log-level is %q; want debug, info, warn or error", s)
	}
	return l, nil
}
