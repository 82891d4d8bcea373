package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
	"github.com/heraldgw/herald/config"
)

func (m *Main) benchPipelineCommand() *cobra.Command {
	var (
		opt    bench.PipelineOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Measure a turn's way through the gateway, from router to adapter",
		Long: `Send turns through the gateway's own pipeline: delivered to the router as
an adapter delivers them, queued in the store, run by the turn worker,
their replies written to the outbox and sent by the delivery worker to an
adapter that records when each arrived. The model is simulated in
process and answers after --model-delay (none by default), so what a turn
takes beyond that is herald's; with --http-model it is a server on
loopback that the gateway asks through its own client and key pool, as
a deployment asks a model's server.

By default it reports turns/s with --conversations in flight beside the
raw ceiling of the store measured in the same run at the same
concurrency (bare XADD, XREADGROUP and XACK on Redis; bare INSERT and
DELETE transactions with the same durability on SQLite), and the latency
herald adds to a turn when turns come one at a time.

With --inflight N it delivers N turns to N conversations at once and
reports when every reply had reached the adapter, and the peak resident
memory meanwhile; try --model-delay 2s --inflight 10000.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Turns < 1 || opt.Conversations < 1 {
				return usagef("--turns and --conversations must be at least 1")
			}
			if opt.InFlight < 0 || opt.ModelDelay < 0 || opt.TurnWorkers < 0 || opt.Deliveries < 0 {
				return usagef("--inflight, --model-delay, --turn-workers and --deliveries may not be negative")
			}
			if opt.RedisMode != config.RedisSingle && opt.RedisMode != config.RedisCluster {
				return usagef("--redis-mode is %q; want single or cluster", opt.RedisMode)
			}
			if opt.WaitReplicas < 0 {
				return usagef("--wait-replicas may not be negative")
			}
			if opt.TurnWorkers > 0 && opt.TurnWorkers < opt.InFlight {
				return usagef("--turn-workers %d is below --inflight %d: the turns could not all run at once", opt.TurnWorkers, opt.InFlight)
			}
			res, err := bench.Pipeline(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printPipeline)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Turns, "turns", bench.DefaultPipelineTurns, "turns to send through the pipeline")
	f.IntVar(&opt.Conversations, "conversations", bench.DefaultConversations, "conversations with a turn in flight at once")
	f.DurationVar(&opt.ModelDelay, "model-delay", 0, "how long the simulated model takes per turn")
	f.BoolVar(&opt.HTTPModel, "http-model", false, "serve the model on loopback over HTTP and ask it through the gateway's own client and key pool")
	f.IntVar(&opt.InFlight, "inflight", 0, "deliver this many turns to as many conversations at once instead")
	f.StringVar(&opt.PeakProfile, "peakprofile", "", "with --inflight: write a profile of the live heap to this file once every turn waits on the model (its collection changes the figures)")
	f.IntVar(&opt.TurnWorkers, "turn-workers", 0, "workers.turns (default the config's, raised to --conversations and --inflight)")
	f.IntVar(&opt.Deliveries, "deliveries", 0, "workers.deliveries (default the config's)")
	f.StringVar(&opt.RedisMode, "redis-mode", config.RedisSingle, "store.redis_mode: single, or cluster to take --redis-url as a Redis Cluster's seeds")
	f.IntVar(&opt.WaitReplicas, "wait-replicas", 0, "store.redis_wait_replicas: replicas every commit waits for")
	return cmd
}

func printPipeline(m *Main, res bench.PipelineResult) error {
	model := "in process"
	if res.HTTPModel {
		model = "over HTTP"
	}
	_, err := fmt.Fprintf(m.Stdout, "store %s, %d turns, %d conversations, model %s, delay %g ms, %d turn workers, %d delivery workers\n",
		res.Store, res.Turns, res.Conversations, model, res.ModelDelayMs, res.TurnWorkers, res.Deliveries)
	if err != nil {
		return err
	}
	if res.Mode == "inflight" {
		_, err = fmt.Fprintf(m.Stdout,
			"delivered    %8.3f s\n"+
				"all started  %8.3f s\n"+
				"all committed %7.3f s\n"+
				"all done     %8.3f s\n"+
				"added        p50 %7.3f s   p99 %7.3f s   (beyond the model delay, under the burst)\n"+
				"peak RSS     %8.1f MiB\n"+
				"stacks       %8.1f MiB   (as the last delivery returned; a stack starts at %.0f KiB)\n",
			res.DeliveredS, res.AllStartedS, res.AllCommittedS, res.AllDoneS, res.BurstAddedP50S, res.BurstAddedP99S, res.PeakRSSMB,
			res.StacksMB, res.StackStartKB)
		return err
	}
	_, err = fmt.Fprintf(m.Stdout,
		"herald   %9.0f turns/s     p50 %7.3f ms   p99 %7.3f ms   (loaded)\n"+
			"raw      %9.0f entries/s\n"+
			"ratio    %9.2f\n"+
			"added    p50 %7.3f ms   p99 %7.3f ms   (unloaded, %d turns one at a time)\n"+
			"peak RSS %9.1f MiB\n",
		res.TurnsPerS, res.LoadedP50Ms, res.LoadedP99Ms,
		res.RawPerS, res.Ratio,
		res.AddedP50Ms, res.AddedP99Ms, res.UnloadedTurns,
		res.PeakRSSMB)
	if err != nil || res.CPUUsPerTurn == 0 {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "cpu      %9.1f µs a turn, %.1f µs a raw pass (this process)\n", res.CPUUsPerTurn, res.RawCPUUsPerPass)
	if err != nil || res.ServerCPUUsPerTurn == 0 {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "server   %9.1f µs a turn, %.1f µs a raw pass (the store's server)\n", res.ServerCPUUsPerTurn, res.RawServerCPUUsPerPass)
	return err
}
