package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// showEvents is how many of a card's latest events show prints.
const showEvents = 20

// cardView is what show --json prints: the card with its comments,
// attachments (with their paths), latest events and runs.
type cardView struct {
	kanban.Card
	Comments    []kanban.Comment    `json:"comments"`
	Attachments []kanban.Attachment `json:"attachments"`
	Events      []kanban.Event      `json:"events"`
	Runs        []kanban.Run        `json:"runs"`
}

// addKanbanBoardCommands adds init, boards, create, list and show.
func (m *Main) addKanbanBoardCommands(cmd *cobra.Command, with withBoard) {
	var name string
	initCmd := &cobra.Command{
		Use:   "init [--board SLUG] [--name NAME]",
		Short: "Make the board (or rename it); the default board exists from the start",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				bd, err := b.store.Board(ctx, b.slug)
				made := errs.Is(err, errs.NotFound)
				switch {
				case made:
					now, err := b.store.Now(ctx)
					if err != nil {
						return err
					}
					bd = kanban.Board{Slug: b.slug, CreatedAt: now}
				case err != nil:
					return err
				case name == "" || name == bd.Name:
					_, err := fmt.Fprintf(m.Stdout, "board %s exists\n", b.slug)
					return err
				}
				if name != "" {
					bd.Name = strings.TrimSpace(name)
				}
				if err := b.store.PutBoard(ctx, bd); err != nil {
					return m.kanbanError("", err)
				}
				verb := "renamed"
				if made {
					verb = "made"
				}
				_, err = fmt.Fprintf(m.Stdout, "%s board %s\n", verb, b.slug)
				return err
			})
		},
	}
	initCmd.Flags().StringVar(&name, "name", "", "the board's name, as people read it")

	var boardsJSON bool
	boards := &cobra.Command{
		Use:   "boards",
		Short: "List the boards",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				bs, err := b.store.Boards(ctx)
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(bs, func(x kanban.Board) bool { return x.Slug == kanban.DefaultBoard }) {
					bs = append([]kanban.Board{{Slug: kanban.DefaultBoard}}, bs...)
				}
				if boardsJSON {
					return m.printJSON(bs)
				}
				for _, x := range bs {
					line := x.Slug
					if x.Name != "" {
						line += "  " + x.Name
					}
					if _, err := fmt.Fprintln(m.Stdout, line); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addJSONFlag(boards, &boardsJSON)

	var (
		spec                       kanban.CreateSpec
		status, workspace, dir, at string
		attachFiles                []string
		createJSON                 bool
	)
	create := &cobra.Command{
		Use:   "create TITLE",
		Short: "Create a card: ready when its parents are done (or it has none), else todo",
		Args:  cardArgs("the card's title, one argument (quote it)", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec.Title = args[0]
			spec.Status = kanban.Status(strings.ToLower(strings.TrimSpace(status)))
			if at != "" {
				t, err := parseAt("--at", at)
				if err != nil {
					return err
				}
				spec.ScheduledAt = t
				if spec.Status == "" {
					spec.Status = kanban.StatusScheduled
				}
			}
			spec.Workspace = kanban.Workspace{Kind: kanban.WorkspaceKind(strings.TrimSpace(workspace))}
			if dir != "" {
				switch spec.Workspace.Kind {
				case "":
					spec.Workspace.Kind = kanban.WorkspaceDir
				case kanban.WorkspaceDir:
				default:
					return usagef("--dir is the directory of a --workspace dir, not %s", spec.Workspace.Kind)
				}
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				spec.Workspace.Path = abs
			}
			spec.CreatedBy = cliActor
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				spec.Board = b.slug
				k, created, err := createAttached(ctx, b, spec, attachFiles)
				if err != nil {
					return m.kanbanError(k.ID, err)
				}
				if createJSON {
					return m.printJSON(k)
				}
				if !created {
					_, err = fmt.Fprintf(m.Stdout, "%s exists with idempotency key %s (%s): %s\n", k.ID, k.IdempotencyKey, k.Status, k.Title)
					return err
				}
				_, err = fmt.Fprintf(m.Stdout, "created %s (%s): %s\n", k.ID, k.Status, k.Title)
				return err
			})
		},
	}
	f := create.Flags()
	f.StringVar(&spec.Body, "body", "", "what the card is about: its worker reads it")
	f.StringVar(&spec.Assignee, "assignee", "", "the lane that works it (default kanban.default_assignee)")
	f.StringSliceVar(&spec.Parents, "parent", nil, "a card it waits for (repeat, or a comma list)")
	f.IntVar(&spec.Priority, "priority", 0, "higher is claimed first")
	f.StringVar(&status, "status", "", "start as triage, todo, blocked or scheduled instead")
	f.StringVar(&at, "at", "", "an RFC3339 time it becomes ready at (status scheduled)")
	f.BoolVar(&spec.Review, "review", false, "a completed run goes to review, not done")
	f.StringVar(&spec.CompletionCheck, "completion-check", "", "a bash command that must exit 0 for the card to be done")
	f.StringVar(&workspace, "workspace", "", "where its worker works: scratch (default), worktree or dir")
	f.StringVar(&dir, "dir", "", "the directory of a dir workspace")
	f.DurationVar(&spec.MaxRuntime, "max-runtime", 0, "stop a run after this long (0: no limit)")
	f.IntVar(&spec.MaxRetries, "max-retries", 0, "failed runs in a row that block it (0: kanban.failure_limit)")
	f.StringVar(&spec.IdempotencyKey, "idempotency-key", "", "create it once: a second create with this key prints the first card")
	f.StringVar(&spec.Tenant, "tenant", "", "the tenant it belongs to")
	f.StringArrayVar(&attachFiles, "attach", nil, "a file its workers are handed (repeat; see 'herald kanban attach')")
	addJSONFlag(create, &createJSON)

	var (
		q        kanban.Query
		statuses []string
		listJSON bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List the board's cards, in the order they are claimed",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sts, err := parseStatuses(statuses)
			if err != nil {
				return err
			}
			q.Statuses, q.Assignee = sts, kanban.LaneName(q.Assignee)
			return with(cmd, true, func(ctx context.Context, b *board) error {
				if err := b.exists(ctx); err != nil {
					return err
				}
				q.Board = b.slug
				cards, err := b.store.Cards(ctx, q)
				if err != nil {
					return err
				}
				kanban.SortCards(cards)
				if listJSON {
					return m.printJSON(nonNil(cards))
				}
				return printCards(m.Stdout, b.slug, cards)
			})
		},
	}
	list.Flags().StringSliceVar(&statuses, "status", nil, "only cards of this status (repeat, or a comma list)")
	list.Flags().StringVar(&q.Assignee, "assignee", "", "only this lane's cards")
	list.Flags().StringVar(&q.Tenant, "tenant", "", "only this tenant's cards")
	list.Flags().BoolVar(&q.Archived, "archived", false, "archived cards too")
	addJSONFlag(list, &listJSON)

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a card with its comments, latest events and runs",
		Args:  cardArgs("one card's id", 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, true, func(ctx context.Context, b *board) error {
				k, err := b.card(ctx, args[0])
				if err != nil {
					return err
				}
				v := cardView{Card: k}
				if v.Comments, err = b.store.Comments(ctx, k.ID); err != nil {
					return err
				}
				if v.Attachments, err = b.svc.Attachments(ctx, k.ID); err != nil {
					return err
				}
				if v.Runs, err = b.store.Runs(ctx, k.ID); err != nil {
					return err
				}
				evs, err := kanban.CardEvents(ctx, b.store, k, "")
				if err != nil {
					return err
				}
				v.Events = evs[max(len(evs)-showEvents, 0):]
				v.Comments, v.Attachments, v.Events, v.Runs = nonNil(v.Comments), nonNil(v.Attachments), nonNil(v.Events), nonNil(v.Runs)
				if showJSON {
					return m.printJSON(v)
				}
				now, err := b.store.Now(ctx)
				if err != nil {
					return err
				}
				return printCard(m.Stdout, v, now)
			})
		},
	}
	addJSONFlag(show, &showJSON)

	cmd.AddCommand(initCmd, boards, create, list, show)
}

// createAttached creates the card spec names with the files attached.
// A card that would be ready (or todo, which a dispatcher promotes)
// waits in triage until its files are there, so no worker starts
// without them. A file that cannot be attached leaves the card made,
// in triage, and the error says so. Once they are, the card goes on
// as a new card does: promoted, with no unblocked event to announce.
func createAttached(ctx context.Context, b *board, spec kanban.CreateSpec, files []string) (kanban.Card, bool, error) {
	held := len(files) > 0 && (spec.Status == "" || spec.Status == kanban.StatusTodo)
	if held {
		spec.Status = kanban.StatusTriage
	}
	k, created, err := b.svc.Create(ctx, spec)
	if err != nil || !created || len(files) == 0 {
		return k, created, err
	}
	for _, path := range files {
		if _, err := attachFile(ctx, b, k.ID, path, ""); err != nil {
			return k, true, fmt.Errorf("created %s, in triage, but attaching %s failed (%s); attach it with 'herald kanban attach %s FILE', then 'herald kanban unblock %s'",
				k.ID, path, errs.Reason(err), k.ID, k.ID)
		}
	}
	if held {
		k, err = b.svc.Admit(ctx, k.ID, cliActor)
	}
	return k, true, err
}

// sinceText is how long before now t was, or "never".
func sinceText(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return agoText(now, t) + " ago"
}
