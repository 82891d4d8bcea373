package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchCommand() *cobra.Command {
	var (
		profile, memProfile string
		out                 *os.File
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure herald's stores and its turn pipeline",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
		// A CPU profile of the whole run (go tool pprof reads it) shows
		// where a turn's time goes on herald's side.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if profile == "" {
				return nil
			}
			f, err := os.Create(profile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return err
			}
			out = f
			return nil
		},
		PersistentPostRunE: func(*cobra.Command, []string) error {
			if err := writeAllocProfile(memProfile); err != nil {
				return err
			}
			if out == nil {
				return nil
			}
			pprof.StopCPUProfile()
			return out.Close()
		},
	}
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the run to this file")
	cmd.PersistentFlags().StringVar(&memProfile, "memprofile", "", "write a profile of the run's allocations to this file")
	cmd.AddCommand(m.benchQueueCommand(), m.benchPipelineCommand(), m.benchDelegationCommand(), m.benchCronCommand(), m.benchKanbanCommand(), m.benchStreamCommand(), m.benchPoolCommand(), m.benchOutboxCommand(), m.benchMediaCommand(), m.benchMCPCommand(), m.benchApprovalsCommand(), m.benchDashboardCommand(), benchMCPServerCommand())
	return cmd
}

func (m *Main) benchQueueCommand() *cobra.Command {
	var (
		opt    bench.QueueOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Measure the turn queue against the backend's raw ceiling",
		Long: `Push entries through the turn queue (append, claim, finish) with
concurrent conversations and as many workers, then report entries/s and
append-to-finish latency beside the raw ceiling measured in the same run on
the same backend at the same concurrency: bare XADD, XREADGROUP and XACK on
Redis; bare INSERT and DELETE transactions with the same durability on
SQLite.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Entries < 1 || opt.Conversations < 1 {
				return usagef("--entries and --conversations must be at least 1")
			}
			res, err := bench.Queue(cmd.Context(), opt)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(m.Stdout).Encode(res)
			}
			_, err = fmt.Fprintf(m.Stdout,
				"store %s, %d entries, %d conversations\n"+
					"herald  %9.0f entries/s   p50 %7.3f ms   p99 %7.3f ms\n"+
					"raw     %9.0f entries/s   p50 %7.3f ms   p99 %7.3f ms\n"+
					"ratio   %9.2f\n",
				res.Store, res.Entries, res.Conversations,
				res.EntriesPerS, res.P50Ms, res.P99Ms,
				res.RawPerS, res.RawP50Ms, res.RawP99Ms,
				res.Ratio)
			return err
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Entries, "entries", bench.DefaultEntries, "entries to push through the queue")
	f.IntVar(&opt.Conversations, "conversations", bench.DefaultConversations, "concurrent conversations (and workers)")
	return cmd
}

// benchStoreFlags are the flags every benchmark of a store takes: which
// one, where the Redis is, and --json.
func benchStoreFlags(f *pflag.FlagSet, store, redisURL *string, asJSON *bool) {
	f.StringVar(store, "store", "sqlite", "backend to measure: sqlite or redis")
	f.StringVar(redisURL, "redis-url", "", "Redis to measure (default $REDIS_URL, else "+bench.DefaultRedisURL+")")
	f.BoolVar(asJSON, "json", false, "print one JSON object")
}

// benchStore checks --store and fills in the Redis a run measures when
// --redis-url did not name one.
func (m *Main) benchStore(store string, redisURL *string) error {
	if store != "sqlite" && store != "redis" {
		return usagef("--store is %q; want sqlite or redis", store)
	}
	if *redisURL == "" {
		*redisURL = m.Getenv("REDIS_URL")
	}
	return nil
}

// printBench prints what a benchmark measured: one JSON object, or
// print's lines.
func printBench[R any](m *Main, asJSON bool, res R, err error, print func(*Main, R) error) error {
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	return print(m, res)
}

// writeAllocProfile writes what the run allocated, and what of it was
// still live at the last collection, to file (none when file is "").
func writeAllocProfile(file string) error {
	if file == "" {
		return nil
	}
	return bench.WriteProfile("allocs", file, 0)
}
