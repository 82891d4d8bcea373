package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// gcAge is how old a done card is before gc archives it, by default.
const gcAge = "30d"

// reclaimWait is how long reclaim waits for a worker's gateway to stop
// it: within the command's kanbanTimeout.
const reclaimWait = 20 * time.Second

// addKanbanCardCommands adds the commands a person moves cards with:
// assign, reassign, claim, unblock, link, unlink, promote, schedule,
// archive, reclaim and gc.
func (m *Main) addKanbanCardCommands(cmd *cobra.Command, with withBoard) {
	assign := func(use, short string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID LANE",
			Short: short,
			Args:  cardArgs("a card's id and a lane", 2),
			RunE: func(cmd *cobra.Command, args []string) error {
				return with(cmd, true, func(ctx context.Context, b *board) error {
					k, err := b.svc.Assign(ctx, args[0], args[1], cliActor)
					if err != nil {
						return m.kanbanError(args[0], err)
					}
					line := fmt.Sprintf("%s is assigned to %s", k.ID, k.Assignee)
					if _, ok := b.cfg.Kanban.Lanes[k.Assignee]; !ok && k.Assignee != kanban.HeraldLane {
						line += fmt.Sprintf(" (no lane %s in kanban.lanes: it waits until there is one)", k.Assignee)
					}
					_, err = fmt.Fprintln(m.Stdout, line)
					return err
				})
			},
		}
	}

	var (
		ttl       time.Duration
		owner     string
		claimJSON bool
	)
	claim := &cobra.Command{
		Use:   "claim ID",
		Short: "Claim a ready card by hand and print its claim token",
		Long: `Claim a ready card by hand, as a worker: it becomes running under a
claim that lasts --ttl (kanban.claim_ttl_seconds unless set). Report as
its worker with the token printed (HERALD_KANBAN_TASK and
HERALD_KANBAN_CLAIM set, 'herald kanban heartbeat' before the claim runs
out, then 'complete' or 'block'); a claim that runs out is reclaimed by
a dispatcher and counted as a failed run.`,
		Args: cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				d := ttl
				if d <= 0 {
					d = b.cfg.Kanban.ClaimTTL()
				}
				k, err := b.svc.Claim(ctx, args[0], kanban.ClaimSpec{Owner: owner, TTL: d})
				if err != nil {
					return m.kanbanError(args[0], err)
				}
				if claimJSON {
					return m.printJSON(k)
				}
				c := k.Claim
				_, err = fmt.Fprintf(m.Stdout, "claimed %s: claim token %d, run %s, until %s\nreport as its worker with HERALD_KANBAN_TASK=%s HERALD_KANBAN_CLAIM=%d\n",
					k.ID, c.Token, c.Run, timeOrNone(c.Expires), k.ID, c.Token)
				return err
			})
		},
	}
	claim.Flags().DurationVar(&ttl, "ttl", 0, "how long the claim holds without a heartbeat (default kanban.claim_ttl_seconds)")
	claim.Flags().StringVar(&owner, "owner", cliActor, "who holds the claim")
	addJSONFlag(claim, &claimJSON)

	// one runs a service call on one card and prints what it did.
	one := func(use, short string, n int, args string, fn func(context.Context, *board, []string) (kanban.Card, error), done func(kanban.Card, []string) string) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cardArgs(args, n),
			RunE: func(cmd *cobra.Command, a []string) error {
				return with(cmd, true, func(ctx context.Context, b *board) error {
					k, err := fn(ctx, b, a)
					if err != nil {
						return m.kanbanError(a[0], err)
					}
					_, err = fmt.Fprintln(m.Stdout, done(k, a))
					return err
				})
			},
		}
	}
	moved := func(verb string) func(kanban.Card, []string) string {
		return func(k kanban.Card, _ []string) string { return fmt.Sprintf("%s %s: now %s", verb, k.ID, k.Status) }
	}

	unblock := one("unblock ID", "Send a blocked (or triaged) card back: ready when its parents are done, else todo", 1, "one card's id",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			return b.svc.Unblock(ctx, a[0], cliActor)
		},
		moved("unblocked"))
	link := one("link PARENT CHILD", "Make CHILD wait for PARENT", 2, "a parent's id and a child's",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			return b.svc.Link(ctx, a[0], a[1], cliActor)
		},
		func(k kanban.Card, a []string) string {
			return fmt.Sprintf("linked %s → %s (%s)", a[0], k.ID, k.Status)
		})
	unlink := one("unlink PARENT CHILD", "Stop CHILD waiting for PARENT", 2, "a parent's id and a child's",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			return b.svc.Unlink(ctx, a[0], a[1], cliActor)
		},
		func(k kanban.Card, a []string) string {
			return fmt.Sprintf("unlinked %s → %s (%s)", a[0], k.ID, k.Status)
		})
	archive := one("archive ID", "Take a card off the board's lists", 1, "one card's id",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			return b.svc.Archive(ctx, a[0], cliActor)
		},
		func(k kanban.Card, _ []string) string { return "archived " + k.ID })

	var at string
	schedule := one("schedule ID --at TIME", "Hold a card back until TIME (RFC3339), when it becomes ready", 1, "one card's id",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			if at == "" {
				return kanban.Card{}, usagef("--at is required")
			}
			t, err := parseAt("--at", at)
			if err != nil {
				return kanban.Card{}, err
			}
			return b.svc.Schedule(ctx, a[0], t, cliActor)
		},
		func(k kanban.Card, _ []string) string {
			return fmt.Sprintf("scheduled %s for %s", k.ID, timeOrNone(k.ScheduledAt))
		})
	schedule.Flags().StringVar(&at, "at", "", "when it becomes ready, RFC3339 (2026-12-03T09:00:00Z)")

	var reason string
	reclaim := one("reclaim ID", "Stop a running card's worker and end its claim: it is ready again, counted as a failed run", 1, "one card's id",
		func(ctx context.Context, b *board, a []string) (kanban.Card, error) {
			host, _ := os.Hostname()
			k, released, err := b.svc.Reclaim(ctx, a[0], kanban.StopSpec{Reason: reason, Actor: cliActor, Host: host, Signals: b.signals, Wait: reclaimWait})
			switch {
			case errs.Is(err, errs.LeaseLost):
				return k, fmt.Errorf("the claim on %s changed meanwhile; look again ('herald kanban show %s')", a[0], a[0])
			case err != nil:
				return k, err
			case !released:
				return k, fmt.Errorf("asked %s to stop the worker of %s; it has not yet: the card is released once it has (at the latest when its claim runs out at %s), and no other worker takes it before", k.Claim.Owner, k.ID, timeOrNone(k.Claim.Expires))
			}
			return k, nil
		},
		moved("reclaimed"))
	reclaim.Long = `Stop a running card's worker and end its claim: the run ends
reclaimed, counted as a failure, and the card is ready again (blocked
once it reaches its failure limit). No other worker takes the card
before its old one is gone: a worker process on this machine is ended
here (its process group); one in a gateway that is gone, or whose claim
ran out, is released at once; else its gateway is asked over the
store's signals to stop it, and this waits for it.`
	reclaim.Flags().StringVar(&reason, "reason", "reclaimed by hand (herald kanban reclaim)", "why, for the run's record")

	promote := &cobra.Command{
		Use:   "promote",
		Short: "Make ready the board's todo cards whose parents are done, and scheduled ones whose time came",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				cards, err := b.svc.Promote(ctx, b.slug)
				if err != nil {
					return m.kanbanError("", err)
				}
				if len(cards) == 0 {
					_, err := fmt.Fprintln(m.Stdout, "nothing to promote")
					return err
				}
				for _, k := range cards {
					if _, err := fmt.Fprintf(m.Stdout, "promoted %s: now %s\n", k.ID, k.Status); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}

	var olderThan string
	gc := &cobra.Command{
		Use:   "gc [--older-than AGE]",
		Short: "Archive the board's done cards completed more than --older-than ago",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := parseAge(olderThan)
			if err != nil {
				return usagef("--older-than: %v", err)
			}
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				n, err := b.svc.ArchiveDone(ctx, b.slug, age, cliActor)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(m.Stdout, "archived %s done more than %s ago\n", plural(n, "card"), olderThan)
				return err
			})
		},
	}
	gc.Flags().StringVar(&olderThan, "older-than", gcAge, "how long ago a card was done: 30d, 12h, 90m")

	cmd.AddCommand(
		assign("assign", "Give a card to a lane"),
		assign("reassign", "Give a card to another lane; refused while it runs"),
		claim, unblock, link, unlink, promote, schedule, archive, reclaim, gc,
	)
}

// parseAge reads a duration that may be in days: 30d, or what
// time.ParseDuration reads (12h, 90m).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("%q is not an age like 30d, 12h or 90m", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not an age like 30d, 12h or 90m", s)
	}
	return d, nil
}
