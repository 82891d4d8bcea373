package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// stopWait is how long stop waits for the dispatcher that runs a
// card's worker to end it and block the card: the worker's grace after
// SIGTERM (5 s), the signal tailers' poll, and room.
const stopWait = 15 * time.Second

// stopPoll is how often stop reads the card while it waits.
const stopPoll = 100 * time.Millisecond

// addKanbanEditCommands adds stop and edit.
func (m *Main) addKanbanEditCommands(cmd *cobra.Command, with withBoard) {
	var (
		reason   string
		stopJSON bool
	)
	stop := &cobra.Command{
		Use:   "stop ID [--reason R]",
		Short: "End a running card's worker, then block the card with the reason",
		Long: `End a running card's worker and block the card with --reason, from
any machine on the store, while the gateways run. The request is written
on the card's claim and signalled to every gateway and daemon: the one
that runs the worker ends it (a command's whole process group) and then
blocks the card; 'unblock' sends it back. A worker on this machine
whose dispatcher does not answer within 15 s is killed here, and a claim
no worker was started for (taken with 'claim') is blocked at once. A
card that is not running is refused.`,
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

// stopCard asks for the running card id's worker to be stopped and the
// card blocked with reason, and returns the card once that is done (see
// stop's help for who does it).
func stopCard(ctx context.Context, b *board, id, reason string) (kanban.Card, error) {
	k, err := b.card(ctx, id)
	if err != nil {
		return k, err
	}
	if k.Status != kanban.StatusRunning || k.Claim == nil {
		return k, fmt.Errorf("%s is %s, not running: it has no worker to stop", k.ID, k.Status)
	}
	k, err = b.svc.RequestStop(ctx, id, reason, cliActor)
	if err != nil {
		return k, err
	}
	cl := *k.Claim
	if cl.Spawned {
		if err := kanban.AnnounceStop(ctx, b.signals, k.ID, cliActor); err != nil {
			return k, fmt.Errorf("telling the gateways to stop %s's worker: %w", k.ID, err)
		}
		if ended, err := waitClaimEnded(ctx, b, k.ID, cl.Token); err != nil || ended != nil {
			if err != nil {
				return k, err
			}
			return stopped(*ended, cl.Stop.Reason)
		}
	}
	// No dispatcher ended it: do it here, as far as this machine can.
	host, _ := os.Hostname()
	unconfirmed := ""
	switch {
	case cl.PID > 0 && cl.Host == host:
		if err := kanban.StopOrphan(ctx, cl.PID, cl.ProcStart, sleepPoll); err != nil {
			return k, fmt.Errorf("killing %s's worker (pid %d): %w", k.ID, cl.PID, err)
		}
	case cl.Spawned:
		unconfirmed = fmt.Sprintf("%s is blocked, but %s (host %s), which runs its worker, did not confirm the worker's end within %s; it stops the worker when it next renews its claim, if it still runs",
			k.ID, cl.Owner, cmp.Or(cl.Host, "unknown"), stopWait)
	}
	k, err = b.svc.BlockStopped(ctx, k.ID, cl.Token, *cl.Stop)
	if errs.Is(err, errs.LeaseLost) {
		// Its worker (or its dispatcher) ended the claim meanwhile.
		if k, err = b.card(ctx, id); err != nil {
			return k, err
		}
		return stopped(k, cl.Stop.Reason)
	}
	if err != nil {
		return k, err
	}
	if unconfirmed != "" {
		return k, fmt.Errorf("%s", unconfirmed)
	}
	return k, nil
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

// waitClaimEnded waits up to stopWait for card's claim token to end, and
// returns the card as it then is (nil when it did not end).
func waitClaimEnded(ctx context.Context, b *board, card string, token int64) (*kanban.Card, error) {
	deadline := time.Now().Add(stopWait)
	t := time.NewTicker(stopPoll)
	defer t.Stop()
	for {
		k, err := b.card(ctx, card)
		if err != nil {
			return nil, err
		}
		if k.Claim == nil || k.Claim.Token != token {
			return &k, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// sleepPoll waits a little, for a killed process to go.
func sleepPoll(ctx context.Context) error {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
