package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
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
	var (
		asJSON bool
		revive string
	)
	keys := &cobra.Command{
		Use:   "keys",
		Short: "List the API keys of the model and its fallbacks: cooling, dead, uses",
		Long: `Each key of model.credentials (or HERALD_MODEL_API_KEYS, or
model.api_key) and of each of model.fallbacks, masked, with its state as
every gateway on the store sees it: ok, cooling until a time (and what
cooled it: rate limit, billing, a rejected key), or dead (the provider
called it invalid or revoked; it stays out, for every pool on its host,
until revived), and how many requests it was chosen for.

--revive ID clears the dead or cooling mark of the key of that ID (the
ID column), for every gateway on the store: for a key the provider took
back, or an account topped up. A key replaced in the config needs none:
a new key is a new ID.`,
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
			if revive != "" {
				return m.reviveKey(ctx, pools, revive)
			}
			rows, err := pools.Keys(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return m.printJSON(rows)
			}
			return m.printKeys(rows)
		},
	}
	keys.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the keys")
	keys.Flags().StringVar(&revive, "revive", "", "clear the dead or cooling mark of the key of this `ID`, for every gateway on the store")
	cmd.AddCommand(keys)
	return cmd
}

// reviveKey clears the marks of key id in each pool holding it.
func (m *Main) reviveKey(ctx context.Context, pools llm.ModelPools, id string) error {
	models, err := pools.Revive(ctx, id)
	for _, model := range models {
		fmt.Fprintf(m.Stdout, "revived key %s of %s\n", id, model)
	}
	switch {
	case errs.CodeOf(err) == errs.NotFound:
		return errs.E("herald model keys", errs.NotFound, "no key of id %q in model.credentials or model.fallbacks; `herald model keys` lists the IDs", id)
	case err != nil:
		return fmt.Errorf("reviving key %s: %w", id, err)
	}
	return nil
}

func (m *Main) printKeys(rows []llm.ModelKey) error {
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MODEL\tID\tKEY\tLABEL\tPRIORITY\tSTATUS\tUNTIL\tREASON\tUSES")
	for _, r := range rows {
		until := "-"
		if !r.CoolingUntil.IsZero() {
			until = r.CoolingUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", r.Model, r.ID, r.Key, orDash(r.Label), r.Priority, r.Status, until, orDash(string(r.Reason)), r.Uses)
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
