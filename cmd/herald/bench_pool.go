package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchPoolCommand() *cobra.Command {
	var (
		opt    bench.PoolOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Measure what choosing a model request's API key costs",
		Long: `Choose the key of --requests model requests from a pool of --keys keys
kept in the store, --clients at once, as every model request does before
its first attempt: the keys' states read with the store's clock, the
strategy's choice, the use counted. Beside it, in the same run, the raw
ceiling: the bare round trips any pool shared through the store makes at
least (SQLite: a SELECT of the pool's rows and an upsert of one count,
WAL without fsync at commit as herald's bookkeeping writes; Redis:
HGETALL and HINCRBY). The two take turns. It reports p50 and p99 per
request, in microseconds.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Requests < 1 || opt.Keys < 1 || opt.Clients < 1 {
				return usagef("--requests, --keys and --clients must be positive")
			}
			res, err := bench.Pool(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchPool)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Requests, "requests", bench.DefaultPoolRequests, "requests a key is chosen for")
	f.IntVar(&opt.Keys, "keys", bench.DefaultPoolKeys, "keys in the pool")
	f.IntVar(&opt.Clients, "clients", bench.DefaultPoolClients, "requests choosing at once")
	f.StringVar(&opt.Strategy, "strategy", "round_robin", "the pool's strategy (model.strategy)")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the SQLite files are made, and removed (default the system's)")
	return cmd
}

func printBenchPool(m *Main, r bench.PoolResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"store %s, %d keys (%s), %d requests, %d at once\n"+
			"herald   p50 %8.1f µs   p99 %8.1f µs   (a key chosen, its use counted)\n"+
			"raw      p50 %8.1f µs   p99 %8.1f µs   (the bare read and count)\n",
		r.Store, r.Keys, r.Strategy, r.Requests, r.Clients,
		r.P50Us, r.P99Us, r.RawP50Us, r.RawP99Us)
	return err
}
