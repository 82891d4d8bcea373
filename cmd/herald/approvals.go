package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
)

// approvalsTimeout bounds one approvals command's store calls.
const approvalsTimeout = 30 * time.Second

func (m *Main) approvalsCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:     "approvals",
		Aliases: []string{"approval"},
		Short:   "List the approvals waiting for a person and the decisions; show and revoke the always-allowed patterns",
		Long: `A dangerous action (a terminal command on the dangerous list, a tool
approvals.tools names) asks the conversation's person before it runs.
'list' shows the questions waiting for an answer, oldest first, and with
--decided the recent answers, newest first: who decided what, when.
'allowlist' shows the patterns an "Always allow" left, which run without
asking on every gateway, and 'revoke PATTERN' takes one off: the next
such action asks again.

The store is the one the config names (see 'herald config check'); a
running gateway may share it.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	withStore := func(cmd *cobra.Command, f func(context.Context, approvals.Store) error) error {
		return m.withStore(cmd, path, approvalsTimeout, func(ctx context.Context, _ config.Config, db gateway.Store) error {
			return f(ctx, db.Approvals())
		})
	}

	var (
		listJSON, decided bool
		conv              string
		limit             int
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the approvals waiting for an answer, or with --decided the recent decisions",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--limit is %d; want 0 (all) or more", limit)
			}
			return withStore(cmd, func(ctx context.Context, s approvals.Store) error {
				var (
					as  []approvals.Approval
					err error
				)
				if decided {
					as, err = s.Decided(ctx, conv, limit)
				} else {
					as, err = s.PendingApprovals(ctx, conv)
				}
				if err != nil {
					return err
				}
				if listJSON { // an array, [] for none
					return m.printJSON(append([]approvals.Approval{}, as...))
				}
				return m.printApprovals(as, decided)
			})
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print a JSON array of the approvals")
	list.Flags().BoolVar(&decided, "decided", false, "list the decided approvals, newest first, instead of the pending")
	list.Flags().StringVar(&conv, "conv", "", "only this conversation's (e.g. telegram:123)")
	list.Flags().IntVar(&limit, "limit", 50, "with --decided, list at most this many; 0 lists all")

	var allowJSON bool
	allowlist := &cobra.Command{
		Use:   "allowlist",
		Short: "List the always-allowed patterns: who allowed each, when, from which approval",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, s approvals.Store) error {
				gs, err := s.Grants(ctx, "", "")
				if err != nil {
					return err
				}
				if allowJSON { // an array, [] for none
					return m.printJSON(append([]approvals.Grant{}, gs...))
				}
				return m.printGrants(gs)
			})
		},
	}
	allowlist.Flags().BoolVar(&allowJSON, "json", false, "print a JSON array of the grants")

	var revokeJSON bool
	revoke := &cobra.Command{
		Use:   "revoke PATTERN",
		Short: "Take an always-allowed pattern off the allowlist: its actions ask again",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				return usagef("want one pattern of the allowlist, quoted if it has spaces (see 'herald approvals allowlist')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pattern := args[0]
			return withStore(cmd, func(ctx context.Context, s approvals.Store) error {
				gone, err := s.Revoke(ctx, pattern)
				if err != nil {
					return err
				}
				if !gone {
					return fmt.Errorf("%s is not on the allowlist (see 'herald approvals allowlist')", pattern)
				}
				if revokeJSON {
					return m.printJSON(map[string]any{"pattern": pattern, "revoked": true})
				}
				_, err = fmt.Fprintf(m.Stdout, "%s is off the allowlist: it asks again\n", pattern)
				return err
			})
		},
	}
	revoke.Flags().BoolVar(&revokeJSON, "json", false, `print {"pattern": ..., "revoked": true}`)

	cmd.AddCommand(list, allowlist, revoke)
	return cmd
}

// printApprovals prints one line an approval: pending, its id,
// conversation, tool, action, when it was asked and its deadline;
// decided, who decided what and when instead of the deadline.
func (m *Main) printApprovals(as []approvals.Approval, decided bool) error {
	if len(as) == 0 {
		none := "no approvals waiting for an answer"
		if decided {
			none = "no decided approvals"
		}
		_, err := fmt.Fprintln(m.Stdout, none)
		return err
	}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	if decided {
		fmt.Fprintln(w, "ID\tCONVERSATION\tTOOL\tACTION\tDECISION\tBY\tDECIDED")
	} else {
		fmt.Fprintln(w, "ID\tCONVERSATION\tTOOL\tACTION\tASKED\tDEADLINE")
	}
	for _, a := range as {
		if decided {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Conv, a.Tool, oneLine(a.Action, 48),
				a.Decision, oneLine(a.DecidedBy, 24), when(a.DecidedAt))
		} else {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Conv, a.Tool, oneLine(a.Action, 48),
				when(a.CreatedAt), when(a.Deadline))
		}
	}
	return w.Flush()
}

// printGrants prints one line an always grant: its pattern, who granted
// it, when, and the approval it came from.
func (m *Main) printGrants(gs []approvals.Grant) error {
	if len(gs) == 0 {
		_, err := fmt.Fprintln(m.Stdout, "no always-allowed patterns")
		return err
	}
	w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PATTERN\tGRANTED BY\tAT\tAPPROVAL")
	for _, g := range gs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", oneLine(g.Pattern, 60), oneLine(g.GrantedBy, 24), when(g.At), oneLine(g.Approval, 40))
	}
	return w.Flush()
}

// when is a time as the listings print it: RFC 3339 in UTC, "-" for
// none.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
