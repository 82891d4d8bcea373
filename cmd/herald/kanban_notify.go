package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// addKanbanNotifyCommands adds notify-subscribe, notify-list and
// notify-unsubscribe.
func (m *Main) addKanbanNotifyCommands(cmd *cobra.Command, with withBoard) {
	var (
		target  string
		events  []string
		subJSON bool
	)
	subscribe := &cobra.Command{
		Use:   "notify-subscribe --target T [--events E,…]",
		Short: "Send the board's events to a chat, from now on",
		Long: `Send the board's events of some kinds (none named: the default set) to
a target, each once, from now on. Targets are cron's: telegram / slack /
discord (that platform's home channel), platform:chat[:thread], or a
comma list; the platform must be configured.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			target = strings.TrimSpace(target)
			if target == "" {
				return usagef("--target is required")
			}
			kinds, err := kanban.ParseNotifyEvents(events...)
			if err != nil {
				return usagef("--events: %s", errs.Reason(err))
			}
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				ts, err := cronjobs.TargetsFor(b.cfg, gateway.ConfiguredPlatforms(b.cfg.Platforms)).Resolve(target, nil)
				if err != nil {
					return m.kanbanError("", err)
				}
				if len(ts) == 0 {
					return fmt.Errorf("target %q sends nothing: name a platform or platform:chat", target)
				}
				// From now on: the events before it are not sent.
				s, err := kanban.Subscribe(ctx, b.store, kanban.Subscription{Board: b.slug, Target: target, Events: kinds})
				if err != nil {
					return m.kanbanError("", err)
				}
				if subJSON {
					return m.printJSON(s)
				}
				_, err = fmt.Fprintf(m.Stdout, "subscribed %s: board %s's %s go to %s\n", s.ID, s.Board, kindsText(s.Events), s.Target)
				return err
			})
		},
	}
	subscribe.Flags().StringVar(&target, "target", "", "where the events go (see above)")
	subscribe.Flags().StringSliceVar(&events, "events", nil, "the event kinds sent, a comma list (default: "+strings.Join(kanban.DefaultNotifyEvents, ",")+")")
	addJSONFlag(subscribe, &subJSON)

	var listJSON bool
	list := &cobra.Command{
		Use:   "notify-list",
		Short: "List the board's subscriptions",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				ss, err := b.store.Subscriptions(ctx, b.slug)
				if err != nil {
					return err
				}
				if listJSON {
					return m.printJSON(nonNil(ss))
				}
				if len(ss) == 0 {
					_, err := fmt.Fprintf(m.Stdout, "no subscriptions on board %s\n", b.slug)
					return err
				}
				for _, s := range ss {
					if _, err := fmt.Fprintf(m.Stdout, "%s  %s  %s\n", s.ID, s.Target, kindsText(s.Events)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addJSONFlag(list, &listJSON)

	unsubscribe := &cobra.Command{
		Use:   "notify-unsubscribe ID",
		Short: "Remove a subscription",
		Args:  cardArgs("one subscription's id (see 'herald kanban notify-list')", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				err := b.store.RemoveSubscription(ctx, args[0])
				if errs.Is(err, errs.NotFound) {
					return fmt.Errorf("no subscription %s (see 'herald kanban notify-list')", args[0])
				}
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(m.Stdout, "unsubscribed %s\n", args[0])
				return err
			})
		},
	}

	cmd.AddCommand(subscribe, list, unsubscribe)
}

func kindsText(kinds []string) string {
	if len(kinds) == 0 {
		return strings.Join(kanban.DefaultNotifyEvents, ", ") + " events (the default set)"
	}
	return strings.Join(kinds, ", ") + " events"
}
