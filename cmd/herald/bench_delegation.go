package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchDelegationCommand() *cobra.Command {
	var (
		opt    bench.DelegationOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "delegation",
		Short: "Measure background work: a dispatch's cost, a fan-out of children back to their parents",
		Long: `Run turns that call delegate_task through the gateway's own pipeline (the
router, the turn worker with the real agent and tools, the store, the
runner that owns children and the deliverer that brings their results
back), with the model simulated in process.

First the dispatch: --dispatch-turns turns that call delegate_task with
--tasks tasks, and as many that call, with the same arguments, a tool
the gateway does not have (the no-op), alternated, one at a time. The
runner runs one child at most, whose model call waits, so the others
stay pending and only the dispatch is measured. The overhead is what a
dispatching turn takes beyond the no-op one, from its first model call
to its commit.

Then, on a fresh store, the fan-out: --sessions conversations dispatch
--tasks children each at once; every child's one model call takes
--child-delay and the parents' calls are instant; the runner may run
them all at once. It reports the time from the first dispatch until
every completion's parent turn had started, the steps in between, the
latency from a delegation's last child's end being recorded to its
parent's turn starting, and the peak resident memory.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.DispatchTurns < 1 || opt.Sessions < 1 || opt.Tasks < 1 {
				return usagef("--dispatch-turns, --sessions and --tasks must be at least 1")
			}
			if opt.ChildDelay < 0 {
				return usagef("--child-delay may not be negative")
			}
			res, err := bench.Delegation(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchDelegation)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.DispatchTurns, "dispatch-turns", bench.DefaultDispatchTurns, "turns of each kind in the dispatch phase")
	f.IntVar(&opt.Sessions, "sessions", bench.DefaultFanSessions, "conversations that dispatch at once in the fan-out")
	f.IntVar(&opt.Tasks, "tasks", bench.DefaultFanTasks, "tasks a dispatch carries (and delegation.max_concurrent_children)")
	f.DurationVar(&opt.ChildDelay, "child-delay", bench.DefaultChildDelay, "how long each child's model call takes")
	return cmd
}

func printBenchDelegation(m *Main, r bench.DelegationResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"store %s\n"+
			"dispatch of %d tasks, %d turns of each kind, one at a time (agent called to commit):\n"+
			"  delegate_task turn  p50 %7.3f ms   p99 %7.3f ms\n"+
			"  no-op tool turn     p50 %7.3f ms   p99 %7.3f ms\n"+
			"    delegate_task's handler  p50 %7.3f ms   p99 %7.3f ms\n"+
			"    its commit               p50 %7.3f ms   p99 %7.3f ms   (the no-op turn's: p50 %.3f ms, p99 %.3f ms)\n"+
			"  overhead            p50 %7.3f ms   p99 %7.3f ms   target p99 ≤ %g ms%s\n"+
			"fan-out: %d sessions, %d children, child model %g ms, runner max %d, %d turn workers; from the first dispatch:\n"+
			"  last dispatch committed      %7.3f s\n"+
			"  last child's model called    %7.3f s\n"+
			"  last child's end recorded    %7.3f s\n"+
			"  last completion delivered    %7.3f s\n"+
			"  all parent turns started     %7.3f s   target ≤ %g s%s\n"+
			"  completion latency  p50 %7.3f ms   p99 %7.3f ms   (end recorded to parent turn started)\n"+
			"  cpu                 %7.3f s this process",
		r.Store,
		r.DispatchTasks, r.DispatchTurns,
		r.DispatchTurnP50Ms, r.DispatchTurnP99Ms,
		r.NoopTurnP50Ms, r.NoopTurnP99Ms,
		r.DispatchToolP50Ms, r.DispatchToolP99Ms,
		r.DispatchCommitP50Ms, r.DispatchCommitP99Ms, r.NoopCommitP50Ms, r.NoopCommitP99Ms,
		r.DispatchOverheadP50Ms, r.DispatchOverheadP99Ms, r.TargetOverheadMs, missedMark(r.DispatchOverheadP99Ms, r.TargetOverheadMs),
		r.Sessions, r.Children, r.ChildDelayMs, r.RunnerMax, r.TurnWorkers,
		r.DispatchSpreadS, r.AllChildrenStartedS, r.AllChildrenEndedS, r.AllCompletionsDeliveredS,
		r.AllParentTurnsStartedS, r.TargetAllStartedS, missedMark(r.AllParentTurnsStartedS, r.TargetAllStartedS),
		r.CompletionLatencyP50Ms, r.CompletionLatencyP99Ms,
		r.FanCPUS)
	if err != nil {
		return err
	}
	if r.FanServerCPUS > 0 {
		if _, err := fmt.Fprintf(m.Stdout, ", %.3f s the store's server", r.FanServerCPUS); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(m.Stdout, "\n  peak RSS            %7.1f MiB\n", r.PeakRSSMB)
	return err
}

// missedMark marks a figure above its target.
func missedMark(v, target float64) string {
	if v > target {
		return ", missed"
	}
	return ""
}
