package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
)

func (m *Main) gatewayCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway until SIGINT or SIGTERM",
		Long: `Run the gateway until SIGINT or SIGTERM.

The store is SQLite at $HERALD_HOME/herald.db (HERALD_HOME defaults to
~/.herald), or Redis at $REDIS_URL when HERALD_STORE=redis, with every key
under $HERALD_REDIS_PREFIX.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.New(slog.NewJSONHandler(m.Stderr, nil))
			settings, err := storeSettingsFromEnv(m.Getenv)
			if err != nil {
				return err
			}
			db, err := openStore(ctx, settings)
			if err != nil {
				return fmt.Errorf("opening the %s store at %s: %w", settings.Backend, settings.where(), err)
			}
			log.Info("gateway ready", "store", settings.Backend, "at", settings.where())
			<-ctx.Done()
			log.Info("gateway stopping")
			if err := db.Close(); err != nil {
				return fmt.Errorf("closing the store: %w", err)
			}
			log.Info("gateway stopped")
			return nil
		},
	}
}
