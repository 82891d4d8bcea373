package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// stopWait is how long stop waits for the dispatcher that runs a
// card's worker elsewhere to end it and block the card: the worker's
// grace after SIGTERM (5 s), the signal tailers' poll, and room.
const stopWait = 15 * time.Second

// addKanbanEditCommands adds stop and edit.
func (m *Main) addKanbanEditCommands(cmd *cobra.Command, with withBoard) {
	var (
		reason   string
		stopJSON bool
	)
	stop := &cobra.Command{
		Use:   "stop ID [--reason R]",
		Short: "End a running card's worker, then block the card with the reason",
		Long: `End a running card's worker and block the card with --reason, no
failure counted, from any machine on the store; 'unblock' sends it back.
It is reclaim's stop, with a block after it: the request is written on
the card's claim, which keeps the card from any other worker; a worker
process on this machine is ended here (its whole process group); a
claim whose gateway is gone, or that ran out, or that was taken by hand
with 'claim', is blocked at once; else the gateway that runs the worker
is signalled, ends it and blocks the card, and this waits up to 15 s
for it. A card that is not running is refused.`,
		Args: cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				k, err := stopCard(ctx, b, args[0], reason)
				if err != nil {
					return m.kanbanError(args[0], err)
				}
				if stopJSON {
					return m.printJSON(k)
				}
				_, err = fmt.Fprintf(m.Stdout, "stopped %s: its worker ended; blocked: %s\n", k.ID, k.BlockReason)
				return err
			})
		},
	}
	stop.Flags().StringVar(&reason, "reason", kanban.DefaultStopReason, "why, for the card's block")
	addJSONFlag(stop, &stopJSON)

	var (
		title, body string
		priority    int
		editJSON    bool
	)
	edit := &cobra.Command{
		Use:   "edit ID [--title T] [--body B] [--priority N]",
		Short: "Change a card's title, body or priority",
		Long: `Change a card's title, body and priority (at least one), in any status
but archived. A running card's worker goes on with what it was given;
its next run reads the card anew.`,
		Args: cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var e kanban.EditSpec
			if cmd.Flags().Changed("title") {
				e.Title = &title
			}
			if cmd.Flags().Changed("body") {
				e.Body = &body
			}
			if cmd.Flags().Changed("priority") {
				e.Priority = &priority
			}
			if e == (kanban.EditSpec{}) {
				return usagef("give --title, --body or --priority")
			}
			return with(cmd, true, func(ctx context.Context, b *board) error {
				k, err := b.svc.Edit(ctx, args[0], e, cliActor)
				if err != nil {
					return m.kanbanError(args[0], err)
				}
				if editJSON {
					return m.printJSON(k)
				}
				_, err = fmt.Fprintf(m.Stdout, "edited %s: %q, priority %d\n", k.ID, k.Title, k.Priority)
				return err
			})
		},
	}
	edit.Flags().StringVar(&title, "title", "", "the new title")
	edit.Flags().StringVar(&body, "body", "", "the new body (\"\" empties it)")
	edit.Flags().IntVar(&priority, "priority", 0, "the new priority (higher is claimed first)")
	addJSONFlag(edit, &editJSON)

	cmd.AddCommand(stop, edit)
}

// stopCard stops the running card id's worker and blocks the card with
// reason, as reclaim does but for the block (kanban.Service.Stop), and
// returns the card once that is done.
func stopCard(ctx context.Context, b *board, id, reason string) (kanban.Card, error) {
	host, _ := os.Hostname()
	k, ended, err := b.svc.Stop(ctx, id, kanban.StopSpec{Reason: reason, Actor: cliActor, Host: host, Signals: b.signals, Wait: stopWait})
	switch {
	case errs.Is(err, errs.LeaseLost):
		return k, fmt.Errorf("the claim on %s changed meanwhile; look again ('herald kanban show %s')", id, id)
	case err != nil:
		return k, err
	case !ended:
		return k, fmt.Errorf("asked %s (host %s) to stop the worker of %s; it has not yet: the card is blocked once it has (at the latest when its claim runs out at %s), and no other worker takes it before",
			k.Claim.Owner, cmp.Or(k.Claim.Host, "unknown"), k.ID, timeOrNone(k.Claim.Expires))
	}
	return stopped(k, cmp.Or(strings.TrimSpace(reason), kanban.DefaultStopReason))
}

// stopped is k, a card whose stopped worker's claim ended, when the stop
// blocked it; an error saying how it ended otherwise (its worker
// reported first).
func stopped(k kanban.Card, reason string) (kanban.Card, error) {
	if k.Status == kanban.StatusBlocked && k.BlockReason == reason {
		return k, nil
	}
	return k, fmt.Errorf("%s's run ended before its worker was stopped: it is %s", k.ID, k.Status)
}
