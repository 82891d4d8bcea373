package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/heraldgw/herald/kanban"
)

// waitWords say why a dispatch leaves a ready card waiting.
var waitWords = map[string]string{
	kanban.EventSkippedUnassigned:   "it has no lane, and kanban.default_assignee is not set",
	kanban.EventSkippedNonspawnable: "its lane is not a command lane of kanban.lanes here (the herald lane runs only in a gateway)",
	"capacity_full":                 "kanban.max_spawn workers run already",
	"lane_cap":                      "its lane runs its max_concurrent workers already",
	"lane_paused":                   "its lane is paused: a rate limit, or too many failures in a row",
	"retry_wait":                    "it waits out a rate limit, or a crash's grace, before its next run",
}

func jsonLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// printCards prints one line a card: id, status, priority, lane, title.
func printCards(w io.Writer, board string, cards []kanban.Card) error {
	if len(cards) == 0 {
		_, err := fmt.Fprintf(w, "no cards on board %s\n", board)
		return err
	}
	var b strings.Builder
	for _, k := range cards {
		fmt.Fprintf(&b, "%s  %-9s  p%-3d %-12s  %s\n", k.ID, k.Status, k.Priority, cmp.Or(k.Assignee, "-"), oneLine(k.Title, 80))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printCard prints a card for a screen: its fields, then its comments,
// runs and latest events.
func printCard(w io.Writer, v cardView, now time.Time) error {
	k := v.Card
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %s\n", k.ID, k.Status, k.Title)
	fmt.Fprintf(&b, "board %s, priority %d, lane %s, workspace %s", k.Board, k.Priority, cmp.Or(k.Assignee, "none"), k.Workspace.Kind)
	if k.Workspace.Path != "" {
		fmt.Fprintf(&b, " (%s)", k.Workspace.Path)
	}
	fmt.Fprintf(&b, ", created %s by %s\n", sinceText(now, k.CreatedAt), cmp.Or(k.CreatedBy, "?"))
	fields := []struct{ k, v string }{
		{"parents", strings.Join(k.Parents, ", ")},
		{"children", strings.Join(k.Children, ", ")},
		{"tenant", k.Tenant},
		{"completion check", k.CompletionCheck},
		{"idempotency key", k.IdempotencyKey},
		{"waiting", k.Waiting},
		{"last error", k.LastError},
	}
	if k.Review {
		fields = append(fields, struct{ k, v string }{"review", "a completed run goes to review"})
	}
	if !k.ScheduledAt.IsZero() {
		fields = append(fields, struct{ k, v string }{"scheduled at", timeOrNone(k.ScheduledAt)})
	}
	if k.MaxRuntime.Duration() > 0 {
		fields = append(fields, struct{ k, v string }{"max runtime", k.MaxRuntime.Duration().String()})
	}
	if k.Failures > 0 {
		fields = append(fields, struct{ k, v string }{"failures", fmt.Sprint(k.Failures)})
	}
	if k.Status == kanban.StatusBlocked || k.Status == kanban.StatusTriage {
		fields = append(fields, struct{ k, v string }{"blocked", strings.TrimSpace(string(k.BlockKind) + ": " + k.BlockReason)})
	}
	if c := k.Claim; c != nil {
		claim := fmt.Sprintf("%s, token %d, run %s, lane %s, expires %s", c.Owner, c.Token, c.Run, cmp.Or(c.Lane, "-"), timeOrNone(c.Expires))
		if c.PID > 0 {
			claim += fmt.Sprintf(", pid %d on %s", c.PID, c.Host)
		}
		fields = append(fields, struct{ k, v string }{"claim", claim})
	}
	for _, f := range fields {
		if f.v != "" && f.v != ":" {
			fmt.Fprintf(&b, "%-17s %s\n", f.k+":", f.v)
		}
	}
	if k.Body != "" {
		b.WriteString("\n" + indent(k.Body) + "\n")
	}
	if r := k.Result; r != nil {
		b.WriteString("\nresult:\n" + indent(resultScreen(r.Summary)) + "\n")
		if r.Result != "" {
			b.WriteString(indent(resultScreen(r.Result)) + "\n")
		}
		if len(r.CreatedCards) > 0 {
			b.WriteString("  created " + strings.Join(r.CreatedCards, ", ") + "\n")
		}
	}
	if len(v.Comments) > 0 {
		b.WriteString("\ncomments:\n")
		for _, c := range v.Comments {
			fmt.Fprintf(&b, "  %s %s: %s\n", timeOrNone(c.At), cmp.Or(c.Author, "?"), oneLine(c.Text, 200))
		}
	}
	if len(v.Attachments) > 0 {
		b.WriteString("\nattachments:\n")
		for _, a := range v.Attachments {
			fmt.Fprintf(&b, "  %s  %d bytes  by %s  %s\n", a.Name, a.Size, cmp.Or(a.CreatedBy, "?"), a.Path)
		}
	}
	if len(v.Runs) > 0 {
		b.WriteString("\nruns:\n")
		if err := printKanbanRuns(&b, v.Runs); err != nil {
			return err
		}
	}
	if len(v.Events) > 0 {
		fmt.Fprintf(&b, "\nlatest events:\n")
		if err := printEvents(&b, v.Events, "  "); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

// printEvents prints one line an event: time, kind, move, actor, text.
func printEvents(w io.Writer, evs []kanban.Event, prefix string) error {
	if len(evs) == 0 && prefix == "" {
		_, err := fmt.Fprintln(w, "no events")
		return err
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s%s  %-18s", prefix, timeOrNone(e.At), e.Kind)
		if e.From != "" || e.To != "" {
			fmt.Fprintf(&b, "  %s → %s", cmp.Or(string(e.From), "-"), e.To)
		}
		if e.Actor != "" {
			b.WriteString("  by " + e.Actor)
		}
		if e.Text != "" {
			b.WriteString("  " + oneLine(e.Text, 160))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printKanbanRuns prints one line a run.
func printKanbanRuns(w io.Writer, rs []kanban.Run) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	var b strings.Builder
	for _, r := range rs {
		outcome := cmp.Or(string(r.Outcome), "running")
		if r.Review {
			outcome += " (review)"
		}
		fmt.Fprintf(&b, "  %s  lane %s  by %s  start %s  end %s  %s", r.ID, cmp.Or(r.Lane, "-"), r.Owner, timeOrNone(r.Started), timeOrNone(r.Ended), outcome)
		if r.Error != "" {
			b.WriteString("  error: " + oneLine(r.Error, 160))
		}
		if r.Summary != "" {
			b.WriteString("  " + oneLine(r.Summary, 120))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printStats prints the counts by status, then by lane.
func printStats(w io.Writer, st kanban.BoardStats) error {
	var b strings.Builder
	fmt.Fprintf(&b, "board %s: %s\n", st.Board, plural(st.Total, "card"))
	for _, s := range kanban.Statuses {
		fmt.Fprintf(&b, "  %-10s %d\n", s, st.Statuses[string(s)])
	}
	if len(st.Assignees) > 0 || st.Unassigned > 0 {
		b.WriteString("by lane (not archived):\n")
		for _, lane := range slices.Sorted(maps.Keys(st.Assignees)) {
			fmt.Fprintf(&b, "  %-10s %d\n", lane, st.Assignees[lane])
		}
		if st.Unassigned > 0 {
			fmt.Fprintf(&b, "  %-10s %d\n", "(none)", st.Unassigned)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printDiagnostics prints what is stuck, by kind.
func printDiagnostics(w io.Writer, d kanban.Diagnosis) error {
	if len(d.Stranded)+len(d.Blocked)+len(d.Expired)+len(d.Gone)+len(d.Paused) == 0 {
		_, err := fmt.Fprintf(w, "nothing stuck on board %s\n", d.Board)
		return err
	}
	var b strings.Builder
	if len(d.Stranded) > 0 {
		fmt.Fprintf(&b, "ready for %s or more, unclaimed:\n", kanban.StrandedAfter)
		for _, s := range d.Stranded {
			fmt.Fprintf(&b, "  %s  waiting %s  lane %s  %s  %s\n", s.ID, time.Duration(s.WaitedSeconds)*time.Second, cmp.Or(s.Assignee, "-"), cmp.Or(s.Waiting, "-"), oneLine(s.Title, 60))
		}
	}
	if len(d.Blocked) > 0 {
		b.WriteString("blocked:\n")
		for _, x := range d.Blocked {
			fmt.Fprintf(&b, "  %s  %s: %s  %s\n", x.ID, cmp.Or(x.Kind, "?"), oneLine(x.Reason, 120), oneLine(x.Title, 60))
		}
	}
	if len(d.Expired) > 0 {
		b.WriteString("running with a claim that ran out (a dispatcher reclaims it):\n")
		for _, x := range d.Expired {
			fmt.Fprintf(&b, "  %s  claim of %s (lane %s, run %s) ran out at %s  %s\n", x.ID, x.Owner, cmp.Or(x.Lane, "-"), x.Run, timeOrNone(x.Expires), oneLine(x.Title, 60))
		}
	}
	if len(d.Gone) > 0 {
		b.WriteString("running, but its worker is gone:\n")
		for _, x := range d.Gone {
			fmt.Fprintf(&b, "  %s  claim of %s (lane %s, run %s): %s  %s\n", x.ID, x.Owner, cmp.Or(x.Lane, "-"), x.Run, x.Why, oneLine(x.Title, 60))
		}
	}
	printPaused(&b, d.Paused)
	_, err := io.WriteString(w, b.String())
	return err
}

// printPaused says which lanes are paused, until when and why.
func printPaused(b *strings.Builder, ls []kanban.PausedLane) {
	for _, l := range ls {
		fmt.Fprintf(b, "lane %s is paused until %s: %s\n", l.Lane, timeOrNone(l.Until), cmp.Or(l.Reason, "-"))
	}
}

// printDispatch prints what a dispatch did (or would do).
func printDispatch(ctx context.Context, w io.Writer, bd *board, r dispatchReport) error {
	var b strings.Builder
	claimed := "claimed"
	if r.DryRun {
		claimed = "would claim"
	}
	describe := func(id string) string {
		k, err := bd.store.Card(ctx, id)
		if err != nil {
			return id
		}
		lane := cmp.Or(k.Assignee, kanban.LaneName(bd.cfg.Kanban.DefaultAssignee), "-")
		return fmt.Sprintf("%s (board %s, lane %s): %s", id, k.Board, lane, oneLine(k.Title, 60))
	}
	for _, id := range r.Reclaimed {
		fmt.Fprintf(&b, "reclaimed %s: its worker was gone\n", id)
	}
	for _, id := range r.Promoted {
		fmt.Fprintf(&b, "promoted %s\n", id)
	}
	for _, id := range r.Claimed {
		fmt.Fprintf(&b, "%s %s\n", claimed, describe(id))
	}
	for _, id := range r.Released {
		fmt.Fprintf(&b, "claimed %s, but its worker could not start (see 'herald kanban show %s')\n", id, id)
	}
	for _, id := range slices.Sorted(maps.Keys(r.Waiting)) {
		why := r.Waiting[id]
		fmt.Fprintf(&b, "waits %s: %s (%s)\n", describe(id), cmp.Or(waitWords[why], why), why)
	}
	printPaused(&b, r.Paused)
	if b.Len() == 0 {
		b.WriteString("nothing to dispatch\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
