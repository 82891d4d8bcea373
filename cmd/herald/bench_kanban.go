package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchKanbanCommand() *cobra.Command {
	var (
		opt    bench.KanbanOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "kanban",
		Short: "Measure the boards: create+claim+complete cycles/s, and a dispatch of many ready cards",
		Long: `Run --cycles card cycles through the board service at each of --clients
concurrencies: each client creates a ready card, claims it for a lane and
completes it, then the next. It reports cycles/s and a cycle's latency
beside the raw ceiling measured in the same run at the same concurrency:
the same store round trips herald makes, each of the simplest kind that
writes as much (on SQLite one transaction per write with the same
durability, synchronous=FULL; on Redis a MULTI/EXEC per write; a claim
commits without its fsync on SQLite, as herald's does). The two loops
take turns. The targets are multiples of a reference platform's
sequential cycles/s (--reference, measured on the same disk beside the
run with scripts/reference-kanban): at 1 client twice it on SQLite and
five times on Redis, at 32 clients ten times it.

Then it makes --cards ready cards and starts the gateway's dispatcher
over them with a lane whose workers start, do nothing and hold their
card, and as many workers at once as cards: the time until every card
was claimed and its worker started, beside the raw ceiling of the same
store round trips one card after another.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Cycles < 1 {
				return usagef("--cycles must be at least 1")
			}
			if len(opt.Clients) == 0 {
				return usagef("--clients names no concurrency")
			}
			for _, c := range opt.Clients {
				if c < 1 {
					return usagef("--clients must each be at least 1")
				}
			}
			if opt.Cards < 0 {
				return usagef("--cards may not be negative")
			}
			if opt.ReferencePerS <= 0 {
				return usagef("--reference must be positive")
			}
			if opt.Cards == 0 {
				opt.Cards = -1 // none: the option's zero is the default
			}
			res, err := bench.Kanban(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchKanban)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Cycles, "cycles", bench.DefaultKanbanCycles, "create+claim+complete cycles at each concurrency")
	f.IntSliceVar(&opt.Clients, "clients", bench.DefaultKanbanClients, "concurrent clients, each a run of its own")
	f.IntVar(&opt.Cards, "cards", bench.DefaultKanbanCards, "ready cards dispatched at once; 0 skips the dispatch")
	f.Float64Var(&opt.ReferencePerS, "reference", bench.DefaultKanbanReferencePerS, "the reference's sequential cycles/s the targets are multiples of")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the SQLite files and the workspaces are made, and removed (default the system's)")
	return cmd
}

func printBenchKanban(m *Main, r bench.KanbanResult) error {
	if _, err := fmt.Fprintf(m.Stdout, "store %s; the reference makes %.0f sequential cycles/s\n", r.Store, r.ReferencePerS); err != nil {
		return err
	}
	for _, c := range r.Cycles {
		target := "—"
		switch {
		case c.TargetPerS > 0:
			target = fmt.Sprintf("≥ %.0f/s%s", c.TargetPerS, belowMark(c.CyclesPerS, c.TargetPerS, c.CyclesPerS < c.TargetPerS))
		}
		_, err := fmt.Fprintf(m.Stdout,
			"%d clients, %d cycles (%d done once)\n"+
				"  herald  %9.0f cycles/s   p50 %7.2f ms   p99 %7.2f ms   target %s\n"+
				"  raw     %9.0f cycles/s   p50 %7.2f ms   p99 %7.2f ms\n"+
				"  ratio   %9.2f            cpu %.0f µs a cycle",
			c.Clients, c.Cycles, c.Done,
			c.CyclesPerS, c.P50Ms, c.P99Ms, target,
			c.RawPerS, c.RawP50Ms, c.RawP99Ms,
			c.Ratio, c.CPUUsPerCycle)
		if err != nil {
			return err
		}
		if c.ServerCPUUsPerCycle > 0 {
			if _, err := fmt.Fprintf(m.Stdout, ", %.0f µs the store's server", c.ServerCPUUsPerCycle); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(m.Stdout); err != nil {
			return err
		}
	}
	d := r.Dispatch
	if d == nil {
		return nil
	}
	_, err := fmt.Fprintf(m.Stdout,
		"dispatch of %d ready cards, %d workers at once: %d started (%d twice), %d running\n"+
			"  herald  %8.2f s to the last start   %7.0f cards/s   cpu %.0f µs a card",
		d.Cards, d.MaxSpawn, d.Started, d.Double, d.Running,
		d.AllStartedS, d.CardsPerS, d.CPUUsPerCard)
	if err != nil {
		return err
	}
	if d.ServerCPUUsPerCard > 0 {
		if _, err := fmt.Fprintf(m.Stdout, ", %.0f µs the store's server", d.ServerCPUUsPerCard); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(m.Stdout, "\n  raw     %8.2f s                    %7.0f cards/s\n  ratio   %8.2f\n", d.RawS, d.RawPerS, d.Ratio)
	if err != nil {
		return err
	}
	if d.Warnings > 0 {
		_, err = fmt.Fprintf(m.Stdout, "  %d warnings logged, the first: %s\n", d.Warnings, d.FirstWarning)
	}
	return err
}

// belowMark marks a rate that misses its target.
func belowMark(v, target float64, missed bool) string {
	if missed {
		return fmt.Sprintf(", missed by %.0f%%", 100*(1-v/target))
	}
	return ""
}
