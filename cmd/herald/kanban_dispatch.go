package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/signals"
)

// kanbanStopTimeout bounds a daemon's (or an interrupted dispatch's)
// stop: its workers get their grace, and their claims are released.
const kanbanStopTimeout = 30 * time.Second

// dispatchReport is what dispatch --json prints.
type dispatchReport struct {
	DryRun    bool              `json:"dry_run"`
	Claimed   []string          `json:"claimed"`   // claimed and started (dry run: would be)
	Released  []string          `json:"released"`  // claimed, but the worker could not start
	Promoted  []string          `json:"promoted"`  // todo or scheduled cards made ready
	Reclaimed []string          `json:"reclaimed"` // claims of dead workers released
	Waiting   map[string]string `json:"waiting"`   // card → why it is not claimed
	// Paused are the lanes paused now, on every instance: until when
	// and why.
	Paused []pausedLane `json:"paused"`
	// Ended is the status each started card was left in when its worker
	// ended.
	Ended map[string]kanban.Status `json:"ended,omitempty"`
}

// addKanbanDispatchCommands adds dispatch and daemon.
func (m *Main) addKanbanDispatchCommands(cmd *cobra.Command, with withBoard) {
	var dry, dispatchJSON bool
	dispatch := &cobra.Command{
		Use:   "dispatch [--dry-run]",
		Short: "Dispatch once over every board, with the command lanes of kanban.lanes",
		Long: `Look at every board once, as a dispatcher does: release the claims of
workers that died, promote the cards whose parents are done, and claim
ready cards (and, with kanban.review_dispatch, cards in review) for
their lanes' workers, within kanban.max_spawn and each lane's
max_concurrent. The workers it starts are waited for, their claims
renewed, and how each card was left is printed; Ctrl-C stops them and
releases their claims, uncounted.

Only command lanes run here: the herald lane (and a lane without a
command) needs the gateway's model, so its cards wait for a gateway.

--dry-run changes nothing: it prints what would be claimed, and what
waits and why.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, false, func(ctx context.Context, b *board) error {
				if dry {
					return m.dispatchDry(ctx, b, dispatchJSON)
				}
				return m.dispatchOnce(ctx, b, dispatchJSON)
			})
		},
	}
	dispatch.Flags().BoolVar(&dry, "dry-run", false, "change nothing; print what would be claimed and what waits")
	addJSONFlag(dispatch, &dispatchJSON)

	var logLevel string
	daemon := &cobra.Command{
		Use:   "daemon",
		Short: "Dispatch cards to the command lanes of kanban.lanes until SIGINT or SIGTERM",
		Long: `Run a dispatcher until SIGINT or SIGTERM, as a gateway with
kanban.enabled does: every kanban.dispatch_interval_seconds (and at once
when a card becomes ready here) it claims ready cards for their lanes,
starts their workers, renews their claims, and reclaims those of
workers that died. Any number of daemons and gateways may dispatch one
store at once.

Only command lanes run here: the herald lane (and a lane without a
command) needs the gateway's model, so its cards wait for a gateway.

On SIGINT or SIGTERM it stops its workers and releases their claims,
uncounted, so another dispatcher runs them again. Logs are JSON lines
on stderr.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := parseLevel(logLevel)
			if err != nil {
				return err
			}
			return with(cmd, false, func(ctx context.Context, b *board) error {
				log := redact.NewLogger(m.Stderr, level, redact.New(b.cfg.Secrets()))
				lanes := gateway.KanbanLanes(b.cfg.Kanban, gateway.SubprocessEnv(b.cfg), nil, nil)
				d, err := b.dispatcher(lanes, log, nil)
				if err != nil {
					return err
				}
				b.svc.Ready = d.Wake
				if len(lanes) == 0 {
					log.Warn("kanban.lanes has no command lane: this daemon dispatches nothing")
				}
				// It hears of cards made ready elsewhere as a gateway does.
				tailer, err := signals.NewTailer(signals.TailerOptions{Store: b.signals, Handlers: []signals.Handler{d}, Logger: log})
				if err != nil {
					return err
				}
				if err := d.Start(context.WithoutCancel(ctx)); err != nil {
					return err
				}
				if err := tailer.Start(context.WithoutCancel(ctx)); err != nil {
					return errors.Join(err, d.Shutdown(context.Background()))
				}
				defer func() { _ = tailer.Shutdown(context.Background()) }()
				log.Info("the kanban daemon runs", "lanes", slices.Sorted(maps.Keys(lanes)))
				<-ctx.Done()
				stopCtx, cancel := context.WithTimeout(context.Background(), kanbanStopTimeout)
				defer cancel()
				if err := d.Shutdown(stopCtx); err != nil {
					return fmt.Errorf("stopping the kanban daemon: %w", err)
				}
				log.Info("the kanban daemon stopped")
				return nil
			})
		},
	}
	daemon.Flags().StringVar(&logLevel, "log-level", "info", "least severe log level shown: debug, info, warn or error")

	cmd.AddCommand(dispatch, daemon)
}

// dispatcher is a dispatcher of b's store with lanes, named for this
// process, set up from kanban.*; ended is told of each worker's end.
func (b *board) dispatcher(lanes map[string]kanban.LaneConfig, log *slog.Logger, ended func(string, kanban.Exit)) (*kanban.Dispatcher, error) {
	cfg := b.cfg.Kanban
	host, _ := os.Hostname()
	return kanban.NewDispatcher(kanban.DispatcherOptions{
		Service:         b.svc,
		Lanes:           lanes,
		Name:            "kanban-cli-" + host + "-" + strconv.Itoa(os.Getpid()),
		Host:            host,
		Interval:        cfg.DispatchInterval(),
		ClaimTTL:        cfg.ClaimTTL(),
		MaxSpawn:        cfg.MaxSpawn,
		DefaultAssignee: cfg.DefaultAssignee,
		ReviewDispatch:  cfg.ReviewDispatch,
		ReviewLane:      cfg.ReviewLane,
		RateLimitWait:   cfg.RateLimitWait(),
		Env:             b.workerEnv,
		Signals:         b.signals,
		Ended:           ended,
		Logger:          log,
	})
}

// workerEnv is what a worker this process starts is told beside its
// card: where herald's config is, so its `herald kanban complete`
// reaches the same store.
func (b *board) workerEnv(kanban.Card, int64) []string {
	env := []string{"HERALD_HOME=" + b.cfg.Home}
	if b.path != "" {
		env = append(env, "HERALD_CONFIG="+b.path)
	}
	return env
}

// dispatchDry prints what one dispatch would do.
func (m *Main) dispatchDry(ctx context.Context, b *board, asJSON bool) error {
	d, err := b.dispatcher(gateway.KanbanLanes(b.cfg.Kanban, gateway.SubprocessEnv(b.cfg), nil, nil), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return err
	}
	rep, err := d.Tick(ctx, true)
	if err != nil {
		return m.kanbanError("", err)
	}
	r := reportOf(rep, true)
	if asJSON {
		return m.printJSON(r)
	}
	return printDispatch(ctx, m.Stdout, b, r)
}

// dispatchOnce runs one dispatch and waits for the workers it started:
// a worker is never left running without the dispatcher that renews
// its claim.
func (m *Main) dispatchOnce(ctx context.Context, b *board, asJSON bool) error {
	ws := &tickWorkers{live: map[string]tickWorker{}, changed: make(chan struct{}, 1)}
	lanes := gateway.KanbanLanes(b.cfg.Kanban, gateway.SubprocessEnv(b.cfg), nil, nil)
	for name, lc := range lanes {
		lc.Lane = recordingLane{Lane: lc.Lane, ws: ws}
		lanes[name] = lc
	}
	log := redact.NewLogger(m.Stderr, slog.LevelWarn, redact.New(b.cfg.Secrets()))
	d, err := b.dispatcher(lanes, log, ws.ended)
	if err != nil {
		return err
	}
	rep, tickErr := d.Tick(ctx, false)
	r := reportOf(rep, false)
	if !asJSON {
		if err := printDispatch(ctx, m.Stdout, b, r); err != nil {
			return err
		}
		if n := ws.count(); n > 0 {
			fmt.Fprintf(m.Stdout, "waiting for %s (Ctrl-C stops them and releases their claims)\n", subagents(n, "worker"))
		}
	}
	interrupted := ws.wait(ctx, d, b, b.cfg.Kanban.ClaimTTL())
	r.Ended = map[string]kanban.Status{}
	for _, id := range r.Claimed {
		// Read without ctx: it may have ended with an interrupt.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kanbanTimeout)
		k, err := b.store.Card(rctx, id)
		cancel()
		if err == nil {
			r.Ended[id] = k.Status
		}
	}
	if asJSON {
		if err := m.printJSON(r); err != nil {
			return err
		}
	} else {
		for _, id := range r.Claimed {
			if st, ok := r.Ended[id]; ok {
				fmt.Fprintf(m.Stdout, "%s: its worker ended, the card is %s\n", id, st)
			}
		}
	}
	switch {
	case tickErr != nil && ctx.Err() == nil:
		return m.kanbanError("", tickErr)
	case interrupted:
		return fmt.Errorf("interrupted: the workers were stopped and their claims released")
	}
	return nil
}

func reportOf(rep kanban.TickReport, dry bool) dispatchReport {
	return dispatchReport{
		DryRun: dry, Claimed: nonNil(rep.Claimed), Released: nonNil(rep.Released),
		Promoted: nonNil(rep.Promoted), Reclaimed: nonNil(rep.Reclaimed), Waiting: rep.Skipped,
		Paused: pausedLanes(rep.Paused),
	}
}

// pausedLane is a lane paused, as dispatch --json and diagnostics
// --json print it.
type pausedLane struct {
	Lane   string    `json:"lane"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

func pausedLanes(ls []kanban.LaneState) []pausedLane {
	out := []pausedLane{}
	for _, l := range ls {
		out = append(out, pausedLane{Lane: l.Lane, Until: l.PausedUntil, Reason: l.Reason})
	}
	return out
}

// tickWorkers are the workers one dispatch started, until each ends.
type tickWorkers struct {
	mu      sync.Mutex
	live    map[string]tickWorker // card → its worker
	changed chan struct{}         // a worker ended
}

type tickWorker struct {
	token  int64
	worker kanban.Worker
}

// recordingLane is a lane whose workers ws knows of.
type recordingLane struct {
	kanban.Lane
	ws *tickWorkers
}

func (l recordingLane) Start(ctx context.Context, spec kanban.WorkerSpec) (kanban.Worker, error) {
	w, err := l.Lane.Start(ctx, spec)
	if err == nil {
		l.ws.mu.Lock()
		l.ws.live[spec.Card.ID] = tickWorker{token: spec.Token, worker: w}
		l.ws.mu.Unlock()
	}
	return w, err
}

// ended is the dispatcher's word that card's worker ended and how it
// ended is recorded.
func (ws *tickWorkers) ended(card string, _ kanban.Exit) {
	ws.mu.Lock()
	delete(ws.live, card)
	ws.mu.Unlock()
	select {
	case ws.changed <- struct{}{}:
	default:
	}
}

func (ws *tickWorkers) count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.live)
}

// wait renews the claims of the live workers until each has ended. When
// ctx ends first it releases their claims, uncounted, stops them, and
// reports true.
func (ws *tickWorkers) wait(ctx context.Context, d *kanban.Dispatcher, b *board, ttl time.Duration) bool {
	t := time.NewTicker(max(ttl/3, time.Second))
	defer t.Stop()
	for ws.count() > 0 {
		select {
		case <-ws.changed:
		case <-t.C:
			d.Heartbeat(ctx)
		case <-ctx.Done():
			ws.stop(b)
			return true
		}
	}
	return false
}

// stop releases each live worker's claim, so what it reported no more
// counts, and stops it; it returns once their ends are recorded.
func (ws *tickWorkers) stop(b *board) {
	ctx, cancel := context.WithTimeout(context.Background(), kanbanStopTimeout)
	defer cancel()
	ws.mu.Lock()
	live := maps.Clone(ws.live)
	ws.mu.Unlock()
	for card, w := range live {
		_, _ = b.svc.Release(ctx, card, w.token, kanban.Ending{Outcome: kanban.OutcomeReclaimed, Reason: "herald kanban dispatch was interrupted", Uncounted: true})
		_ = w.worker.Stop(ctx)
	}
	for ws.count() > 0 {
		select {
		case <-ws.changed:
		case <-ctx.Done():
			return
		}
	}
}
