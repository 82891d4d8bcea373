package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for PipelineOptions.
const (
	DefaultPipelineTurns = 10000
	// DefaultUnloadedTurns is how many turns the unloaded phase runs, one
	// after another: enough for a p99 that is not the slowest sample.
	DefaultUnloadedTurns = 1000
)

// turnsPerConversation is how many turns each lane of the throughput
// run has in one conversation before it starts the next: a short chat.
// Every turn reads its conversation's whole history, so a lane that
// never moved on would read a longer one each turn and the figure would
// depend on --turns.
const turnsPerConversation = 10

// warmupTurns is how many turns run, unmeasured, before any figure is
// taken: connections, prepared statements and scripts are then ready,
// as they are in a gateway that has been up a while.
const warmupTurns = 16

// PipelineOptions say what Pipeline measures.
type PipelineOptions struct {
	Store string // "sqlite" or "redis"
	// Turns go through the pipeline in the throughput run;
	// DefaultPipelineTurns when 0. The unloaded phase runs
	// DefaultUnloadedTurns of its own, or Turns when fewer.
	Turns int
	// Conversations are in flight at once in the throughput run, one
	// message each, like the queue bench's; DefaultConversations when 0.
	Conversations int
	// ModelDelay is how long the model takes to answer each turn.
	ModelDelay time.Duration
	// InFlight, when positive, measures a burst instead: this many turns
	// on as many conversations, all delivered at once.
	InFlight int
	// TurnWorkers is workers.turns: how many turns run at once. 0 means
	// the config's default, raised to Conversations and InFlight so the
	// runs measure the pipeline rather than a cap.
	TurnWorkers int
	// Deliveries is workers.deliveries; 0 means the config's default.
	Deliveries int
	// HTTPModel makes the model a server on loopback speaking the Chat
	// Completions API, which the gateway asks through its own client
	// and key pool (model.base_url, model.api_key), as a deployment
	// does, instead of a double handed to the gateway in process.
	HTTPModel bool
	RedisURL  string // the Redis to measure; DefaultRedisURL when empty
	// RedisMode is config.RedisCluster to take RedisURL as the seeds of a
	// Redis Cluster, as store.redis_mode does.
	RedisMode string
	// WaitReplicas is store.redis_wait_replicas.
	WaitReplicas int
	TempDir      string // where the SQLite files are made (and removed); the system's when empty
	// PeakProfile, when set in the in-flight run, names a file for a
	// profile of the live heap once every turn has called the model,
	// after a collection: what the waiting turns hold. The collection
	// it takes changes the run's figures; measure without it.
	PeakProfile string
}

// PipelineResult is one run's figures. The JSON names are what
// `herald bench pipeline --json` prints; scripts read them.
type PipelineResult struct {
	Store         string  `json:"store"`
	Mode          string  `json:"mode"` // "throughput" or "inflight"
	Turns         int     `json:"turns"`
	Conversations int     `json:"conversations"`
	ModelDelayMs  float64 `json:"model_delay_ms"`
	HTTPModel     bool    `json:"http_model,omitempty"`
	TurnWorkers   int     `json:"turn_workers"`
	Deliveries    int     `json:"delivery_workers"`

	// The throughput run: turns/s with Conversations in flight, and the
	// raw ceiling measured in the same run, on the same backend, at the
	// same concurrency. Loaded latency is Deliver to the adapter's Send,
	// less the model's delay, during that run.
	TurnsPerS   float64 `json:"turns_per_s,omitempty"`
	LoadedP50Ms float64 `json:"loaded_p50_ms,omitempty"`
	LoadedP99Ms float64 `json:"loaded_p99_ms,omitempty"`
	RawPerS     float64 `json:"raw_per_s,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"` // TurnsPerS / RawPerS
	// Where the time goes, in the same run: the CPU time this process
	// used per turn and per raw pass, and, on a store with a server of
	// its own (Redis), the server's. A ratio follows from these on a
	// machine whose cores the two share.
	CPUUsPerTurn          float64 `json:"cpu_us_per_turn,omitempty"`
	RawCPUUsPerPass       float64 `json:"raw_cpu_us_per_pass,omitempty"`
	ServerCPUUsPerTurn    float64 `json:"server_cpu_us_per_turn,omitempty"`
	RawServerCPUUsPerPass float64 `json:"raw_server_cpu_us_per_pass,omitempty"`
	// The unloaded phase: UnloadedTurns turns one at a time; the added
	// latency is Deliver to the adapter's Send, less the model's delay.
	UnloadedTurns int     `json:"unloaded_turns,omitempty"`
	AddedP50Ms    float64 `json:"added_p50_ms,omitempty"`
	AddedP99Ms    float64 `json:"added_p99_ms,omitempty"`

	// The in-flight run: InFlight turns delivered at once. From the
	// start: DeliveredS is when the last Deliver returned, AllStartedS
	// when the last turn had started (its model called), AllCommittedS
	// when the last turn had committed its reply, AllDoneS when the last
	// reply had reached the adapter. The burst latencies are each turn's
	// Deliver to Send, less the model's delay.
	InFlight       int     `json:"inflight,omitempty"`
	DeliveredS     float64 `json:"delivered_s,omitempty"`
	AllStartedS    float64 `json:"all_started_s,omitempty"`
	AllCommittedS  float64 `json:"all_committed_s,omitempty"`
	AllDoneS       float64 `json:"all_done_s,omitempty"`
	BurstAddedP50S float64 `json:"burst_added_p50_s,omitempty"`
	BurstAddedP99S float64 `json:"burst_added_p99_s,omitempty"`

	// PeakRSSMB is the process's peak resident memory (VmHWM) in MiB: in
	// the in-flight run, over the burst alone where Linux lets the mark
	// be reset, else since the process started. 0 where unknown.
	PeakRSSMB float64 `json:"peak_rss_mb,omitempty"`
	// StacksMB is the memory of the goroutines' stacks, in MiB, and
	// StackStartKB the size a new goroutine's stack starts at (the
	// runtime sets it from the stacks it scanned), both read as the last
	// Deliver of the in-flight run returned, its turns waiting on the
	// model.
	StacksMB     float64 `json:"stacks_mb,omitempty"`
	StackStartKB float64 `json:"stack_start_kb,omitempty"`
}

// Pipeline runs the pipeline benchmark: turns delivered to the gateway's
// router as an adapter delivers them, run by its turn worker on the
// store, their replies sent through the outbox by its delivery worker to
// an adapter, with a model that answers after ModelDelay.
func Pipeline(ctx context.Context, opt PipelineOptions) (PipelineResult, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return PipelineResult{}, err
	}
	if opt.PeakProfile != "" {
		// Finer samples than the default of one per 512 KiB: a turn
		// holds a few KiB.
		runtime.MemProfileRate = 4096
	}
	// The raw loop's Redis client serves one producer per lane; the store
	// gets its own, as in the gateway.
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL, Cluster: opt.RedisMode == config.RedisCluster, WaitReplicas: opt.WaitReplicas}, opt.Conversations, func(b backend) (PipelineResult, error) {
		return measurePipeline(ctx, b, opt)
	})
}

// storeName names the store measured: "sqlite", "redis", "redis
// cluster", with the replicas each commit waits for.
func (opt PipelineOptions) storeName() string {
	name := opt.Store
	if opt.Store == "redis" && opt.RedisMode == config.RedisCluster {
		name += " cluster"
	}
	if opt.WaitReplicas > 0 {
		name += fmt.Sprintf(", waiting for %d replicas", opt.WaitReplicas)
	}
	return name
}

func (opt PipelineOptions) withDefaults() (PipelineOptions, error) {
	if opt.Turns == 0 {
		opt.Turns = DefaultPipelineTurns
	}
	if opt.Conversations == 0 {
		opt.Conversations = DefaultConversations
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.Deliveries == 0 {
		opt.Deliveries = config.DefaultDeliveries
	}
	if opt.TurnWorkers == 0 {
		opt.TurnWorkers = max(config.DefaultTurnWorkers, opt.Conversations, opt.InFlight)
	}
	switch {
	case opt.Turns < 1 || opt.Conversations < 1:
		return opt, fmt.Errorf("turns and conversations must be positive, got %d and %d", opt.Turns, opt.Conversations)
	case opt.InFlight < 0 || opt.ModelDelay < 0:
		return opt, fmt.Errorf("inflight and the model delay may not be negative")
	case opt.TurnWorkers < 1 || opt.Deliveries < 1:
		return opt, fmt.Errorf("turn and delivery workers must be positive, got %d and %d", opt.TurnWorkers, opt.Deliveries)
	case opt.TurnWorkers < opt.InFlight:
		return opt, fmt.Errorf("%d turn workers cannot run %d turns at once", opt.TurnWorkers, opt.InFlight)
	}
	return opt, nil
}

// measurePipeline starts the gateway on b's store, warms it up and runs
// the mode opt asks for.
func measurePipeline(ctx context.Context, b backend, opt PipelineOptions) (res PipelineResult, err error) {
	res = PipelineResult{
		Store:         opt.storeName(),
		Mode:          "throughput",
		Turns:         opt.Turns,
		Conversations: opt.Conversations,
		ModelDelayMs:  ms(opt.ModelDelay),
		HTTPModel:     opt.HTTPModel,
		TurnWorkers:   opt.TurnWorkers,
		Deliveries:    opt.Deliveries,
	}
	if opt.InFlight > 0 {
		res.Mode, res.Turns, res.Conversations = "inflight", opt.InFlight, opt.InFlight
	} else if err := b.rawPrepare(ctx, opt.Conversations); err != nil {
		return res, fmt.Errorf("preparing the raw loop: %w", err)
	}
	p, err := startPipeline(ctx, b, opt)
	if err != nil {
		return res, fmt.Errorf("starting the gateway: %w", err)
	}
	defer func() {
		if serr := p.stop(ctx); err == nil && serr != nil {
			err = fmt.Errorf("stopping the gateway: %w", serr)
		}
	}()

	if _, err := driveBurst(ctx, p, "w", min(warmupTurns, res.Turns), 0, ""); err != nil {
		return res, fmt.Errorf("warming up: %w", err)
	}
	p.model.delay.Store(int64(opt.ModelDelay))
	if opt.InFlight > 0 {
		err = measureInFlight(ctx, p, opt, &res)
	} else {
		err = measureThroughput(ctx, b, p, opt, &res)
	}
	return res, err
}

// measureThroughput alternates the raw loop and the pipeline, each moving
// its share of the turns per round, then runs the unloaded phase.
func measureThroughput(ctx context.Context, b backend, p *pipeline, opt PipelineOptions, res *PipelineResult) error {
	var raw, herald run
	var rawCPU, heraldCPU cpuUse
	for r := range rounds {
		n := share(opt.Turns, rounds, r)
		at := readCPU(ctx, b)
		rr, err := driveRaw(ctx, n, opt.Conversations, b.rawStep)
		if err != nil {
			return fmt.Errorf("raw loop: %w", err)
		}
		raw.add(rr)
		mid := readCPU(ctx, b)
		rawCPU.add(at, mid)
		hr, err := driveLanes(ctx, p, "r"+strconv.Itoa(r), n, opt.Conversations, opt.ModelDelay)
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		herald.add(hr)
		heraldCPU.add(mid, readCPU(ctx, b))
	}
	res.CPUUsPerTurn, res.ServerCPUUsPerTurn = heraldCPU.perItem(len(herald.latencies))
	res.RawCPUUsPerPass, res.RawServerCPUUsPerPass = rawCPU.perItem(len(raw.latencies))
	res.TurnsPerS = herald.perSecond()
	res.LoadedP50Ms, res.LoadedP99Ms = herald.quantiles()
	res.RawPerS = raw.perSecond()
	if res.RawPerS > 0 {
		res.Ratio = res.TurnsPerS / res.RawPerS
	}

	res.UnloadedTurns = min(DefaultUnloadedTurns, opt.Turns)
	un, err := driveLanes(ctx, p, "u", res.UnloadedTurns, 1, opt.ModelDelay)
	if err != nil {
		return fmt.Errorf("unloaded phase: %w", err)
	}
	res.AddedP50Ms, res.AddedP99Ms = un.quantiles()
	res.PeakRSSMB = peakRSSMB()
	return nil
}

// measureInFlight delivers opt.InFlight turns at once and waits for
// every reply.
func measureInFlight(ctx context.Context, p *pipeline, opt PipelineOptions, res *PipelineResult) error {
	res.InFlight = opt.InFlight
	resetPeakRSS()
	b, err := driveBurst(ctx, p, "b", opt.InFlight, opt.ModelDelay, opt.PeakProfile)
	if err != nil {
		return err
	}
	res.DeliveredS = b.delivered.Seconds()
	res.AllStartedS = p.model.lastCall.since(b.start).Seconds()
	res.AllCommittedS = p.lastCommit.since(b.start).Seconds()
	res.AllDoneS = b.elapsed.Seconds()
	p50, p99 := b.quantiles()
	res.BurstAddedP50S, res.BurstAddedP99S = p50/1000, p99/1000
	res.PeakRSSMB = peakRSSMB()
	res.StacksMB, res.StackStartKB = float64(b.stacks.inUse)/(1<<20), float64(b.stacks.start)/(1<<10)
	return nil
}

// replyTimeout bounds the wait for one reply beyond the model's delay: a
// reply that does not come means a turn failed, and the run says so
// instead of hanging. A failed turn is retried after a second or so, and
// a lost lease runs out in DefaultLeaseTTL.
const replyTimeout = sessions.DefaultLeaseTTL + 30*time.Second

// inbound is a user message of conv with the message id id, unique in
// the run.
func inbound(conv, id string) sessions.Inbound {
	return sessions.Inbound{Conv: conv, Sender: "bench", MessageID: id, Text: payload}
}

// driveLanes sends turns through the pipeline from lanes concurrent
// lanes, each with one message in flight: it delivers to the router, as
// an adapter does, waits until the reply reached the adapter, and sends
// the next. Each lane moves to a new conversation every
// turnsPerConversation turns. tag keeps this call's conversations and
// message ids apart from those of other calls. The latencies recorded
// are Deliver to Send, less delay.
func driveLanes(ctx context.Context, p *pipeline, tag string, turns, lanes int, delay time.Duration) (run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &firstError{cancel: cancel}
	lat := make([][]time.Duration, lanes)
	start := time.Now()
	for l := range lanes {
		g.Go(func() error {
			n := share(turns, lanes, l)
			lat[l] = make([]time.Duration, 0, n)
			lane := tag + "-" + strconv.Itoa(l)
			for i := range n {
				conv := benchPlatform + ":" + lane + "-" + strconv.Itoa(i/turnsPerConversation)
				id := lane + "-" + strconv.Itoa(i)
				at, err := sendTurn(ctx, p, inbound(conv, id), delay)
				if err != nil {
					return err
				}
				lat[l] = append(lat[l], at-delay)
			}
			return nil
		})
	}
	err := g.Wait()
	return run{elapsed: time.Since(start), latencies: merge(lat)}, err
}

// sendTurn delivers in and returns how long its reply took to reach the
// adapter.
func sendTurn(ctx context.Context, p *pipeline, in sessions.Inbound, delay time.Duration) (time.Duration, error) {
	reply := p.replies.expect(in.MessageID)
	t0 := time.Now()
	if err := p.Router().Deliver(ctx, in); err != nil {
		return 0, fmt.Errorf("delivering %s: %w", in.MessageID, err)
	}
	timeout := time.NewTimer(delay + replyTimeout)
	defer timeout.Stop()
	select {
	case t1 := <-reply:
		return t1.Sub(t0), nil
	case <-timeout.C:
		return 0, fmt.Errorf("no reply to %s of %s within %s", in.MessageID, in.Conv, delay+replyTimeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// burst is what driveBurst measured: run's elapsed is until the last
// reply arrived.
type burst struct {
	run
	start     time.Time
	delivered time.Duration // until the last Deliver returned
	stacks    stacks        // as the last Deliver returned
}

// driveBurst delivers n messages to n conversations at once, each from a
// goroutine of its own as concurrent platform events would come, and
// waits for every reply. The latencies are Deliver to Send, less delay.
func driveBurst(ctx context.Context, p *pipeline, tag string, n int, delay time.Duration, peakProfile string) (burst, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &firstError{cancel: cancel}
	sent := make([]time.Time, n)
	replies := make([]<-chan time.Time, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = tag + "-" + strconv.Itoa(i)
		replies[i] = p.replies.expect(ids[i])
	}
	start := time.Now()
	for i := range n {
		g.Go(func() error {
			sent[i] = time.Now()
			if err := p.Router().Deliver(ctx, inbound(benchPlatform+":"+ids[i], ids[i])); err != nil {
				return fmt.Errorf("delivering %s: %w", ids[i], err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return burst{}, err
	}
	delivered := time.Since(start)
	stacks := readStacks()
	if peakProfile != "" {
		if err := p.model.writePeakProfile(peakProfile, n, start.Add(delay)); err != nil {
			return burst{}, err
		}
	}

	// Every reply is due by the same time: the waits run together.
	timeout := time.NewTimer(delay + replyTimeout)
	defer timeout.Stop()
	lat := make([]time.Duration, n)
	var last time.Time
	for i, reply := range replies {
		select {
		case t := <-reply:
			lat[i] = t.Sub(sent[i]) - delay
			last = later(last, t)
		case <-timeout.C:
			return burst{}, fmt.Errorf("no reply to %s within %s", ids[i], delay+replyTimeout)
		case <-ctx.Done():
			return burst{}, ctx.Err()
		}
	}
	return burst{run: run{elapsed: last.Sub(start), latencies: lat}, start: start, delivered: delivered, stacks: stacks}, nil
}

// stacks is what readStacks read of the goroutines' stacks.
type stacks struct{ inUse, start uint64 }

// readStacks reads the stacks' memory and new goroutines' starting
// stack size from the runtime's metrics, which stop nothing.
func readStacks() stacks {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(s)
	var st stacks
	if s[0].Value.Kind() == metrics.KindUint64 {
		st.inUse = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		st.start = s[1].Value.Uint64()
	}
	return st
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cpuAt is the CPU time used so far by this process and by the store's
// server (server false when there is none, or it could not be read).
type cpuAt struct {
	process, server time.Duration
	hasServer       bool
}

func readCPU(ctx context.Context, b backend) cpuAt {
	server, ok := b.serverCPU(ctx)
	return cpuAt{process: processCPU(), server: server, hasServer: ok}
}

// cpuUse adds up the CPU time of the phases of one kind.
type cpuUse struct {
	process, server time.Duration
	noServer        bool
}

func (u *cpuUse) add(from, to cpuAt) {
	u.process += to.process - from.process
	u.server += to.server - from.server
	u.noServer = u.noServer || !from.hasServer || !to.hasServer
}

// perItem returns the CPU time per item in µs, the process's and the
// server's (0 without one).
func (u cpuUse) perItem(n int) (process, server float64) {
	if n == 0 {
		return 0, 0
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	if u.noServer {
		return us(u.process), 0
	}
	return us(u.process), us(u.server)
}
