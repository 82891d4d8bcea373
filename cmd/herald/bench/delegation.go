package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/heraldgw/herald/config"
)

// Defaults for DelegationOptions.
const (
	// DefaultDispatchTurns is how many turns of each kind the dispatch
	// phase runs: enough for a p99 that is not the slowest sample.
	DefaultDispatchTurns = 200
	DefaultFanSessions   = 100
	DefaultFanTasks      = config.DefaultMaxConcurrentChildren
	DefaultChildDelay    = time.Second
)

// The targets the figures are printed beside.
const (
	TargetDispatchOverheadMs = 5.0
	TargetAllTurnsStartedS   = 2.5
)

// DelegationOptions say what Delegation measures.
type DelegationOptions struct {
	Store string // "sqlite" or "redis"
	// DispatchTurns is how many turns of each kind, delegate_task and the
	// no-op tool, the dispatch phase runs; DefaultDispatchTurns when 0.
	DispatchTurns int
	// Sessions dispatch Tasks children each at once in the fan-out phase;
	// DefaultFanSessions and DefaultFanTasks when 0. Tasks is also
	// delegation.max_concurrent_children.
	Sessions int
	Tasks    int
	// ChildDelay is how long each child's one model call takes;
	// DefaultChildDelay when 0. The parents' calls are instant.
	ChildDelay time.Duration
	RedisURL   string // the Redis to measure; DefaultRedisURL when empty
	TempDir    string // where the SQLite files and transcripts are made (and removed); the system's when empty
}

// DelegationResult is one run's figures. The JSON names are what
// `herald bench delegation --json` prints; scripts read them.
type DelegationResult struct {
	Store string `json:"store"`

	// The dispatch phase: DispatchTurns turns that call delegate_task
	// with Tasks tasks and as many that call, with the same arguments, a
	// tool the gateway does not have (the no-op: the same model round
	// trips, nothing run), alternated, one at a time, each in a
	// conversation of its own. The runner runs one child at most, whose
	// model call waits until the gateway stops, so the others stay
	// pending and only the dispatch is measured. A turn's time is from
	// its first model call to its commit returning (the gateway logs the
	// turn's end once it has). The overhead is the dispatch turn's
	// quantile less the no-op turn's.
	DispatchTurns     int     `json:"dispatch_turns"`
	DispatchTasks     int     `json:"dispatch_tasks"`
	DispatchTurnP50Ms float64 `json:"dispatch_turn_p50_ms"`
	DispatchTurnP99Ms float64 `json:"dispatch_turn_p99_ms"`
	NoopTurnP50Ms     float64 `json:"noop_turn_p50_ms"`
	NoopTurnP99Ms     float64 `json:"noop_turn_p99_ms"`
	// Where a dispatching turn's time goes: delegate_task's call, from
	// the model's answer that calls it to the model being asked with its
	// result (the arguments checked, the handler, which counts the
	// conversation's running children and reads its metadata), and the
	// turn's end, from the model's last answer to the commit that writes
	// the delegation with the turn returning; beside the no-op turn's
	// end.
	DispatchToolP50Ms     float64 `json:"dispatch_tool_p50_ms"`
	DispatchToolP99Ms     float64 `json:"dispatch_tool_p99_ms"`
	DispatchCommitP50Ms   float64 `json:"dispatch_commit_p50_ms"`
	DispatchCommitP99Ms   float64 `json:"dispatch_commit_p99_ms"`
	NoopCommitP50Ms       float64 `json:"noop_commit_p50_ms"`
	NoopCommitP99Ms       float64 `json:"noop_commit_p99_ms"`
	DispatchOverheadP50Ms float64 `json:"dispatch_overhead_p50_ms"`
	DispatchOverheadP99Ms float64 `json:"dispatch_overhead_p99_ms"`
	TargetOverheadMs      float64 `json:"target_dispatch_overhead_p99_ms"`

	// The fan-out phase: Sessions conversations get a message at once,
	// each turn dispatches Tasks children, each child's one model call
	// takes ChildDelayMs, and each delegation's completion comes back as
	// a turn of its parent. The runner may run RunnerMax children at
	// once. The times are from the first commit that carried a dispatch
	// until: the last such commit (DispatchSpreadS), the last child's
	// model call began (AllChildrenStartedS), the last child's end was
	// recorded (AllChildrenEndedS, as the runner logs it), the last
	// completion was in its parent's queue (AllCompletionsDeliveredS, as
	// the deliverer logs it once acknowledged) and the last completion's
	// parent turn had started, calling the model
	// (AllParentTurnsStartedS, the figure).
	Sessions                 int     `json:"sessions"`
	Children                 int     `json:"children"`
	ChildDelayMs             float64 `json:"child_delay_ms"`
	RunnerMax                int     `json:"runner_max"`
	TurnWorkers              int     `json:"turn_workers"`
	DispatchSpreadS          float64 `json:"dispatch_spread_s"`
	AllChildrenStartedS      float64 `json:"all_children_started_s"`
	AllChildrenEndedS        float64 `json:"all_children_ended_s"`
	AllCompletionsDeliveredS float64 `json:"all_completions_delivered_s"`
	AllParentTurnsStartedS   float64 `json:"all_parent_turns_started_s"`
	TargetAllStartedS        float64 `json:"target_all_parent_turns_started_s"`
	// The completion latency: from the end of a delegation's last child
	// being recorded (the runner's log of the end that made the
	// completion) to the parent turn that takes the completion calling
	// the model, over the fan-out's completions.
	CompletionLatencyP50Ms float64 `json:"completion_latency_p50_ms"`
	CompletionLatencyP99Ms float64 `json:"completion_latency_p99_ms"`
	// Where the fan-out's time went: the CPU time this process used
	// during it, and on Redis the server's.
	FanCPUS       float64 `json:"fan_cpu_s"`
	FanServerCPUS float64 `json:"fan_server_cpu_s,omitempty"`
	// PeakRSSMB is the process's peak resident memory (VmHWM) in MiB
	// over the fan-out, where Linux lets the mark be reset, else since
	// the process started. 0 where unknown.
	PeakRSSMB float64 `json:"peak_rss_mb,omitempty"`
}

// Delegation runs the delegation benchmark: the dispatch phase on one
// store, then the fan-out on a fresh one, so that the dispatch phase's
// pending children are not the fan-out's runner's work.
func Delegation(ctx context.Context, opt DelegationOptions) (DelegationResult, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return DelegationResult{}, err
	}
	res := DelegationResult{
		Store:             opt.Store,
		DispatchTurns:     opt.DispatchTurns,
		DispatchTasks:     opt.Tasks,
		TargetOverheadMs:  TargetDispatchOverheadMs,
		Sessions:          opt.Sessions,
		Children:          opt.Sessions * opt.Tasks,
		ChildDelayMs:      ms(opt.ChildDelay),
		RunnerMax:         opt.Sessions * opt.Tasks,
		TurnWorkers:       max(config.DefaultTurnWorkers, opt.Sessions),
		TargetAllStartedS: TargetAllTurnsStartedS,
	}
	_, err = onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, 1, func(b backend) (struct{}, error) {
		return struct{}{}, onDelegationPipeline(ctx, b, opt, res, false, func(p *delegationPipeline) error {
			return measureDispatch(ctx, p, opt, &res)
		})
	})
	if err != nil {
		return res, fmt.Errorf("dispatch phase: %w", err)
	}
	_, err = onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, opt.Sessions, func(b backend) (struct{}, error) {
		return struct{}{}, onDelegationPipeline(ctx, b, opt, res, true, func(p *delegationPipeline) error {
			return measureFanOut(ctx, b, p, opt, &res)
		})
	})
	if err != nil {
		return res, fmt.Errorf("fan-out phase: %w", err)
	}
	return res, nil
}

func (opt DelegationOptions) withDefaults() (DelegationOptions, error) {
	if opt.DispatchTurns == 0 {
		opt.DispatchTurns = DefaultDispatchTurns
	}
	if opt.Sessions == 0 {
		opt.Sessions = DefaultFanSessions
	}
	if opt.Tasks == 0 {
		opt.Tasks = DefaultFanTasks
	}
	if opt.ChildDelay == 0 {
		opt.ChildDelay = DefaultChildDelay
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	switch {
	case opt.Store != "sqlite" && opt.Store != "redis":
		return opt, fmt.Errorf("unknown store %q; want sqlite or redis", opt.Store)
	case opt.DispatchTurns < 1 || opt.Sessions < 1 || opt.Tasks < 1:
		return opt, fmt.Errorf("dispatch turns, sessions and tasks must be positive, got %d, %d and %d", opt.DispatchTurns, opt.Sessions, opt.Tasks)
	case opt.ChildDelay < 0:
		return opt, fmt.Errorf("the child's model delay may not be negative")
	}
	return opt, nil
}

// onDelegationPipeline starts the gateway on b's store (its children
// running when runChildren, else held) and runs measure.
func onDelegationPipeline(ctx context.Context, b backend, opt DelegationOptions, res DelegationResult, runChildren bool, measure func(*delegationPipeline) error) (err error) {
	p, err := startDelegationPipeline(ctx, b, delegationConfig{
		tasks:       opt.Tasks,
		turns:       res.TurnWorkers,
		runnerMax:   res.RunnerMax,
		runChildren: runChildren,
		tempDir:     opt.TempDir,
	})
	if err != nil {
		return fmt.Errorf("starting the gateway: %w", err)
	}
	defer func() {
		if serr := p.stop(ctx); err == nil && serr != nil {
			err = fmt.Errorf("stopping the gateway: %w", serr)
		}
	}()
	return measure(p)
}

// measureDispatch runs turns that dispatch and turns that call the no-op
// tool with the same arguments, one at a time, in alternation, the kind
// that goes first swapping every pair, and compares their quantiles.
func measureDispatch(ctx context.Context, p *delegationPipeline, opt DelegationOptions, res *DelegationResult) error {
	kinds := [2]string{textDispatch, textNoop}
	if err := driveDispatch(ctx, p, "w", min(warmupTurns, opt.DispatchTurns), kinds, nil); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	times := map[string][]turnTime{}
	if err := driveDispatch(ctx, p, "m", opt.DispatchTurns, kinds, times); err != nil {
		return err
	}
	d, n := times[textDispatch], times[textNoop]
	res.DispatchTurnP50Ms, res.DispatchTurnP99Ms = quantilesOf(d, func(t turnTime) time.Duration { return t.total })
	res.NoopTurnP50Ms, res.NoopTurnP99Ms = quantilesOf(n, func(t turnTime) time.Duration { return t.total })
	res.DispatchToolP50Ms, res.DispatchToolP99Ms = quantilesOf(d, func(t turnTime) time.Duration { return t.tool })
	res.DispatchCommitP50Ms, res.DispatchCommitP99Ms = quantilesOf(d, func(t turnTime) time.Duration { return t.commit })
	res.NoopCommitP50Ms, res.NoopCommitP99Ms = quantilesOf(n, func(t turnTime) time.Duration { return t.commit })
	res.DispatchOverheadP50Ms = res.DispatchTurnP50Ms - res.NoopTurnP50Ms
	res.DispatchOverheadP99Ms = res.DispatchTurnP99Ms - res.NoopTurnP99Ms
	return nil
}

// driveDispatch runs turns pairs of turns, one of each kind, each in a
// new conversation, and waits for each turn's reply before the next, so
// no other turn's work overlaps it. times, when not nil, gets each
// kind's turn times.
func driveDispatch(ctx context.Context, p *delegationPipeline, tag string, turns int, kinds [2]string, times map[string][]turnTime) error {
	for i := range turns {
		for j := range kinds {
			kind := kinds[(i+j)%2]
			id := "d" + tag + "-" + kind + "-" + strconv.Itoa(i)
			took, err := runTurn(ctx, p, inboundText(benchPlatform+":"+id, id, kind))
			if err != nil {
				return err
			}
			if times != nil {
				times[kind] = append(times[kind], took)
			}
		}
	}
	return nil
}

// measureFanOut warms the pipeline up with a small fan-out, then runs the
// measured one.
func measureFanOut(ctx context.Context, b backend, p *delegationPipeline, opt DelegationOptions, res *DelegationResult) error {
	if _, err := driveFanOut(ctx, p, "w", min(2, opt.Sessions), 0); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	resetPeakRSS()
	at := readCPU(ctx, b)
	f, err := driveFanOut(ctx, p, "f", opt.Sessions, opt.ChildDelay)
	if err != nil {
		return err
	}
	cpu := cpuUse{}
	cpu.add(at, readCPU(ctx, b))
	res.PeakRSSMB = peakRSSMB()
	res.FanCPUS = cpu.process.Seconds()
	if !cpu.noServer {
		res.FanServerCPUS = cpu.server.Seconds()
	}
	first := f.firstDispatch
	res.DispatchSpreadS = f.lastDispatch.Sub(first).Seconds()
	res.AllChildrenStartedS = f.lastChildCall.Sub(first).Seconds()
	res.AllChildrenEndedS = f.lastEnd.Sub(first).Seconds()
	res.AllCompletionsDeliveredS = f.lastDelivered.Sub(first).Seconds()
	res.AllParentTurnsStartedS = f.lastTurnStarted.Sub(first).Seconds()
	lat := sorted(f.completionLatencies)
	res.CompletionLatencyP50Ms, res.CompletionLatencyP99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	return nil
}

// quantilesOf is p50 and p99 of part of ts, in milliseconds.
func quantilesOf(ts []turnTime, part func(turnTime) time.Duration) (p50, p99 float64) {
	d := make([]time.Duration, len(ts))
	for i, t := range ts {
		d[i] = part(t)
	}
	s := sorted(d)
	return ms(percentile(s, 50)), ms(percentile(s, 99))
}

func sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
