package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// delegationPipeline is the part of a gateway that background work goes
// through, wired the way gateway.New wires it on an opened store: the
// router, the turn worker running the real agent with delegate_task, the
// signal tailer, the delivery worker, and delegation's runner and
// completion deliverer. Only the model is replaced, by two in-process
// clients: the parents' answers at once, the children's after a delay.
// gateway.New builds its model from the config's endpoint and has no way
// to take another client, hence the wiring here.
type delegationPipeline struct {
	router    *sessions.Router
	turns     *sessions.TurnWorker
	tailer    *signals.Tailer
	delivery  *gateway.Delivery
	gauges    *gateway.StoreGauges
	runner    *delegation.Runner
	deliverer *delegation.Deliverer
	child     *childModel
	replies   *replies
	rec       *turnTimes
	// components are what was started, in the gateway's order; shutdown
	// stops them in reverse.
	components []component
	// transcripts is the children's live transcripts' directory,
	// removed at shutdown.
	transcripts string
	cancel      context.CancelFunc
}

type component interface {
	Start(context.Context) error
	Shutdown(context.Context) error
}

// delegationConfig is what the wiring takes from the options.
type delegationConfig struct {
	tasks       int  // delegation.max_concurrent_children
	turns       int  // workers.turns
	runnerMax   int  // delegation.process_max_children
	runChildren bool // start the runner; without it children stay pending
	tempDir     string
}

// noopTool is the tool the dispatch phase's other turns call: it has
// delegate_task's schema, so the same arguments are checked alike, and
// does nothing.
const noopTool = "bench_noop"

// The texts of the bench's messages: what the parents' model answers
// with a tool call.
const (
	textDispatch = "dispatch"
	textNoop     = "noop"
)

func startDelegationPipeline(ctx context.Context, db gateway.Store, cfg delegationConfig) (_ *delegationPipeline, err error) {
	name, err := workerName()
	if err != nil {
		return nil, err
	}
	log := redact.NewLogger(io.Discard, slog.LevelInfo, nil)
	metrics := gateway.NewMetrics()
	store := db.Sessions()
	dcfg := config.Default().Delegation
	dcfg.MaxConcurrentChildren = cfg.tasks
	dcfg.ProcessMaxChildren = cfg.runnerMax
	p := &delegationPipeline{replies: &replies{}, rec: &turnTimes{}}
	p.child = &childModel{rec: p.rec}
	p.transcripts, err = os.MkdirTemp(cfg.tempDir, "herald-bench-live-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(p.transcripts)
		}
	}()

	routes := gateway.NewRoutes()
	routes.Up(&captureAdapter{arrived: p.replies.arrived})
	p.delivery, err = gateway.NewDelivery(gateway.DeliveryOptions{
		Outbox: db.Outbox(), Routes: routes, Name: name, Senders: config.DefaultDeliveries,
		Logger: log.With("part", "delivery"), Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}

	// buildDelegation's parts, with the config's defaults.
	transcripts := &delegation.Transcripts{Dir: p.transcripts}
	spawner := delegation.NewSpawner(delegation.SpawnerOptions{
		Client:              metrics.TimeModel(p.child, "bench-child"),
		MaxIterations:       dcfg.MaxIterations,
		SummaryMax:          dcfg.SummaryMaxChars,
		MaxDepth:            dcfg.MaxSpawnDepth,
		OrchestratorEnabled: dcfg.OrchestratorEnabled,
		Timeout:             dcfg.ChildTimeout(),
		StallQuiet:          time.Duration(dcfg.StallQuietSeconds) * time.Second,
		StallTool:           time.Duration(dcfg.StallToolSeconds) * time.Second,
		StallGrace:          time.Duration(dcfg.StallGraceSeconds) * time.Second,
		Logger:              log.With("part", "subagents"),
	})
	p.runner, err = delegation.NewRunner(delegation.RunnerOptions{
		Store:       timedEnds{Store: db.Delegations(), rec: p.rec},
		Spawner:     spawner,
		Name:        name,
		OwnerTTL:    dcfg.OwnerTTL,
		Max:         dcfg.ProcessMaxChildren,
		Transcripts: transcripts,
		// The gateway's status line of a batch: the bench's platform
		// shows no presence, so, as in a gateway whose platforms show
		// none, it comes to the read of the delegation after each end.
		Progress: func(context.Context, delegation.Delegation) {},
		Ended:    func() { p.deliverer.Wake() },
		Logger:   log.With("part", "subagents"),
	})
	if err != nil {
		return nil, err
	}
	tool := delegation.Tool(delegation.ToolOptions{
		Store:       db.Delegations(),
		Spawner:     spawner,
		Runner:      p.runner,
		Signals:     db.Signals(),
		Meta:        store.Meta,
		MaxChildren: dcfg.MaxConcurrentChildren,
		Independent: dcfg.IndependentCompletions,
		Transcripts: transcripts.Path,
	})
	noop := tools.Tool{
		Name: noopTool, Description: "Does nothing.", Schema: tool.Schema,
		Handler: func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
			return tools.JSON(map[string]string{"status": "done"}), nil
		},
	}
	registry := tools.NewRegistry()
	if err := registry.Register(delegation.Toolset, timedTool(tool, p.rec)); err != nil {
		return nil, err
	}
	if err := registry.Register("bench", timedTool(noop, p.rec)); err != nil {
		return nil, err
	}
	toolset, err := registry.Set([]string{delegation.Toolset, "bench"})
	if err != nil {
		return nil, err
	}
	spawner.SetTools(toolset)
	parent := &agent.Agent{
		Client:        metrics.TimeModel(&parentModel{args: taskArgs(cfg.tasks)}, "bench-parent"),
		Tools:         toolset,
		MaxIterations: config.DefaultMaxIterations,
		HistoryBudget: config.DefaultHistoryBudget,
		Notes:         db.Notes(),
		Logger:        log,
	}

	commands := sessions.DefaultCommands()
	committed := func(c sessions.Committed) {
		for _, w := range c.Writes {
			if _, ok := w.(delegation.Dispatch); ok {
				p.runner.Wake()
				return
			}
		}
	}
	p.turns, err = sessions.NewTurnWorker(sessions.TurnWorkerOptions{
		Store:     timedTurns{Store: gateway.DeliveringSessions(store, p.delivery), rec: p.rec},
		Committed: committed,
		Runner:    startedTurns{TurnRunner: parent, rec: p.rec},
		Commands:  commands,
		Name:      name,
		Turns:     cfg.turns,
		Logger:    log.With("part", "turns"),
		Metrics:   metrics.TurnHooks(),
	})
	if err != nil {
		return nil, err
	}
	metrics.RunningTurns(p.turns.Running, cfg.turns)
	p.tailer, err = signals.NewTailer(signals.TailerOptions{
		Store:    db.Signals(),
		Handler:  p.turns,
		Handlers: []signals.Handler{p.runner},
		Logger:   log.With("part", "signals"),
	})
	if err != nil {
		return nil, err
	}
	p.router, err = sessions.NewRouter(sessions.RouterOptions{
		Store:    store,
		Outbox:   db.Outbox(),
		Signals:  db.Signals(),
		Commands: commands,
		Turns:    p.turns,
		Tailer:   p.tailer,
		Logger:   log.With("part", "router"),
		Metrics:  metrics.RouterHooks(),
	})
	if err != nil {
		return nil, err
	}
	p.deliverer, err = delegation.NewDeliverer(delegation.DelivererOptions{
		Store:    db.Delegations(),
		Inbox:    timedInbox{Inbox: p.router, rec: p.rec},
		Outbox:   db.Outbox(),
		Meta:     store.Meta,
		Name:     name,
		ClaimTTL: max(2*sessions.DefaultLeaseTTL, 10*time.Second),
		Logger:   log.With("part", "completions"),
	})
	if err != nil {
		return nil, err
	}
	p.gauges = gateway.NewStoreGauges(db.Outbox(), store, metrics, 0, 0, log)

	// The gateway's order (gateway.build): each starts after the ones
	// above it and stops before them.
	order := []component{p.gauges, p.delivery, p.tailer, p.turns}
	if cfg.runChildren {
		order = append(order, p.runner)
	}
	order = append(order, p.deliverer)
	runCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	for _, c := range order {
		if err := c.Start(runCtx); err != nil {
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = p.shutdown(sctx)
			scancel()
			return nil, err
		}
		p.components = append(p.components, c)
	}
	return p, nil
}

// shutdown stops what was started, in reverse, and removes the
// transcripts.
func (p *delegationPipeline) shutdown(ctx context.Context) error {
	defer p.cancel()
	var err error
	for i := len(p.components) - 1; i >= 0; i-- {
		err = errors.Join(err, p.components[i].Shutdown(ctx))
	}
	p.components = nil
	return errors.Join(err, os.RemoveAll(p.transcripts))
}

// taskArgs are delegate_task's arguments with n tasks, each with a goal
// and a context of the size a model writes.
func taskArgs(n int) string {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"goal":"Read the module's package %d and list every exported function that has no test, with its file and line.","context":"The repository is checked out in the workspace. Report as a markdown table; do not change any file."}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// inboundText is a user message of conv with the message id id.
func inboundText(conv, id, text string) sessions.Inbound {
	return sessions.Inbound{Conv: conv, Sender: "bench", MessageID: id, Text: text}
}

// runTurn delivers in and returns its turn's times once its reply has
// reached the adapter.
func runTurn(ctx context.Context, p *delegationPipeline, in sessions.Inbound) (turnTime, error) {
	committed := p.rec.expectCommit(in.Conv)
	reply := p.replies.expect(in.MessageID)
	if err := p.router.Deliver(ctx, in); err != nil {
		return turnTime{}, fmt.Errorf("delivering %s: %w", in.MessageID, err)
	}
	timeout := time.NewTimer(replyTimeout)
	defer timeout.Stop()
	var took turnTime
	for committed != nil || reply != nil {
		select {
		case took = <-committed:
			committed = nil
		case <-reply:
			reply = nil
		case <-timeout.C:
			return turnTime{}, fmt.Errorf("the turn of %s did not commit and send its reply within %s", in.Conv, replyTimeout)
		case <-ctx.Done():
			return turnTime{}, ctx.Err()
		}
	}
	return took, nil
}

// fanResult is what driveFanOut measured.
type fanResult struct {
	firstDispatch, lastDispatch    time.Time
	lastChildCall, lastEnd         time.Time
	lastDelivered, lastTurnStarted time.Time
	completionLatencies            []time.Duration
}

// driveFanOut delivers a dispatching message to each of n conversations
// at once, each from a goroutine of its own, with the children's model
// taking childDelay, and waits until every completion's parent turn has
// ended.
func driveFanOut(ctx context.Context, p *delegationPipeline, tag string, n int, childDelay time.Duration) (fanResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.child.delay.Store(int64(childDelay))
	prefix := benchPlatform + ":f" + tag + "-"
	f := newFanPhase(prefix, n)
	p.rec.fan.Store(f)
	defer p.rec.fan.Store(nil)
	g := &firstError{cancel: cancel}
	for i := range n {
		g.Go(func() error {
			id := "f" + tag + "-" + strconv.Itoa(i)
			if err := p.router.Deliver(ctx, inboundText(benchPlatform+":"+id, id, textDispatch)); err != nil {
				return fmt.Errorf("delivering %s: %w", id, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fanResult{}, err
	}
	timeout := time.NewTimer(childDelay + replyTimeout)
	defer timeout.Stop()
	select {
	case <-f.done:
	case <-timeout.C:
		return fanResult{}, fmt.Errorf("within %s, %s", childDelay+replyTimeout, f.progress())
	case <-ctx.Done():
		return fanResult{}, ctx.Err()
	}
	return f.result(), nil
}
