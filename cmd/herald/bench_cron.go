package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
	"github.com/heraldgw/herald/cronjobs"
)

func (m *Main) benchCronCommand() *cobra.Command {
	var (
		opt    bench.CronOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "Measure the cron scheduler: fire lateness and CPU, and double fires across instances",
		Long: `Make --jobs jobs that repeat every --every, all due at the same second a
little ahead (the harsh case: every job on one-minute schedules due at the
top of the same minute), and run the gateway's own scheduler over them on
the real clock for --duration from that second. The jobs, each with its
output directory, are made as the gateway makes them, on the first
instance. Each fire is claimed once in the store, its job moved on, its
run recorded and its output saved. The
agent is an in-process function that answers at once, so a fire's cost is
the scheduler's and the store's. The jobs deliver locally: each run's
output is saved (in a temporary directory) and nothing is queued in the
outbox.

It reports each fire's lateness (its run's start less its scheduled time),
p50, p99 and the worst, beside the target p99 (≤ 1 s on Redis, ≤ 2 s on
SQLite); the CPU time used per 1,000 fires, this process's and on Redis
the server's; and the fires missed (not run before the slot after the
last) and run twice.

On Redis it then does the same over fresh jobs with --instances
schedulers in this process, each with its own name and store connection,
as that many gateways sharing one Redis would, and reports the fires each
ran and the fires run more than once (target 0). SQLite is one process's
store, so that phase runs on Redis only.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Jobs < 1 {
				return usagef("--jobs must be at least 1")
			}
			if opt.Every < cronjobs.MinEvery {
				return usagef("--every must be at least %s", cronjobs.MinEvery)
			}
			if opt.Duration < 0 || opt.Instances < 0 {
				return usagef("--duration and --instances may not be negative")
			}
			if opt.Instances == 0 {
				opt.Instances = -1 // none: the option's zero is the default
			}
			res, err := bench.Cron(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchCron)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Jobs, "jobs", bench.DefaultCronJobs, "jobs, all due at the same second")
	f.DurationVar(&opt.Every, "every", bench.DefaultCronEvery, "the jobs' interval")
	f.DurationVar(&opt.Duration, "duration", bench.DefaultCronDuration, "how long each phase fires, from the first fire")
	f.IntVar(&opt.Instances, "instances", bench.DefaultCronInstances, "schedulers sharing the Redis in the second phase; 0 skips it")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the SQLite files and the runs' outputs are made, and removed (default the system's)")
	return cmd
}

func printBenchCron(m *Main, r bench.CronResult) error {
	if _, err := fmt.Fprintf(m.Stdout,
		"store %s, %d jobs every %gs, all due at the same second, %d slots; %d fires at once per scheduler; writing the jobs took %.1f s\n",
		r.Store, r.Jobs, r.EveryS, r.Slots, r.MaxFires, r.CreationS); err != nil {
		return err
	}
	if err := printCronPhase(m, "one instance", r.Single, r); err != nil {
		return err
	}
	if r.Multi == nil {
		return nil
	}
	return printCronPhase(m, fmt.Sprintf("%d instances on one Redis", r.Multi.Instances), *r.Multi, r)
}

func printCronPhase(m *Main, title string, p bench.CronPhase, r bench.CronResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"%s: %d fires of %d expected, per instance %v\n"+
			"  lateness      p50 %8.1f ms   p99 %8.1f ms   max %8.1f ms   target p99 ≤ %g ms%s\n"+
			"  each slot's   p99 %s ms\n"+
			"  slot done     %8.2f s after its time (the slowest slot's last fire ended)\n"+
			"  cpu           %8.1f ms per 1,000 fires this process",
		title, p.Fires, p.Expected, p.PerInstance,
		p.LatenessP50Ms, p.LatenessP99Ms, p.LatenessMaxMs, r.TargetLatenessP99Ms, missedMark(p.LatenessP99Ms, r.TargetLatenessP99Ms),
		slotP99s(p.SlotP99Ms),
		p.SlotDoneS, p.CPUMsPer1000)
	if err != nil {
		return err
	}
	if p.ServerCPUMsPer1000 > 0 {
		if _, err := fmt.Fprintf(m.Stdout, ", %.1f ms the store's server", p.ServerCPUMsPer1000); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(m.Stdout, "\n  double fires  %8d   target %d%s\n  missed fires  %8d\n",
		p.Double, r.TargetDoubleFires, missedMark(float64(p.Double), float64(r.TargetDoubleFires)), p.Missed)
	if err != nil {
		return err
	}
	if p.Stray > 0 || p.Warnings > 0 {
		_, err = fmt.Fprintf(m.Stdout, "  stray fires %d; %d warnings logged, the first: %s\n", p.Stray, p.Warnings, p.FirstWarning)
	}
	return err
}

// slotP99s lists the slots' p99s: "812.4, 640.1".
func slotP99s(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, ", ")
}
