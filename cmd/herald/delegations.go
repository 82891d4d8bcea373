package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
)

// delegationsTimeout bounds one delegations command's store calls.
const delegationsTimeout = 30 * time.Second

// What show prints of a child's result without --json.
const (
	showSummaryLines = 12
	showSummaryChars = 1200
)

func (m *Main) delegationsCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:     "delegations",
		Aliases: []string{"delegation"},
		Short:   "List the background sub-agents, show one delegation, stop one",
		Long: `A delegation is background work: the sub-agents one delegate_task call,
/background or POST /api/v1/delegations started, whose results come back
to their conversation. 'list' shows them newest first with their
children, 'show ID' one with every child's progress and result, and
'stop ID' stops each of its sub-agents: one not started yet at once, a
running one on whichever instance runs it; each ends interrupted and
its partial result comes back as usual.

The store is the one the config names (see 'herald config check'); a
running gateway may share it.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	withService := func(cmd *cobra.Command, f func(context.Context, *delegation.Service) error) error {
		return m.withStore(cmd, path, delegationsTimeout, func(ctx context.Context, _ config.Config, db gateway.Store) error {
			// No runner here: a stop goes to the instance running the
			// child through the store's signals.
			return f(ctx, &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Cancelled: "cancelled by the operator"})
		})
	}
	oneID := func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
			return usagef("want one delegation's id (see 'herald delegations list')")
		}
		return nil
	}
	notFound := func(id string, err error) error {
		if errs.Is(err, errs.NotFound) {
			return fmt.Errorf("no delegation %q (see 'herald delegations list')", id)
		}
		return err
	}

	var (
		listJSON, active bool
		conv             string
		limit            int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the delegations, newest first, each with its sub-agents",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usagef("--limit is %d; want 1 or more", limit)
			}
			return withService(cmd, func(ctx context.Context, svc *delegation.Service) error {
				ds, err := svc.Store.List(ctx, delegation.Query{Conv: conv, Active: active, Limit: limit})
				if err != nil {
					return err
				}
				if listJSON {
					views := make([]delegation.View, len(ds))
					for i, d := range ds {
						views[i] = delegation.ViewOf(d)
					}
					return m.printJSON(views)
				}
				return printDelegations(m.Stdout, ds, time.Now())
			})
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print a JSON array of the delegations")
	list.Flags().StringVar(&conv, "conv", "", "only this conversation's (its key, e.g. telegram:123 or api:demo)")
	list.Flags().BoolVar(&active, "active", false, "only delegations with a sub-agent not ended")
	list.Flags().IntVar(&limit, "limit", 20, "list at most this many")

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a delegation with each sub-agent's status, progress and result",
		Args:  oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return withService(cmd, func(ctx context.Context, svc *delegation.Service) error {
				d, err := svc.Get(ctx, id)
				if err != nil {
					return notFound(id, err)
				}
				if showJSON {
					return m.printJSON(delegation.ViewOf(d))
				}
				return printDelegation(m.Stdout, d, time.Now())
			})
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print the delegation as one JSON object, results whole")

	var stopJSON bool
	stop := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a delegation's sub-agents, wherever they run",
		Args:  oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return withService(cmd, func(ctx context.Context, svc *delegation.Service) error {
				d, stopped, err := svc.Cancel(ctx, id)
				if err != nil {
					return notFound(id, err)
				}
				if stopJSON {
					return m.printJSON(struct {
						delegation.View
						Stopping []string `json:"stopping"`
					}{delegation.ViewOf(d), append([]string{}, stopped...)})
				}
				return printStopped(m.Stdout, d, stopped)
			})
		},
	}
	stop.Flags().BoolVar(&stopJSON, "json", false, "print the delegation as one JSON object, with the sub-agents the stop went to")

	cmd.AddCommand(list, show, stop)
	return cmd
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printDelegations prints one line a delegation (id, conversation,
// status, how many done, age, source) and one indented line a child.
func printDelegations(w io.Writer, ds []delegation.Delegation, now time.Time) error {
	if len(ds) == 0 {
		_, err := fmt.Fprintln(w, "no delegations")
		return err
	}
	var b strings.Builder
	for _, d := range ds {
		v := delegation.ViewOf(d)
		fmt.Fprintf(&b, "%s  %s  %s  %d/%d done  %s ago  (%s)\n", v.ID, v.Conv, v.Status, v.Done, v.Total, agoText(now, v.CreatedAt), v.Source)
		for _, c := range v.Children {
			fmt.Fprintf(&b, "  %s  %-11s  %s\n", c.ID, c.Status, oneLine(c.Goal, 72))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printDelegation prints a delegation for a screen: each child's
// status, progress and the start of its result.
func printDelegation(w io.Writer, d delegation.Delegation, now time.Time) error {
	v := delegation.ViewOf(d)
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %d/%d done\n", v.ID, v.Status, v.Done, v.Total)
	fmt.Fprintf(&b, "conversation %s, from %s, started %s (%s ago)\n", v.Conv, v.Source, v.CreatedAt.UTC().Format(time.RFC3339), agoText(now, v.CreatedAt))
	for _, c := range v.Children {
		fmt.Fprintf(&b, "\n[%d] %s  %s\n", c.Index+1, c.ID, c.Status)
		fmt.Fprintf(&b, "    goal: %s\n", oneLine(c.Goal, 200))
		p := c.Progress
		if r := c.Result; r != nil {
			p.APICalls, p.InputTokens, p.OutputTokens = r.APICalls, r.InputTokens, r.OutputTokens
		}
		fmt.Fprintf(&b, "    %d API calls", p.APICalls)
		if n := p.InputTokens + p.OutputTokens; n > 0 {
			fmt.Fprintf(&b, ", %d tokens", n)
		}
		if c.Status == delegation.StatusRunning {
			if c.Owner != "" {
				fmt.Fprintf(&b, ", on %s", c.Owner)
			}
			if p.CurrentTool != "" {
				fmt.Fprintf(&b, ", in %s", p.CurrentTool)
			}
			if !p.LastActivity.IsZero() {
				fmt.Fprintf(&b, ", active %s ago", agoText(now, p.LastActivity))
			}
		}
		b.WriteString("\n")
		r := c.Result
		if r == nil {
			continue
		}
		if r.CostUSD != nil {
			fmt.Fprintf(&b, "    cost $%.4f\n", *r.CostUSD)
		}
		if r.Error != "" {
			fmt.Fprintf(&b, "    error: %s\n", oneLine(r.Error, 200))
		}
		if r.Summary != "" {
			b.WriteString("    result:\n")
			for _, line := range strings.Split(resultScreen(r.Summary), "\n") {
				b.WriteString("      " + line + "\n")
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printStopped says what a stop did.
func printStopped(w io.Writer, d delegation.Delegation, stopped []string) error {
	if len(stopped) == 0 {
		_, err := fmt.Fprintf(w, "%s has ended (%s); nothing to stop\n", d.ID, d.Status())
		return err
	}
	_, err := fmt.Fprintf(w, "sent the stop to %s of %s\n", plural(len(stopped), "sub-agent"), d.ID)
	return err
}

// plural is n of what, counted: "1 sub-agent", "2 sub-agents".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// resultScreen is the start of s that fits a screen, marked when cut.
func resultScreen(s string) string {
	s = strings.TrimSpace(s)
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > showSummaryLines {
		s, cut = strings.Join(lines[:showSummaryLines], "\n"), true
	}
	if r := []rune(s); len(r) > showSummaryChars {
		s, cut = string(r[:showSummaryChars]), true
	}
	if cut {
		s += "\n… (the whole result: --json)"
	}
	return s
}

// agoText is how long ago t was, to the second.
func agoText(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return max(now.Sub(t), 0).Round(time.Second).String()
}
