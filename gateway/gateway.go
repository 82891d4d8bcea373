// Package gateway wires herald together: it opens the store, builds the
// model client, the tools and the agent, and runs the router, the turn
// worker, the signal tailer, the delivery worker, the presence driver, the
// capabilities (delegation, controllers, cron, the boards; each plugs in
// by one type, capability.Capability), the adapters (an exclusive one only
// while this process holds its lease) and the HTTP server (the local
// API, the adapters' webhooks, /healthz, /readyz, /metrics) as one unit
// with one Start and one graceful Shutdown.
package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/adapters/dashboard"
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/delivery"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/logcalm"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/metrics"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/store/sqlite"
	"github.com/heraldgw/herald/tools"
)

// Defaults for Options.
const (
	// DefaultGrace is how long Shutdown lets running turns finish before
	// it hands them back.
	DefaultGrace = sessions.DefaultGrace
	// DefaultDrain is how long Shutdown keeps delivering after the turns
	// ended, so the replies they committed go out from this process.
	DefaultDrain = config.DefaultDeliveryDrain
	// DefaultOpenTimeout bounds opening the store in New.
	DefaultOpenTimeout = 15 * time.Second
)

// LogRepeatWindow is how often the gateway's log shows a warning that
// repeats unchanged (the same message and attributes): the first, then
// one a window with the count of those left out (logcalm.RepeatedKey).
const LogRepeatWindow = time.Minute

// readyCheckEvery bounds how often /readyz reads the store: health checks
// from several places must not become load.
const readyCheckEvery = time.Second

// Options are what the config does not say: how the gateway is run.
type Options struct {
	// Logger receives every log line, secrets masked. Nil means JSON lines
	// on stderr at info level.
	Logger *slog.Logger
	// Clock is the time source for every lease, retry and timestamp. Nil
	// means the wall clock, and then Redis decides lease expiry by its own
	// clock.
	Clock clock.Clock
	// Adapters are run beside the local API (and are what tests add).
	// One implementing adapters.Exclusive runs only while this process
	// holds its lease ("adapter:" + its name, for store.lease_ttl); one
	// implementing adapters.Mounter gets its routes on the HTTP server,
	// outside the API key; one implementing adapters.Presence shows the
	// turns of its chats. The platforms with a token in the config get
	// their adapters made from it, except those given here, which take
	// their place.
	Adapters []adapters.Adapter
	// Grace bounds how long in-flight turns may finish on Shutdown; 0
	// means the config's workers.shutdown_grace, else DefaultGrace.
	Grace time.Duration
	// Drain bounds how long deliveries go on after the turns ended; 0
	// means the config's workers.delivery_drain, else DefaultDrain.
	Drain time.Duration
	// Name identifies this process in leases and claims, and among the
	// instances; empty means host-pid-random.
	Name string
	// Version is what this process says it runs among the instances;
	// empty means "dev".
	Version string
	// Model, when set, answers every model request in place of the
	// clients the config's model, model.fallbacks, delegation.* and
	// auxiliary.* endpoints would make: the turns', the sub-agents',
	// the controllers', the cron fires' and the kanban workers'. Each
	// request still names the model its setting names. No key pool is
	// made for it, so no key of the config is chosen, cooled or counted,
	// and no fallback follows it. Tests and benches run the real
	// gateway on a model double this way. Nil means the config's
	// clients.
	Model llm.Client
	// Lookup reads the environment the traces' settings come from
	// (OTEL_EXPORTER_OTLP_ENDPOINT, …: internal/tracing). Nil means the
	// process's.
	Lookup config.Lookup
}

// Gateway is one herald process.
type Gateway struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	clock   clock.Clock
	redact  *redact.Redactor
	metrics *metrics.Metrics

	db Store
	// lock is held shared beside a SQLite store while the gateway runs
	// (sole_unix.go); nil on Redis.
	lock     *os.File
	router   *sessions.Router
	turns    *sessions.TurnWorker
	tailer   *signals.Tailer
	delivery *delivery.Worker
	gauges   *metrics.StoreGauges
	// parts are the background loops, in start order (components.go).
	parts    components
	api      *api.Server
	presence *delivery.Presence
	// workspace is the workspace tools, nil when tools.workspace is unset.
	workspace *tools.WorkspaceTools
	// models are the model clients and the main model's key pool.
	models *modelParts
	// keyPools are every key pool the gateway made (the models', the
	// children's and workers' of their own endpoints).
	keyPools keyPools
	// boards are the kanban capability's service, which tests change
	// the boards with.
	boards   *kanban.Service
	adapters []adapters.Adapter
	routes   *delivery.Routes
	mux      *http.ServeMux
	server   *http.Server
	// metricsServer serves /metrics alone on http.metrics_addr; nil when
	// that is unset.
	metricsServer *http.Server

	mu        sync.Mutex
	started   bool
	stopped   bool
	ln        net.Listener
	metricsLn net.Listener
	cancel    context.CancelFunc // ends the adapters' Run
	// running are the adapters' supervisors, once started.
	running []*adapters.Supervisor
	served  chan struct{} // closed when Serve returned
	// metricsServed is closed when the metrics server's Serve returned.
	metricsServed chan struct{}
	// stopTraces flushes and stops the traces Start turned on.
	stopTraces func(context.Context) error

	ready     atomic.Bool // started and not stopping
	checkMu   sync.Mutex
	checkedAt time.Time
	checkErr  error
}

// New builds a gateway from cfg: it validates cfg, opens the store and
// builds every part, but starts nothing and listens nowhere.
// Errors: Invalid (a bad config, a public address without an API key),
// Unavailable (the store cannot be reached), and the store's own.
func New(cfg config.Config, opts Options) (*Gateway, error) {
	const op = "gateway.New"
	if err := cfg.Validate(); err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if err := api.RequireKey(cfg.HTTP.Addr, cfg.HTTP.APIKey); err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	g := &Gateway{cfg: cfg, opts: opts, clock: opts.Clock, metrics: metrics.NewMetrics(), routes: delivery.NewRoutes()}
	if g.clock == nil {
		g.clock = clock.Real{}
	}
	if g.opts.Grace <= 0 {
		g.opts.Grace = cmp.Or(cfg.Workers.ShutdownGrace, DefaultGrace)
	}
	if g.opts.Drain <= 0 {
		g.opts.Drain = cmp.Or(cfg.Workers.DeliveryDrain, DefaultDrain)
	}
	if g.opts.Name == "" {
		g.opts.Name = proc.InstanceName()
	}
	secrets := cfg.Secrets()
	g.redact = redact.New(secrets)
	logs := slog.Handler(slog.NewJSONHandler(os.Stderr, nil))
	if opts.Logger != nil {
		logs = opts.Logger.Handler()
	}
	// A store that is down makes every polling loop warn on each try:
	// identical warnings are shown once a LogRepeatWindow, counted.
	g.log = slog.New(redact.Handler(logcalm.Handler(logs, LogRepeatWindow), g.redact))

	ctx, cancel := context.WithTimeout(context.Background(), DefaultOpenTimeout)
	defer cancel()
	// The store's clock is the injected one only when one was injected:
	// see OpenStore for why Redis runs on its own.
	db, err := OpenStore(ctx, cfg.Store, cfg.SQLitePath(), opts.Clock)
	if err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, fmt.Errorf("opening the %s store: %w", cfg.Store.Backend, err))
	}
	g.db = db
	if err := g.takeOverDead(ctx); err != nil {
		_ = g.closeStore()
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	if err := g.build(); err != nil {
		_ = g.closeStore()
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	return g, nil
}

// takeOverDead, on a SQLite store no other gateway of this machine has
// open, makes what the file says is held (conversation leases, outbox
// claims, adapter ownership) run out now: its holders are dead, and a
// gateway restarted after a crash then runs their turns and sends their
// replies at once instead of a lease's or a claim's time later. With
// another gateway running it leaves everything as it is. Either way the
// gateway then holds the lock shared until Shutdown.
func (g *Gateway) takeOverDead(ctx context.Context) error {
	expirer, ok := g.db.(*sqlite.DB)
	if !ok {
		return nil
	}
	lock, alone, err := lockGateways(g.cfg.SQLitePath() + ".gateways")
	if err != nil {
		return fmt.Errorf("locking the SQLite store for this gateway: %w", err)
	}
	g.lock = lock
	if alone {
		n, err := expirer.ExpireHeld(ctx)
		if err != nil {
			return err
		}
		if n != (sqlite.Expired{}) {
			g.log.Info("took over what stopped processes held", "leases", n.Leases, "claims", n.Claims, "ownership", n.Ownership)
		}
	}
	if lock == nil {
		return nil
	}
	return shareLock(lock)
}

// closeStore closes the store, then lets go of the lock beside it.
func (g *Gateway) closeStore() error {
	err := g.db.Close()
	if g.lock != nil {
		_ = g.lock.Close()
	}
	return err
}

// build makes every part on the opened store.
func (g *Gateway) build() error {
	cfg, log := g.cfg, g.log
	store := g.db.Sessions()

	// One command registry serves the router, the turn worker and the
	// platforms' command menus.
	commands := sessions.DefaultCommands()
	given := map[string]bool{}
	for _, a := range g.opts.Adapters {
		given[a.Platform()] = true
	}
	platforms, err := platformAdapters(cfg.Platforms, given, commands, g.db.Cursors(), log)
	if err != nil {
		return err
	}
	g.opts.Adapters = append(slices.Clone(g.opts.Adapters), platforms...)
	useMaskers(g.redact, g.opts.Adapters)

	g.keyPools.signals, g.keyPools.log = g.db.Signals(), g.log.With("part", "model")
	g.models, err = g.buildModel()
	if err != nil {
		return err
	}
	model := g.models.client
	registry := tools.NewRegistry()
	// Whatever a tool read or a command printed, the model sees herald's
	// secrets masked.
	registry.RedactWith(g.redact.String)
	if err := tools.RegisterCore(registry, tools.CoreOptions{Notes: g.db.Notes(), AllowedTargets: cfg.SendMessage.AllowedTargets}); err != nil {
		return err
	}
	workspace, err := tools.RegisterWorkspace(registry, tools.WorkspaceOptions{
		Root:            cfg.Tools.Workspace,
		TerminalTimeout: cfg.Tools.TerminalTimeout,
		OutputMaxChars:  cfg.Tools.OutputMaxChars,
		Dangerous:       cfg.Tools.DangerousCommands,
		AutoApprove:     cfg.Delegation.SubagentAutoApprove,
		Child:           func(ctx context.Context) bool { return delegation.DepthOf(ctx) > 0 },
		Clock:           g.clock,
		Env:             cfg.SubprocessEnv(),
	})
	if err != nil {
		return err
	}
	g.workspace = workspace
	timed := traceModel(g.metrics.TimeModel(model, cfg.Model.Name), cfg.Model.Name)
	runner := &agent.Agent{
		Client:        timed,
		Model:         cfg.Model.Name,
		MaxIterations: cfg.Model.MaxIterations,
		HistoryBudget: cfg.Model.HistoryBudget,
		SystemPrompt:  cfg.Model.SystemPrompt,
		Notes:         g.db.Notes(),
		Images:        media.LoadImage,
		Clock:         g.clock,
		Logger:        log,
	}
	a := &assembly{db: g.db, agent: runner, base: &capability.Assembly{
		Config:    cfg,
		Name:      g.opts.Name,
		Clock:     g.clock,
		Logger:    log,
		Redact:    g.redact.String,
		Store:     g.db,
		Adapters:  g.opts.Adapters,
		Registry:  registry,
		Commands:  commands,
		Model:     timed,
		Images:    runner.Images,
		Toolsets:  cfg.Toolsets(),
		Outbox:    delivery.NotifyingOutbox(g.db.Outbox(), func(t outbox.Target) { g.delivery.NotifyTarget(t) }),
		Runner:    runner,
		Workspace: workspace,
		AuxClient: g.auxClient,
		Addr:      g.Addr,
		Busy:      g.convBusy,
		Metrics: capability.Metrics{
			ControllerFired:   g.metrics.ControllerFired,
			ControllerDropped: g.metrics.ControllerDropped,
			MCPCall:           g.metrics.MCPCall,
		},
	}}
	caps, err := a.make()
	if err != nil {
		return err
	}
	g.boards = a.boards
	toolset, err := registry.Set(a.base.Toolsets)
	if err != nil {
		return err
	}
	runner.Tools = toolset
	if err := caps.toolsReady(toolset); err != nil {
		return err
	}

	// Replies on the chat platforms show as they are written, in one
	// message that their delivery makes the reply.
	var streaming *delivery.Streaming
	if cfg.Display.Streaming {
		streaming = delivery.NewStreaming(delivery.StreamingOptions{
			Adapters: g.opts.Adapters,
			Every:    cfg.Display.StreamEditInterval,
			Clock:    g.clock,
			Logger:   log.With("part", "streaming"),
			Metrics:  g.metrics.DeliveryHooks(),
			Outbox:   g.db.Outbox(),
			Redact:   g.redact.String,
			Hold:     g.redact.Unsettled,
		})
	}
	var streamed func(context.Context, adapters.Adapter, outbox.Message) (adapters.SendResult, bool)
	var stream func(context.Context, string, sessions.Entry, outbox.Target) sessions.TurnStream
	if streaming != nil && streaming.Drives() {
		streamed, stream = streaming.Send, streaming.Stream
	}
	g.delivery, err = delivery.New(delivery.Options{
		Outbox:  g.db.Outbox(),
		Routes:  g.routes,
		Name:    g.opts.Name,
		Senders: cfg.Workers.Deliveries,
		// A claim outlives the conversation lease so a slow multi-part
		// send is not taken over, yet follows it: a deployment that hands
		// a dead worker's turns over quickly hands its sends over quickly
		// too.
		ClaimTTL: max(2*cfg.Store.LeaseTTL, 10*time.Second),
		// A dead process's claims end when its heartbeat runs out, a
		// quarter of a claim, rather than when the claims do.
		Heartbeat: max(cfg.Store.LeaseTTL/2, 2*time.Second),
		Redact:    g.redact.String,
		Settled:   caps.settled,
		Streamed:  streamed,
		Files:     g.db.Files(),
		Clock:     g.clock,
		Logger:    log.With("part", "delivery"),
		Metrics:   g.metrics.DeliveryHooks(),
	})
	if err != nil {
		return err
	}

	g.presence = delivery.NewPresence(delivery.PresenceOptions{
		Adapters: g.opts.Adapters,
		Clock:    g.clock,
		Logger:   log.With("part", "presence"),
	})
	var watch func(context.Context, string, outbox.Target) sessions.TurnWatch
	if g.presence.Drives() {
		watch = g.presence.Watch
	}
	// What a turn's model streams reaches the local API's streamed
	// completions waiting on it in this process.
	deltas := &sessions.Deltas{Redact: g.redact.String, Hold: g.redact.Unsettled}
	g.turns, err = sessions.NewTurnWorker(sessions.TurnWorkerOptions{
		Store:      delivery.Sessions(store, g.delivery),
		Runner:     a.base.Runner,
		Commands:   commands,
		Name:       g.opts.Name,
		Turns:      cfg.Workers.Turns,
		LeaseTTL:   cfg.Store.LeaseTTL,
		HistoryMax: cfg.Store.HistoryMaxMessages,
		Grace:      g.opts.Grace,
		Watch:      watch,
		AnswerEach: answersEach,
		Committed:  caps.committed,
		Deltas:     deltas,
		Stream:     stream,
		Clock:      g.clock,
		Logger:     log.With("part", "turns"),
		Metrics:    g.metrics.TurnHooks(),
	})
	if err != nil {
		return err
	}
	g.metrics.RunningTurns(g.turns.Running, cfg.Workers.Turns)
	g.tailer, err = signals.NewTailer(signals.TailerOptions{
		Store:    g.db.Signals(),
		Handler:  g.turns,
		Handlers: append(caps.signals(), &g.keyPools),
		Logger:   log.With("part", "signals"),
	})
	if err != nil {
		return err
	}
	g.router, err = sessions.NewRouter(sessions.RouterOptions{
		Store:         store,
		Outbox:        delivery.NotifyingOutbox(g.db.Outbox(), g.delivery.NotifyTarget),
		Signals:       g.db.Signals(),
		Commands:      commands,
		BusyInputMode: sessions.BusyInputMode(cfg.Display.BusyInputMode),
		Turns:         g.turns,
		Tailer:        g.tailer,
		Clock:         g.clock,
		Logger:        log.With("part", "router"),
		Metrics:       g.metrics.RouterHooks(),
	})
	if err != nil {
		return err
	}
	if err := caps.routed(g.router); err != nil {
		return err
	}
	g.gauges = metrics.NewStoreGauges(g.db.Outbox(), store, g.metrics, 0, 0, log)
	heartbeat, err := g.heartbeat()
	if err != nil {
		return err
	}

	// The background loops (components.go), in dependency order: each
	// starts after the ones above it and stops before them. The turns
	// stop first: they hear signals until they end, their status lines go
	// when they ended, and the delivery worker sends the replies they
	// committed, draining within its own budget. The gauges only read.
	// This process is among the instances from before its first turn
	// until after its last send.
	g.add("instances", heartbeat)
	g.add("gauges", g.gauges)
	g.add("delivery", bounded(g.delivery, g.opts.Drain))
	g.add("signals", g.tailer)
	g.add("presence", g.presence)
	if stream != nil {
		// Its goroutines end with the turns; the replies it showed stay
		// known to the delivery worker, which stops after it.
		g.add("streaming", streaming)
	}
	g.add("turns", g.turns)
	// The capabilities' loops follow, in their list's order
	// (capability.go): children, ticks and fires stop before the turns
	// and the delivery worker that sends what they queued.
	g.parts = append(g.parts, caps.components()...)

	var models []string
	if cfg.Model.Name != "" {
		models = []string{cfg.Model.Name}
	}
	apiOpts := api.Options{
		Inbox:        g.router,
		Timeline:     g.db.Timeline(),
		Files:        g.db.Files(),
		APIKey:       cfg.HTTP.APIKey,
		Models:       models,
		Deltas:       deltas,
		MaxBodyBytes: cfg.HTTP.MaxBodyBytes,
		MaxFileBytes: cfg.Attachments.MaxBytes,
		Clock:        g.clock,
		Logger:       log,
		Routes:       append(a.routes, api.OutboxRoutes(g.db.Outbox()), api.ModelKeyRoutes(g.modelKeys, g.reviveKey), g.overview(), g.conversations()),
	}
	g.api = api.New(apiOpts)
	g.adapters = append([]adapters.Adapter{g.api}, g.opts.Adapters...)

	g.mux = http.NewServeMux()
	g.mux.HandleFunc("GET /healthz", g.healthz)
	g.mux.HandleFunc("GET /readyz", g.readyz)
	// On the API's address the metrics ask for its key; a scraper without
	// it reads them on http.metrics_addr.
	g.mux.Handle("GET /metrics", g.api.Guard(g.metrics.Handler()))
	g.api.Mount(g.mux)
	if cfg.Dashboard.Enabled {
		dashboard.New(dashboard.Options{APIKey: cfg.HTTP.APIKey, Clock: g.clock, Logger: log}).Mount(g.mux)
	}
	if err := g.mount(); err != nil {
		return err
	}
	g.server = &http.Server{
		Handler:           g.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if cfg.HTTP.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", g.metrics.Handler())
		g.metricsServer = &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
	}
	return nil
}

// heartbeat is the component that keeps this process among the
// instances, with what its metrics counted over the last minute.
func (g *Gateway) heartbeat() (*instances.Heartbeat, error) {
	host, _ := os.Hostname()
	return instances.NewHeartbeat(instances.HeartbeatOptions{
		Store: g.db.Instances(),
		Self: instances.Instance{
			ID:        g.opts.Name,
			Host:      host,
			PID:       os.Getpid(),
			Version:   cmp.Or(g.opts.Version, "dev"),
			StartedAt: g.clock.Now(),
		},
		Tally:  g.metrics.Tally(),
		Clock:  g.clock,
		Logger: g.log.With("part", "instances"),
	})
}

// overview is the overview's route: the instances and what waits in
// each queue of the store.
func (g *Gateway) overview() api.Routes {
	return api.OverviewRoutes(api.Overview{
		Instances:   g.db.Instances(),
		Queue:       g.db.Sessions(),
		Outbox:      g.db.Outbox(),
		Approvals:   g.db.Approvals(),
		Delegations: g.db.Delegations(),
		Boards:      g.db.Kanban(),
	})
}

// conversations are the routes of every conversation by its last
// activity, with its history, controllers and tokens' cost.
func (g *Gateway) conversations() api.Routes {
	return api.ConversationRoutes(api.ConversationSources{
		List: g.db.Conversations(), Controllers: g.db.Controllers(), Price: g.cfg.Model.Price,
	})
}

// mount adds the routes of the adapters that receive over the HTTP
// server. A route another part has already is a configuration mistake,
// which ServeMux reports by panicking.
func (g *Gateway) mount() (err error) {
	for _, a := range g.opts.Adapters {
		m, ok := a.(adapters.Mounter)
		if !ok {
			continue
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("mounting the %s adapter's routes: %v", a.Platform(), p)
				}
			}()
			m.Mount(g.mux, g.router)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// Start listens on http.addr (and http.metrics_addr) and starts every
// part. ctx ending stops the gateway hard (turns and sends cancelled,
// their work handed back); call Shutdown for a graceful stop. Errors: Conflict (started before),
// Invalid (the bound address is public and there is no API key),
// Unavailable (the address cannot be bound).
func (g *Gateway) Start(ctx context.Context) error {
	const op = "gateway.Start"
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started || g.stopped {
		return errs.E(op, errs.Conflict, "the gateway was started before")
	}
	ln, err := net.Listen("tcp", g.cfg.HTTP.Addr)
	if err != nil {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	if g.cfg.Model.Name == "" {
		g.log.Warn("no model is configured: every turn answers that it cannot run; set model.name and model.base_url (HERALD_MODEL, HERALD_MODEL_BASE_URL)")
	}
	// The config was checked in New; this checks where the socket really
	// is, in case a name resolved somewhere public.
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && g.cfg.HTTP.APIKey == "" {
		ln.Close()
		return errs.E(op, errs.Invalid, "http.addr %s is bound to %s, which is not loopback: set http.api_key (HERALD_API_KEY)", g.cfg.HTTP.Addr, tcp)
	}
	var mln net.Listener
	if g.metricsServer != nil {
		if mln, err = net.Listen("tcp", g.cfg.HTTP.MetricsAddr); err != nil {
			ln.Close()
			return errs.Wrap(op, errs.Unavailable, fmt.Errorf("http.metrics_addr: %w", err))
		}
	}
	lookup := g.opts.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if g.stopTraces, err = tracing.Setup(lookup); err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return errs.Wrap(op, errs.Invalid, err)
	}
	g.started, g.ln, g.metricsLn = true, ln, mln

	runCtx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	if err := g.parts.start(runCtx, g.log); err != nil {
		// Only a second Start fails here, which g.started rules out;
		// should it happen, the parts started were stopped again.
		cancel()
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		g.started, g.ln, g.metricsLn = false, nil, nil
		return errs.Wrap(op, errs.Internal, err)
	}
	g.running = g.supervisors()
	for _, s := range g.running {
		// Only a second Start fails, and each supervisor is new.
		_ = s.Start(runCtx)
	}
	g.served = serve(g.server, ln, g.log)
	started := []any{"addr", ln.Addr().String()}
	if mln != nil {
		g.metricsServed = serve(g.metricsServer, mln, g.log)
		started = append(started, "metrics_addr", mln.Addr().String())
	}
	g.ready.Store(true)
	g.log.Info("gateway started", append(started, "store", g.cfg.Store.Backend,
		"model", g.cfg.Model.Name, "turn_workers", g.cfg.Workers.Turns, "delivery_workers", g.cfg.Workers.Deliveries,
		"platforms", g.platforms(), "worker", g.opts.Name)...)
	return nil
}

// serve runs srv on ln until it is shut down; the channel it returns is
// closed when it is.
func serve(srv *http.Server, ln net.Listener, log *slog.Logger) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("an HTTP server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return done
}

func (g *Gateway) platforms() []string {
	out := make([]string, len(g.adapters))
	for i, a := range g.adapters {
		out[i] = a.Platform()
	}
	return out
}

// supervisors run each adapter, restarted when it stops, its platform a
// route while it runs or waits for its lease; an exclusive one runs under
// an adapters.Owner of its lease.
func (g *Gateway) supervisors() []*adapters.Supervisor {
	out := make([]*adapters.Supervisor, len(g.adapters))
	for i, a := range g.adapters {
		log := g.log.With("platform", a.Platform())
		o := adapters.SupervisorOptions{
			Adapter: a,
			Inbox:   g.router,
			Up: func() {
				g.routes.Up(a)
				g.delivery.Notify()
			},
			Down:   func() { g.routes.Down(a.Platform()) },
			Clock:  g.clock,
			Logger: g.log,
		}
		if name := adapters.ExclusiveName(a); name != "" {
			o.Owner = adapters.NewOwner(adapters.OwnerOptions{
				Leases: g.db.Leases(),
				Name:   name,
				Holder: g.opts.Name,
				TTL:    g.cfg.Store.LeaseTTL,
				Owned:  g.metrics.AdapterOwned(a.Platform()),
				Logger: log,
			})
		}
		out[i] = adapters.NewSupervisor(o)
	}
	return out
}

// Shutdown stops the gateway gracefully: /readyz answers 503 and the HTTP
// listener closes; the background loops stop in the reverse of their
// order in build (components.go): turns stop being claimed and those
// running get the grace period to commit (then are cancelled and handed
// back), and deliveries go on for the drain period so committed replies
// reach waiting clients; then the adapters stop, waiting requests end,
// and the store is closed.
// ctx bounds the whole; past it, what still runs is cut off. Calling it
// again, or before Start, only closes what is open.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return nil
	}
	g.stopped = true
	started := g.started
	g.mu.Unlock()
	g.ready.Store(false)
	if !started {
		return g.closeStore()
	}
	g.log.Info("gateway stopping", "grace", g.opts.Grace.String())

	// Shutdown closes the listener at once and waits for the requests in
	// progress, which end as their replies are delivered below.
	httpDone := make(chan error, 1)
	go func() { httpDone <- g.server.Shutdown(ctx) }()

	var problems []error
	// The background loops stop in the reverse of their order in build.
	if err := g.parts.shutdown(ctx, g.log); err != nil {
		problems = append(problems, err)
	}
	// What the agents left running in the background ends with them.
	g.workspace.EndAllProcesses()

	// Ending the adapters' Run ends the API's waiting requests and event
	// streams, so the HTTP server can finish.
	g.cancel()
	for _, s := range g.running {
		// However long it takes: the store closes after the adapters.
		_ = s.Shutdown(context.WithoutCancel(ctx))
	}
	select {
	case err := <-httpDone:
		if err != nil {
			problems = append(problems, err)
			_ = g.server.Close()
		}
	case <-ctx.Done():
		_ = g.server.Close()
		problems = append(problems, ctx.Err())
	}
	<-g.served
	// The metrics are read to the end: their server stops after the rest.
	if g.metricsServer != nil {
		if err := g.metricsServer.Shutdown(ctx); err != nil {
			_ = g.metricsServer.Close()
			problems = append(problems, err)
		}
		<-g.metricsServed
	}
	if err := g.stopTraces(ctx); err != nil {
		problems = append(problems, err)
	}
	// The uses the key pools counted since their last write.
	g.keyPools.flush(ctx)
	if err := g.closeStore(); err != nil {
		problems = append(problems, err)
	}
	err := errors.Join(problems...)
	if err != nil {
		g.log.Warn("gateway stopped with problems", "err", err)
	} else {
		g.log.Info("gateway stopped")
	}
	return err
}

// Addr is the address the HTTP server listens on, once started ("" before):
// with port 0 in the config, the port the system picked.
func (g *Gateway) Addr() string { return g.listening(&g.ln) }

// MetricsAddr is the address the metrics server listens on, once started
// with http.metrics_addr set ("" otherwise).
func (g *Gateway) MetricsAddr() string { return g.listening(&g.metricsLn) }

// listening is the address *ln listens on, "" while it is nil.
func (g *Gateway) listening(ln *net.Listener) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if *ln == nil {
		return ""
	}
	return (*ln).Addr().String()
}

// Handler is the gateway's HTTP handler: the local API plus /healthz,
// /readyz and /metrics.
func (g *Gateway) Handler() http.Handler { return g.mux }

// StopTimeout is how long a graceful Shutdown may take at most: the
// grace for running turns, then the drain of the outbox.
func (g *Gateway) StopTimeout() time.Duration { return g.opts.Grace + g.opts.Drain }

// Metrics are the gateway's metrics.
func (g *Gateway) Metrics() *metrics.Metrics { return g.metrics }

// Store is the opened store, for tests and tools that inspect it.
func (g *Gateway) Store() Store { return g.db }

// Router takes inbound messages, as adapters deliver them.
func (g *Gateway) Router() *sessions.Router { return g.router }

// Logger is the gateway's logger, secrets masked.
func (g *Gateway) Logger() *slog.Logger { return g.log }

func (g *Gateway) healthz(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, http.StatusOK, "ok", "")
}

// readyz is 200 while the gateway runs and its store answers; 503 before
// Start, while stopping, and while the store does not answer, so a load
// balancer sends no one to a process that cannot take work.
func (g *Gateway) readyz(w http.ResponseWriter, r *http.Request) {
	if !g.ready.Load() {
		g.mu.Lock()
		state := "starting"
		if g.stopped {
			state = "stopping"
		}
		g.mu.Unlock()
		writeStatus(w, http.StatusServiceUnavailable, state, "")
		return
	}
	if err := g.checkStore(r.Context()); err != nil {
		writeStatus(w, http.StatusServiceUnavailable, "store_unavailable", "the store does not answer")
		return
	}
	writeStatus(w, http.StatusOK, "ready", "")
}

// checkStore reads the outbox once, at most every readyCheckEvery.
func (g *Gateway) checkStore(ctx context.Context) error {
	g.checkMu.Lock()
	defer g.checkMu.Unlock()
	if !g.checkedAt.IsZero() && time.Since(g.checkedAt) < readyCheckEvery {
		return g.checkErr
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := g.db.Outbox().Pending(ctx, 1)
	if err != nil && (g.checkErr == nil || g.checkedAt.IsZero()) {
		g.log.Warn("readiness: the store does not answer", "err", err)
	}
	g.checkedAt, g.checkErr = time.Now(), err
	return err
}

func writeStatus(w http.ResponseWriter, code int, status, msg string) {
	body := map[string]string{"status": status}
	if msg != "" {
		body["message"] = msg
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// answersEach says which origins wait for an answer to each message they
// send: the local API, whose completions wait for the reply or notice that
// names their message.
func answersEach(origin outbox.Target) bool { return origin.Platform == api.Platform }
