package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/llm"
)

// modelTimeout bounds one model command's store calls.
const modelTimeout = 30 * time.Second

func (m *Main) modelCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Show the model's API keys and their state",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	var asJSON bool
	keys := &cobra.Command{
		Use:   "keys",
		Short: "List the API keys of the model and its fallbacks: cooling, dead, uses",
		Long: `Each key of model.credentials (or HERALD_MODEL_API_KEYS, or
model.api_key) and of each of model.fallbacks, masked, with its state as
every gateway on the store sees it: ok, cooling until a time (and what
cooled it: rate limit, billing, a rejected key), or dead (the provider
called it invalid or revoked; it stays out until the configured keys
change), and how many requests it was chosen for.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := m.loadConfig(path)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), modelTimeout)
			defer cancel()
			db, err := gateway.OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				return fmt.Errorf("opening the store: %w", err)
			}
			defer db.Close()
			pools, err := gateway.ModelPools(cfg.Model, db.Pools())
			if err != nil {
				return err
			}
			var rows []keyRow
			for _, p := range pools {
				st, err := p.Pool.Status(ctx)
				if err != nil {
					return fmt.Errorf("reading the keys of %s: %w", p.Model, err)
				}
				for _, s := range st {
					rows = append(rows, keyRow{Model: p.Model, Pool: p.Pool.Name(), KeyStatus: s})
				}
			}
			if asJSON {
				return m.printJSON(rows)
			}
			return m.printKeys(rows)
		},
	}
	keys.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the keys")
	cmd.AddCommand(keys)
	return cmd
}

// keyRow is one key of `herald model keys`.
type keyRow struct {
	Model string `json:"model"` // model@host
	Pool  string `json:"pool"`
	llm.KeyStatus
}

func (m *Main) printKeys(rows []keyRow) error {
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MODEL\tKEY\tLABEL\tPRIORITY\tSTATUS\tUNTIL\tREASON\tUSES")
	for _, r := range rows {
		until := "-"
		if !r.CoolingUntil.IsZero() {
			until = r.CoolingUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", r.Model, r.Key, orDash(r.Label), r.Priority, r.Status, until, orDash(string(r.Reason)), r.Uses)
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
