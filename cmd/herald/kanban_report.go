package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/kanban"
)

// The environment a dispatcher gives a worker (kanban.WorkerEnv and the
// gateway's API address and token).
const (
	envKanbanTask   = "HERALD_KANBAN_TASK"
	envKanbanClaim  = "HERALD_KANBAN_CLAIM"
	envKanbanAPIURL = "HERALD_KANBAN_API_URL"
	envKanbanToken  = "HERALD_KANBAN_TOKEN"
)

// The bodies of the worker routes of the HTTP API:
// POST /api/v1/kanban/cards/{id}/block|heartbeat|comments (complete's
// is a kanban.Result).
type (
	blockBody struct {
		Reason string `json:"reason"`
		Kind   string `json:"kind,omitempty"`
	}
	heartbeatBody struct {
		Note string `json:"note,omitempty"`
	}
	commentBody struct {
		Text string `json:"text"`
	}
)

// report is one report about a card: whose, and where it goes.
type report struct {
	card  string
	token int64 // the worker's claim; 0: a person's report
	actor string
	// api and apiToken, when set, send it to a gateway's HTTP API.
	api, apiToken string
}

// report works out which card a report is about and under which claim:
// the card named, else the worker's (HERALD_KANBAN_TASK), with the
// worker's claim when it is the worker's card.
func (m *Main) report(named string) (report, error) {
	task := strings.TrimSpace(m.Getenv(envKanbanTask))
	r := report{card: strings.TrimSpace(named), actor: cliActor}
	if r.card == "" {
		r.card = task
	}
	if r.card == "" {
		return r, usagef("want a card's id (or run it as a kanban worker, with %s set)", envKanbanTask)
	}
	if r.card == task {
		if c := strings.TrimSpace(m.Getenv(envKanbanClaim)); c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil || n <= 0 {
				return r, fmt.Errorf("%s is %q; want the claim's token, a positive number", envKanbanClaim, c)
			}
			r.token, r.actor = n, workerActor
		}
	}
	r.api, r.apiToken = strings.TrimSpace(m.Getenv(envKanbanAPIURL)), strings.TrimSpace(m.Getenv(envKanbanToken))
	if r.api == "" || r.apiToken == "" {
		r.api, r.apiToken = "", ""
	}
	return r, nil
}

// checkFailedNote says, after a complete or an approval, that k's
// completion check failed and what that did, or "".
func checkFailedNote(k kanban.Card) string {
	switch {
	case k.Status == kanban.StatusBlocked && strings.Contains(k.BlockReason, "completion check failed"):
		return " (its completion check failed, and it gave up: " + k.BlockReason + ")"
	case k.Status == kanban.StatusReady && strings.Contains(k.LastError, "completion check failed"):
		return fmt.Sprintf(" (its completion check failed: a failed run, %d in a row; see its comments)", k.Failures)
	}
	return ""
}

// optionalCard takes a card's id, or none for a worker's own card.
func optionalCard(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef("want at most one card's id (none: the worker's own, %s)", envKanbanTask)
	}
	return nil
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// addKanbanReportCommands adds what a worker (or a person) reports
// with: complete, block, heartbeat and comment.
func (m *Main) addKanbanReportCommands(cmd *cobra.Command, with withBoard) {
	// send runs a report: over HTTP when the worker has the API, else
	// through the service with local.
	send := func(cmd *cobra.Command, r report, route string, body any, local func(context.Context, *board) error) error {
		if r.api != "" {
			ctx, cancel := context.WithTimeout(cmd.Context(), kanbanTimeout)
			defer cancel()
			return m.postKanban(ctx, r, route, body)
		}
		return with(cmd, true, local)
	}

	var res kanban.Result
	complete := &cobra.Command{
		Use:   "complete [ID] --summary S [--result R] [--created ID]… [--artifact PATH]… [--meta K=V]…",
		Short: "Complete a card: done (or in review), its waiting children ready",
		Long: `Complete a card with a summary of what was done: it goes to review when
it asks for one, else (its completion check passing) to done, and its
children whose parents are all done become ready. A worker completes
its own card under its claim (HERALD_KANBAN_TASK, HERALD_KANBAN_CLAIM;
no ID needed); a person's complete of a card in review approves it.
The files and directories named by --artifact are copied out of a
scratch workspace before it is removed, and the card's result names
them where they then are.
Exit 3: the worker's claim was released; it should stop.`,
		Args: optionalCard,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(res.Summary) == "" {
				return usagef("--summary is required: what was done")
			}
			r, err := m.report(firstArg(args))
			if err != nil {
				return err
			}
			for i, a := range res.Artifacts {
				if res.Artifacts[i], err = filepath.Abs(a); err != nil {
					return err
				}
			}
			return send(cmd, r, "complete", res, func(ctx context.Context, b *board) error {
				if r.token == 0 {
					// A person's complete of a card in review approves it.
					k, err := b.card(ctx, r.card)
					if err != nil {
						return err
					}
					if k.Status == kanban.StatusReview {
						if k, err = b.svc.Approve(ctx, k.ID, 0, res.Summary, r.actor); err != nil {
							return m.kanbanError(r.card, err)
						}
						_, err = fmt.Fprintf(m.Stdout, "approved %s: now %s%s\n", k.ID, k.Status, checkFailedNote(k))
						return err
					}
				}
				k, err := b.svc.Complete(ctx, r.card, r.token, res, r.actor)
				if err != nil {
					return m.kanbanError(r.card, err)
				}
				_, err = fmt.Fprintf(m.Stdout, "completed %s: now %s%s\n", k.ID, k.Status, checkFailedNote(k))
				return err
			})
		},
	}
	complete.Flags().StringVar(&res.Summary, "summary", "", "what was done, in a few lines")
	complete.Flags().StringVar(&res.Result, "result", "", "the result itself, when there is one")
	complete.Flags().StringSliceVar(&res.CreatedCards, "created", nil, "a card this work created (repeat, or a comma list)")
	complete.Flags().StringArrayVar(&res.Artifacts, "artifact", nil, "a file or directory the work made (repeat)")
	complete.Flags().StringToStringVar(&res.Metadata, "meta", nil, "a KEY=VALUE fact about the result (repeat)")

	var reason, kind string
	block := &cobra.Command{
		Use:   "block [ID] --reason R [--kind K]",
		Short: "Block a card until someone unblocks it (kind dependency: back to todo)",
		Args:  optionalCard,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("--reason is required: what it waits for")
			}
			r, err := m.report(firstArg(args))
			if err != nil {
				return err
			}
			return send(cmd, r, "block", blockBody{Reason: reason, Kind: kind}, func(ctx context.Context, b *board) error {
				k, err := b.svc.Block(ctx, r.card, r.token, kanban.BlockKind(kind), reason, r.actor)
				if err != nil {
					return m.kanbanError(r.card, err)
				}
				_, err = fmt.Fprintf(m.Stdout, "blocked %s: now %s\n", k.ID, k.Status)
				return err
			})
		},
	}
	block.Flags().StringVar(&reason, "reason", "", "what it waits for")
	block.Flags().StringVar(&kind, "kind", string(kanban.BlockNeedsInput), "dependency, needs_input, capability or transient")

	var note string
	heartbeat := &cobra.Command{
		Use:   "heartbeat [ID] [--note TEXT]",
		Short: "Renew a running card's claim for kanban.claim_ttl_seconds; a note is kept as progress",
		Args:  optionalCard,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := m.report(firstArg(args))
			if err != nil {
				return err
			}
			return send(cmd, r, "heartbeat", heartbeatBody{Note: note}, func(ctx context.Context, b *board) error {
				token := r.token
				if token == 0 {
					// A person's heartbeat renews whichever claim holds it.
					k, err := b.card(ctx, r.card)
					if err != nil {
						return err
					}
					if k.Claim == nil {
						return fmt.Errorf("%s is %s, not running: there is no claim to renew", k.ID, k.Status)
					}
					token = k.Claim.Token
				}
				k, err := b.svc.Heartbeat(ctx, r.card, token, b.cfg.Kanban.ClaimTTL(), note)
				if err != nil {
					return m.kanbanError(r.card, err)
				}
				_, err = fmt.Fprintf(m.Stdout, "%s is held until %s\n", k.ID, timeOrNone(k.Claim.Expires))
				return err
			})
		},
	}
	heartbeat.Flags().StringVar(&note, "note", "", "progress, kept in the card's log")

	comment := &cobra.Command{
		Use:   "comment [ID] TEXT",
		Short: "Add a comment to a card",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("want a card's id and the comment's text (a worker may leave out the id)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id, text := "", args[len(args)-1]
			if len(args) == 2 {
				id = args[0]
			}
			if strings.TrimSpace(text) == "" {
				return usagef("want the comment's text, not an empty argument")
			}
			r, err := m.report(id)
			if err != nil {
				return err
			}
			return send(cmd, r, "comments", commentBody{Text: text}, func(ctx context.Context, b *board) error {
				c, err := b.svc.Comment(ctx, r.card, r.actor, text)
				if err != nil {
					return m.kanbanError(r.card, err)
				}
				_, err = fmt.Fprintf(m.Stdout, "commented on %s (%s)\n", c.Card, c.ID)
				return err
			})
		},
	}

	cmd.AddCommand(complete, block, heartbeat, comment)
}

// postKanban sends a worker's report to the gateway's HTTP API:
// POST {api}/api/v1/kanban/cards/{id}/{route}, with the worker's token.
// A refusal because the claim is gone exits 3, as from the store.
func (m *Main) postKanban(ctx context.Context, r report, route string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	u := strings.TrimRight(r.api, "/") + "/api/v1/kanban/cards/" + url.PathEscape(r.card) + "/" + route
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s is %q: %w", envKanbanAPIURL, r.api, err)
	}
	req.Header.Set("Authorization", "Bearer "+r.apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reporting to the gateway: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		_, err := fmt.Fprintf(m.Stdout, "sent the %s of %s\n", strings.TrimSuffix(route, "s"), r.card)
		return err
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	if strings.Contains(e.Error.Type, "lease_lost") || resp.StatusCode == http.StatusGone {
		return m.leaseLost(r.card)
	}
	msg := e.Error.Message
	if msg == "" {
		msg = resp.Status
	}
	return fmt.Errorf("the gateway refused the %s of %s: %s", strings.TrimSuffix(route, "s"), r.card, msg)
}
