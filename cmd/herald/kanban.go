package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/signals"
)

// kanbanTimeout bounds one kanban command's store calls; the commands
// that follow or run (tail --follow, dispatch, daemon) are not bounded.
const kanbanTimeout = 30 * time.Second

// exitLeaseLost is what a kanban command exits with when the claim a
// worker reported under was released: the worker should stop.
const exitLeaseLost = 3

// cliActor is who a person's change made with the CLI is recorded as;
// a worker's report (under HERALD_KANBAN_CLAIM) is workerActor's.
const (
	cliActor    = "cli"
	workerActor = "worker"
)

// board is what a kanban command works on: the config, the store it
// names, the board service over it, and the --board.
type board struct {
	cfg   config.Config
	path  string // --config, handed on to the workers a dispatch starts
	store kanban.Store
	svc   *kanban.Service
	slug  string
	// signals carry a card made ready here to the dispatchers of the
	// gateways and daemons on the store.
	signals signals.Store
	// redact masks the config's secrets in what the board keeps and in
	// the dispatchers' logs.
	redact *redact.Redactor
}

func (m *Main) kanbanCommand() *cobra.Command {
	var path, slug string
	cmd := &cobra.Command{
		Use:   "kanban",
		Short: "Boards of cards that lanes of workers claim and complete",
		Long: `A board holds cards: units of work that outlive sessions and restarts,
linked parent to child (a child waits for its parents), claimed by one
worker at a time. A card goes triage → todo → ready → running → review →
done (or blocked, scheduled, archived on the way). A dispatcher — in the
gateway (kanban.enabled) or 'herald kanban daemon' — hands ready cards to
their lane: herald's worker agent, or a command from kanban.lanes.

These commands work on the store the config names, while a gateway runs.
Card ids are t_ and 8 hex digits; --board (default "default") picks the
board of the commands that list or create.

A worker of a command lane reports with this CLI: with HERALD_KANBAN_TASK
and HERALD_KANBAN_CLAIM in its environment (the dispatcher sets them),
'complete', 'block', 'heartbeat' and 'comment' need no card id; with
HERALD_KANBAN_API_URL and HERALD_KANBAN_TOKEN set too, they report over
that gateway's HTTP API instead of the store. When the claim a worker
reports under was released (reclaimed, timed out, taken by another), the
command says so and exits 3: the worker should stop.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	cmd.PersistentFlags().StringVar(&slug, "board", kanban.DefaultBoard, "the board")

	// with opens the store and runs f on the board; bounded commands get
	// kanbanTimeout, the others run until interrupted.
	with := func(cmd *cobra.Command, bounded bool, f func(context.Context, *board) error) error {
		cfg, err := m.loadConfig(path)
		if err != nil {
			return err
		}
		if err := kanban.CheckSlug("", slug); err != nil {
			return usagef("--board: %s", errs.Reason(err))
		}
		ctx := cmd.Context()
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, kanbanTimeout)
			defer cancel()
		}
		openCtx, cancel := context.WithTimeout(ctx, kanbanTimeout)
		defer cancel()
		db, err := gateway.OpenStore(openCtx, cfg.Store, cfg.SQLitePath(), nil)
		if err != nil {
			return fmt.Errorf("opening the store: %w", err)
		}
		defer db.Close()
		if path != "" {
			if path, err = filepath.Abs(path); err != nil {
				return err
			}
		}
		b := &board{cfg: cfg, path: path, store: db.Kanban(), svc: kanban.ServiceFor(db.Kanban(), cfg), slug: slug, signals: db.Signals(),
			redact: redact.New(cfg.Secrets())}
		// What a person or a worker says of a card is kept masked.
		b.svc.Redact = b.redact.String
		// A card this command makes ready runs at once, not at the
		// dispatchers' next look.
		b.svc.Ready = func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kanbanTimeout)
			defer cancel()
			_ = kanban.AnnounceReady(ctx, b.signals, cliActor)
		}
		return f(ctx, b)
	}
	m.addKanbanBoardCommands(cmd, with)
	m.addKanbanCardCommands(cmd, with)
	m.addKanbanEditCommands(cmd, with)
	cmd.AddCommand(m.kanbanAttachCommand(with))
	m.addKanbanReportCommands(cmd, with)
	m.addKanbanWatchCommands(cmd, with)
	m.addKanbanDispatchCommands(cmd, with)
	m.addKanbanNotifyCommands(cmd, with)
	return cmd
}

// withBoard is how a kanban subcommand reaches the store: see
// kanbanCommand.
type withBoard func(cmd *cobra.Command, bounded bool, f func(context.Context, *board) error) error

// kanbanError is err as a person reads it: the reason alone for a bad
// input, a card that is not there or in the wrong state; a released
// claim is said in so many words and exits 3.
func (m *Main) kanbanError(card string, err error) error {
	switch errs.CodeOf(err) {
	case errs.LeaseLost:
		return m.leaseLost(card)
	case errs.Invalid, errs.NotFound, errs.Conflict, errs.TooLarge:
		return fmt.Errorf("%s", errs.Reason(err))
	}
	return err
}

// leaseLost tells a worker its claim on card is gone, and exits 3.
func (m *Main) leaseLost(card string) error {
	fmt.Fprintf(m.Stderr, "herald: the claim on %s was released; stop working on it\n", card)
	return exitCode(exitLeaseLost)
}

// exists refuses, with a hint, a --board that was never made; the
// default board always exists.
func (b *board) exists(ctx context.Context) error {
	if b.slug == kanban.DefaultBoard {
		return nil
	}
	_, err := b.store.Board(ctx, b.slug)
	if errs.Is(err, errs.NotFound) {
		return fmt.Errorf("no board %q (make it with 'herald kanban init --board %s')", b.slug, b.slug)
	}
	return err
}

// card reads one card, saying so when there is none.
func (b *board) card(ctx context.Context, id string) (kanban.Card, error) {
	k, err := b.store.Card(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return k, fmt.Errorf("no card %s (see 'herald kanban list')", id)
	}
	return k, err
}

// cardArgs wants n positional arguments, named in use for the error.
func cardArgs(use string, n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("want %s", use)
		}
		for _, a := range args {
			if strings.TrimSpace(a) == "" {
				return usagef("want %s, not an empty argument", use)
			}
		}
		return nil
	}
}

func addJSONFlag(c *cobra.Command, p *bool) {
	c.Flags().BoolVar(p, "json", false, "print JSON")
}

// parseStatuses reads --status values.
func parseStatuses(ss []string) ([]kanban.Status, error) {
	var out []kanban.Status
	for _, s := range ss {
		st := kanban.Status(strings.ToLower(strings.TrimSpace(s)))
		if !st.Valid() {
			return nil, usagef("--status %q is not a status (%s)", s, statusWords())
		}
		out = append(out, st)
	}
	return out, nil
}

func statusWords() string {
	ws := make([]string, len(kanban.Statuses))
	for i, s := range kanban.Statuses {
		ws[i] = string(s)
	}
	return strings.Join(ws, ", ")
}

// parseAt reads an RFC3339 time flag.
func parseAt(flag, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, usagef("%s %q is not an RFC3339 time like 2026-12-03T09:00:00Z", flag, s)
	}
	return t, nil
}
