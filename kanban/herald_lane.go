package kanban

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/delegation"
)

// HeraldLane is the lane of herald's own worker agent.
const HeraldLane = "herald"

// quotaPause is how long the herald lane waits when the model provider
// says its quota is spent.
const quotaPause = 30 * time.Minute

// nudgeText is what a worker agent that ended its reply without
// reporting on its card is told, once.
const nudgeText = "You ended your reply without calling kanban_complete or kanban_block, so card %s is still open and yours. Call kanban_complete now with a summary of what you did, or kanban_block with what is missing. A reply without one of them fails the run."

// RunCardAgent works a card with herald's child agent: its title is the
// goal, its body and comments the context. The agent reports with its
// worker tools (kanban_complete, kanban_block, kanban_request_review);
// one whose final reply leaves the card open is told so once, and when
// it still does not report, the run ends as a protocol violation
// (NoReportError), as a command lane's silent exit 0 does. A
// review run gives its verdict in its reply's last line. Any other end
// is the run's error.
func RunCardAgent(ctx context.Context, svc *Service, spawner *delegation.Spawner, spec WorkerSpec) error {
	k := spec.Card
	var b strings.Builder
	fmt.Fprintf(&b, "This is card %s of kanban board %s.", k.ID, spec.Board)
	if spec.Review {
		b.WriteString(" Review the work done on it (its result and comments below). End your reply with a line of its own: APPROVED when it is right, or CHANGES REQUESTED followed by what to change.")
	}
	if k.Body != "" {
		b.WriteString("\n\n" + k.Body)
	}
	if k.Result != nil && k.Result.Summary != "" {
		b.WriteString("\n\nWhat its worker reported:\n" + k.Result.Summary)
	}
	if comments, err := svc.Store.Comments(ctx, k.ID); err == nil {
		for _, c := range comments {
			fmt.Fprintf(&b, "\n\nComment by %s: %s", c.Author, c.Text)
		}
	}
	if spec.Workspace != "" {
		b.WriteString("\n\nIts workspace directory is " + spec.Workspace + ".")
	}
	if len(spec.Attachments) > 0 {
		b.WriteString("\n\nFiles attached to it:")
		for _, p := range spec.Attachments {
			b.WriteString("\n- " + p)
		}
	}
	child := delegation.Child{ID: "kb_" + spec.Run, Task: delegation.Task{Goal: k.Title, Context: b.String()}}
	if spec.Review {
		child.Role = delegation.RoleReviewer
	}
	ctx = WithWorker(ctx, WorkerCard{Card: k.ID, Board: spec.Board, Token: spec.Token})
	// holds reports whether the claim is still open: the agent has not
	// reported with its tools (complete, block, review).
	holds := func(ctx context.Context) bool {
		now, err := svc.Store.Card(ctx, k.ID)
		return err != nil || (now.Claim != nil && now.Claim.Token == spec.Token)
	}
	if !spec.Review {
		spawner = spawner.WithNudge(func(ctx context.Context) string {
			if !holds(ctx) {
				return ""
			}
			return fmt.Sprintf(nudgeText, k.ID)
		})
	}
	res := spawner.Run(ctx, child, 1, nil)
	if !holds(ctx) {
		return nil
	}
	switch res.ExitReason {
	case "rate_limited":
		return &RateLimitedError{After: time.Duration(res.RetryAfterSeconds) * time.Second, Reason: res.Error}
	case "quota_exhausted":
		// No reset is reported: the lane waits as long as its breaker
		// would make it.
		return &RateLimitedError{After: quotaPause, Reason: res.Error}
	}
	if res.Status != delegation.StatusCompleted {
		return fmt.Errorf("the worker agent ended %s: %s", res.Status, strings.TrimSpace(res.Error+" "+res.ExitReason))
	}
	if !spec.Review {
		did := "the worker agent ended without calling kanban_complete or kanban_block, also after it was reminded"
		if res.ExitReason == "max_iterations" {
			did = "the worker agent used up its iterations without calling kanban_complete or kanban_block"
		}
		return &NoReportError{Detail: did, LastReply: res.Summary}
	}
	if !approved(res.Summary) {
		_, err := svc.RequestChanges(ctx, k.ID, spec.Token, res.Summary, "herald")
		return err
	}
	_, err := svc.Complete(ctx, k.ID, spec.Token, Result{Summary: res.Summary}, "herald")
	return err
}

// approved reports whether a review's last line approves.
func approved(review string) bool {
	lines := strings.Split(strings.TrimSpace(review), "\n")
	last := strings.ToUpper(strings.TrimSpace(lines[len(lines)-1]))
	return strings.HasPrefix(strings.Trim(last, "*_ #"), "APPROVED")
}
