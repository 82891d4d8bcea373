package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/kanban"
)

// tailPoll is how often tail --follow reads the card's log again.
const tailPoll = time.Second

// addKanbanWatchCommands adds what shows a board's work: runs, log,
// tail, stats and diagnostics.
func (m *Main) addKanbanWatchCommands(cmd *cobra.Command, with withBoard) {
	var runsJSON bool
	runs := &cobra.Command{
		Use:   "runs ID",
		Short: "List a card's runs, oldest first: lane, owner, start, end, outcome",
		Args:  cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				k, err := b.card(ctx, args[0])
				if err != nil {
					return err
				}
				rs, err := b.store.Runs(ctx, k.ID)
				if err != nil {
					return err
				}
				if runsJSON {
					return m.printJSON(nonNil(rs))
				}
				return printKanbanRuns(m.Stdout, rs)
			})
		},
	}
	addJSONFlag(runs, &runsJSON)

	var run string
	logCmd := &cobra.Command{
		Use:   "log ID [--run RUN]",
		Short: "Print the output a command lane's worker left for a run (the newest by default)",
		Args:  cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				k, err := b.card(ctx, args[0])
				if err != nil {
					return err
				}
				id := run
				if id == "" {
					rs, err := b.store.Runs(ctx, k.ID)
					if err != nil {
						return err
					}
					if len(rs) == 0 {
						return fmt.Errorf("%s has no runs yet", k.ID)
					}
					id = rs[len(rs)-1].ID
				}
				path := filepath.Join(b.cfg.Home, "kanban", "logs", k.ID, id+".log")
				f, err := os.Open(path)
				if errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("run %s of %s left no log at %s (the herald lane's runs keep none; a run on another machine keeps its log there)", id, k.ID, path)
				}
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(m.Stdout, f)
				return err
			})
		},
	}
	logCmd.Flags().StringVar(&run, "run", "", "the run (see 'herald kanban runs ID')")

	var follow, tailJSON bool
	tail := &cobra.Command{
		Use:   "tail ID [--follow]",
		Short: "Print a card's events; --follow prints new ones as they come, until interrupted",
		Long: `Print a card's events, oldest first. With --follow, read its log again
every second and print what is new, until interrupted. With --json, a JSON
array of the events; with --follow too, one JSON object a line.`,
		Args: cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, !follow, func(ctx context.Context, b *board) error {
				k, err := b.card(ctx, args[0])
				if err != nil {
					return err
				}
				evs, err := kanban.CardEvents(ctx, b.store, k, "")
				if err != nil {
					return err
				}
				if !follow {
					if tailJSON {
						return m.printJSON(nonNil(evs))
					}
					return printEvents(m.Stdout, evs, "")
				}
				after := ""
				show := func(evs []kanban.Event) error {
					for _, e := range evs {
						after = e.Cursor
						var err error
						if tailJSON {
							err = m.printJSONLine(e)
						} else {
							err = printEvents(m.Stdout, []kanban.Event{e}, "")
						}
						if err != nil {
							return err
						}
					}
					return nil
				}
				if err := show(evs); err != nil {
					return err
				}
				t := time.NewTicker(tailPoll)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return nil
					case <-t.C:
					}
					evs, err := kanban.CardEvents(ctx, b.store, k, after)
					if ctx.Err() != nil {
						return nil
					}
					if err != nil {
						return err
					}
					if err := show(evs); err != nil {
						return err
					}
				}
			})
		},
	}
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted")
	addJSONFlag(tail, &tailJSON)

	var statsJSON bool
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Count the board's cards by status and by lane",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				st, err := kanban.Stats(ctx, b.store, b.slug)
				if err != nil {
					return err
				}
				if statsJSON {
					return m.printJSON(st)
				}
				return printStats(m.Stdout, st)
			})
		},
	}
	addJSONFlag(stats, &statsJSON)

	var diagJSON bool
	diag := &cobra.Command{
		Use:   "diagnostics",
		Short: "Name what is stuck: ready cards waiting 30m or more, blocked cards, claims that ran out, workers gone, lanes paused",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				host, _ := os.Hostname()
				d, err := kanban.Diagnose(ctx, b.svc, b.slug, host)
				if err != nil {
					return err
				}
				if diagJSON {
					return m.printJSON(d)
				}
				return printDiagnostics(m.Stdout, d)
			})
		},
	}
	addJSONFlag(diag, &diagJSON)

	cmd.AddCommand(runs, logCmd, tail, stats, diag)
}

// printJSONLine prints v as one line of JSON.
func (m *Main) printJSONLine(v any) error {
	return jsonLine(m.Stdout, v)
}
