package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/logcalm"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/kanban"
)

// kanbanStopTimeout bounds a daemon's stop: its workers get their
// grace, and their claims are released.
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
	Paused []kanban.PausedLane `json:"paused"`
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
				log := redact.NewLogger(m.Stderr, level, b.redact)
				// A store that is down makes its loop warn on each try.
				log = slog.New(logcalm.Handler(log.Handler(), gateway.LogRepeatWindow))
				d, err := kanban.NewDaemon(b.dispatcherOptions(kanban.LanesFor(b.cfg, nil, nil), log))
				if err != nil {
					return err
				}
				if err := d.Start(context.WithoutCancel(ctx)); err != nil {
					return err
				}
				<-ctx.Done()
				stopCtx, cancel := context.WithTimeout(context.Background(), kanbanStopTimeout)
				defer cancel()
				return d.Shutdown(stopCtx)
			})
		},
	}
	daemon.Flags().StringVar(&logLevel, "log-level", "info", "least severe log level shown: debug, info, warn or error")

	cmd.AddCommand(dispatch, daemon)
}

// dispatcher is a dispatcher of b's store with lanes: see
// dispatcherOptions.
func (b *board) dispatcher(lanes map[string]kanban.LaneConfig, log *slog.Logger) (*kanban.Dispatcher, error) {
	return kanban.NewDispatcher(b.dispatcherOptions(lanes, log))
}

// dispatcherOptions are those of a dispatcher of b's store with lanes,
// named for this process, set up from kanban.*.
func (b *board) dispatcherOptions(lanes map[string]kanban.LaneConfig, log *slog.Logger) kanban.DispatcherOptions {
	host, _ := os.Hostname()
	opts := kanban.DispatcherOptionsFor(b.cfg.Kanban, b.svc, lanes)
	opts.Name = "kanban-cli-" + host + "-" + strconv.Itoa(os.Getpid())
	opts.Host = host
	opts.Env = b.workerEnv
	opts.Signals = b.signals
	opts.Logger = log
	return opts
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
	d, err := b.dispatcher(kanban.LanesFor(b.cfg, nil, nil), slog.New(slog.DiscardHandler))
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
	lanes := kanban.LanesFor(b.cfg, nil, nil)
	log := redact.NewLogger(m.Stderr, slog.LevelWarn, b.redact)
	once, err := kanban.NewOnceDispatch(b.dispatcherOptions(lanes, log), "herald kanban dispatch was interrupted")
	if err != nil {
		return err
	}
	rep, tickErr := once.Tick(ctx)
	r := reportOf(rep, false)
	if !asJSON {
		if err := printDispatch(ctx, m.Stdout, b, r); err != nil {
			return err
		}
		if n := once.Running(); n > 0 {
			fmt.Fprintf(m.Stdout, "waiting for %s (Ctrl-C stops them and releases their claims)\n", plural(n, "worker"))
		}
	}
	ended, interrupted := once.Wait(ctx, r.Claimed)
	r.Ended = ended
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
		Paused: kanban.PausedLanes(rep.Paused),
	}
}
