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
		Short: "Measure what a pool of API keys over the store adds to a model request",
		Long: `Make --requests model requests through the OpenAI client with a pool of
--keys keys kept in the store, --clients at once, to a model's server on
loopback that answers at once, as the gateway's requests go; beside it,
in the same run, the same client with one key and no pool, the ceiling.
The two take turns. With --conversations N the requests are of N
conversations in turn (a pool of several keys keeps each on its key).
It reports p50 and p99 per request in microseconds, the calls the pool
made of the store while they ran (the uses it counted are written
together, once a second), and the uses the store holds at the end.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Requests < 1 || opt.Keys < 1 || opt.Clients < 1 || opt.Conversations < 0 {
				return usagef("--requests, --keys and --clients must be positive, --conversations not negative")
			}
			res, err := bench.Pool(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchPool)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Requests, "requests", bench.DefaultPoolRequests, "model requests on each side")
	f.IntVar(&opt.Keys, "keys", bench.DefaultPoolKeys, "keys in the pool")
	f.IntVar(&opt.Clients, "clients", bench.DefaultPoolClients, "requests at once")
	f.IntVar(&opt.Conversations, "conversations", 0, "conversations the requests are of, in turn (0: none)")
	f.StringVar(&opt.Strategy, "strategy", "round_robin", "the pool's strategy (model.strategy)")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the SQLite files are made, and removed (default the system's)")
	return cmd
}

func printBenchPool(m *Main, r bench.PoolResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"store %s, %d keys (%s), %d requests, %d at once, %d conversations\n"+
			"with the pool   p50 %8.1f µs   p99 %8.1f µs   (a model request, its key from the pool over the store)\n"+
			"bare client     p50 %8.1f µs   p99 %8.1f µs   (the same request, one key, no pool)\n"+
			"store calls     %d, %.4f a request; uses counted %d\n",
		r.Store, r.Keys, r.Strategy, r.Requests, r.Clients, r.Conversations,
		r.P50Us, r.P99Us, r.BareP50Us, r.BareP99Us, r.StoreCalls, r.PerRequest, r.Counted)
	return err
}
