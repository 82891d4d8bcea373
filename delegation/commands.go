package delegation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/sessions"
)

// CommandOptions are what the delegation commands need.
type CommandOptions struct {
	Store  Store
	Runner *Runner // woken when /background dispatches
	Meta   func(ctx context.Context, conv string) (map[string]string, error)
	// History reads a conversation's history, for /review.
	History func(ctx context.Context, conv string) ([]chat.Message, error)
	// MaxChildren is delegation.max_concurrent_children: /background and
	// /review start nothing while the conversation has that many running.
	MaxChildren int
	// StallQuiet is delegation.stall_quiet_seconds: /agents marks a child
	// quiet for longer as possibly stalled.
	StallQuiet time.Duration
	Clock      clock.Clock
}

// RegisterCommands registers /agents (/tasks) and /background (/bg) in
// cmds, in place of their placeholders.
func RegisterCommands(cmds *sessions.Commands, opts CommandOptions) error {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	c := commands{opts}
	for _, cmd := range []sessions.Command{
		{Name: "agents", Aliases: []string{"tasks"}, Summary: "list this session's background sub-agents", OutOfBand: true, Handle: c.agents},
		{Name: "background", Aliases: []string{"bg"}, Args: "PROMPT", Summary: "run PROMPT as a background sub-agent; its result comes back here", OutOfBand: true, Handle: c.background},
		{Name: "review", Args: "[FOCUS]", Summary: "have a background reviewer look at the work so far; its review comes back here", OutOfBand: true, Handle: c.review},
	} {
		if err := cmds.Register(cmd); err != nil {
			return err
		}
	}
	cmds.AddStatus(c.status)
	cmds.AddStop(c.stopping)
	return nil
}

// stopping is what a /stop of conv stops beside its turn: its
// sub-agents pending or running ("2 background sub-agents (sub_1,
// sub_2)"), every one of which the conversation's stop interrupts.
func (c commands) stopping(ctx context.Context, conv string) string {
	ds, err := c.opts.Store.List(ctx, Query{Conv: conv, Active: true})
	if err != nil {
		return "its background sub-agents, if any (they could not be counted just now)"
	}
	return StoppingText(ds)
}

// StoppingText names the children of ds that are not terminal, for
// /stop: "1 background sub-agent (sub_1)", "" for none.
func StoppingText(ds []Delegation) string {
	var ids []string
	for _, d := range ds {
		for _, ch := range d.Children {
			if !ch.Status.Terminal() {
				ids = append(ids, ch.ID)
			}
		}
	}
	switch len(ids) {
	case 0:
		return ""
	case 1:
		return "1 background sub-agent (" + ids[0] + ")"
	}
	const named = 5
	list := strings.Join(ids[:min(len(ids), named)], ", ")
	if len(ids) > named {
		list += fmt.Sprintf(" and %d more", len(ids)-named)
	}
	return fmt.Sprintf("%d background sub-agents (%s)", len(ids), list)
}

// status is /status's line of background work: the conversation's
// recent sub-agents, how many run, and the tokens they used. A child's
// tokens are added to the conversation's own totals when its end is
// recorded (ParentUsage), so the token totals /status shows hold them.
func (c commands) status(ctx context.Context, conv string) string {
	ds, err := c.opts.Store.List(ctx, Query{Conv: conv, Limit: 50})
	if err != nil || len(ds) == 0 {
		return ""
	}
	return StatusLine(ds)
}

// StatusLine sums ds for /status: "Background: 3 sub-agents (1
// running), 12,345 tokens", a share of the conversation's token totals.
func StatusLine(ds []Delegation) string {
	n, running, tokens := 0, 0, 0
	var cost float64
	priced := false
	for _, d := range ds {
		for _, ch := range d.Children {
			n++
			p := ch.Progress
			if !ch.Status.Terminal() {
				running++
			}
			if ch.Result != nil {
				p.InputTokens, p.OutputTokens = ch.Result.InputTokens, ch.Result.OutputTokens
				if ch.Result.CostUSD != nil {
					cost += *ch.Result.CostUSD
					priced = true
				}
			}
			if d.Orchestrator == "" {
				// A worker's tokens are its orchestrator's already.
				tokens += p.InputTokens + p.OutputTokens
			}
		}
	}
	line := fmt.Sprintf("Background: %d sub-agents (%d running), %s tokens", n, running, thousands(tokens))
	if priced {
		line += fmt.Sprintf(", $%.4f", cost)
	}
	return line + "; an ended sub-agent's are in the token totals. /agents lists them."
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

type commands struct{ opts CommandOptions }

// agents answers /agents: the conversation's recent delegations as a
// tree, each child with its status and what it is doing.
func (c commands) agents(ctx context.Context, call *sessions.CommandCall) error {
	ds, err := c.opts.Store.List(ctx, Query{Conv: call.In.Conv, Limit: 10})
	if err != nil {
		return call.Reply(ctx, "I could not read the background sub-agents just now; try again in a moment.")
	}
	if len(ds) == 0 {
		return call.Reply(ctx, "No background sub-agents in this conversation yet.")
	}
	return call.Reply(ctx, AgentsText(ds, c.opts.Clock.Now(), c.opts.StallQuiet))
}

// AgentsText is the /agents answer for ds, newest first, as of now.
func AgentsText(ds []Delegation, now time.Time, stallQuiet time.Duration) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n")
		}
		done := 0
		for _, ch := range d.Children {
			if ch.Status.Terminal() {
				done++
			}
		}
		source := d.Source
		if d.Orchestrator != "" {
			source = "workers of " + d.Orchestrator
		}
		fmt.Fprintf(&b, "%s (%s, %s ago): %d of %d done\n", d.ID, source, ago(now, d.CreatedAt), done, len(d.Children))
		for _, ch := range d.Children {
			fmt.Fprintf(&b, "  └ %s %s — %s", ch.ID, ch.Status, excerpt(ch.Goal, 80))
			p := ch.Progress
			if ch.Result != nil {
				p.APICalls, p.InputTokens, p.OutputTokens = ch.Result.APICalls, ch.Result.InputTokens, ch.Result.OutputTokens
			}
			fmt.Fprintf(&b, "\n     %d API calls", p.APICalls)
			if p.InputTokens+p.OutputTokens > 0 {
				fmt.Fprintf(&b, ", %d tokens", p.InputTokens+p.OutputTokens)
			}
			if ch.Result != nil && ch.Result.CostUSD != nil {
				fmt.Fprintf(&b, ", $%.4f", *ch.Result.CostUSD)
			}
			if ch.Status == StatusRunning {
				tool := "between turns"
				if p.CurrentTool != "" {
					tool = "in " + p.CurrentTool
				}
				fmt.Fprintf(&b, ", %s", tool)
				if !p.LastActivity.IsZero() {
					quiet := now.Sub(p.LastActivity)
					fmt.Fprintf(&b, ", active %s ago", quiet.Round(time.Second))
					if stallQuiet > 0 && quiet > stallQuiet {
						b.WriteString(" — quiet for long: may be stalled")
					}
				}
			}
			if ch.Result != nil && ch.Result.Error != "" {
				b.WriteString("\n     " + excerpt(ch.Result.Error, 200))
			}
			if ch.Status == StatusRunning {
				for _, w := range p.Workers {
					fmt.Fprintf(&b, "\n     └ worker %s %s — %s, %d API calls", w.ID, w.Status, excerpt(w.Goal, 60), w.APICalls)
					if w.Status == StatusRunning && w.CurrentTool != "" {
						b.WriteString(", in " + w.CurrentTool)
					}
				}
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "a while"
	}
	return now.Sub(t).Round(time.Second).String()
}

// background answers /background PROMPT: one child with the prompt as
// its goal, dispatched at once (outside a turn). The delegation's id
// comes from the message, so a redelivered command starts nothing more.
func (c commands) background(ctx context.Context, call *sessions.CommandCall) error {
	prompt := strings.TrimSpace(call.Args)
	if prompt == "" {
		return call.Reply(ctx, "Usage: /background PROMPT — runs PROMPT as a background sub-agent; its result comes back here.")
	}
	d, err := c.dispatch(ctx, call, "background", []Task{{Goal: prompt, Role: RoleLeaf}})
	if full, ok := FullOf(err); ok {
		return call.Reply(ctx, fmt.Sprintf("This conversation already has %d sub-agents running and may have %d (delegation.max_concurrent_children); wait for their results, then try again.", full.Running, full.Limit))
	}
	if errs.Is(err, errs.Conflict) {
		return nil // a redelivery: answered the first time
	}
	if err != nil {
		return call.Reply(ctx, "I could not start the background task just now; try again in a moment.")
	}
	return call.Reply(ctx, fmt.Sprintf("Started in the background as %s (%s); its result comes back here. /agents shows its progress.", d.Children[0].ID, d.ID))
}

// Review bounds: how many of the newest messages a reviewer reads, and
// how much of each.
const (
	reviewMessages = 10
	reviewChars    = 12_000
)

// review answers /review [FOCUS]: a background reviewer (the review
// role, on auxiliary.review's model when set) reads the conversation's
// last messages and the focus; its review returns as a completion.
func (c commands) review(ctx context.Context, call *sessions.CommandCall) error {
	if c.opts.History == nil {
		return call.Reply(ctx, "/review is not available here.")
	}
	history, err := c.opts.History(ctx, call.In.Conv)
	if err != nil {
		return call.Reply(ctx, "I could not read this conversation just now; try /review again in a moment.")
	}
	excerpt := ReviewContext(history)
	if excerpt == "" {
		return call.Reply(ctx, "There is nothing to review yet: this conversation has no messages.")
	}
	goal := "Review the work done in the conversation below: what is right, what is wrong or risky, what is missing, and what to do next."
	if focus := strings.TrimSpace(call.Args); focus != "" {
		goal += " Focus on: " + focus
	}
	d, err := c.dispatch(ctx, call, "review", []Task{{Goal: goal, Context: excerpt, Role: RoleReviewer}})
	if full, ok := FullOf(err); ok {
		return call.Reply(ctx, fmt.Sprintf("This conversation already has %d sub-agents running and may have %d (delegation.max_concurrent_children); wait for their results, then try /review again.", full.Running, full.Limit))
	}
	if errs.Is(err, errs.Conflict) {
		return nil // a redelivery: answered the first time
	}
	if err != nil {
		return call.Reply(ctx, "I could not start the review just now; try again in a moment.")
	}
	return call.Reply(ctx, fmt.Sprintf("Review started in the background (%s); it comes back here when done.", d.Children[0].ID))
}

// ReviewContext is what a reviewer reads: the newest user and assistant
// messages with text, oldest first, each cut to its bound.
func ReviewContext(history []chat.Message) string {
	var picked []chat.Message
	for i := len(history) - 1; i >= 0 && len(picked) < reviewMessages; i-- {
		m := history[i]
		if (m.Role == "user" || m.Role == "assistant") && strings.TrimSpace(m.Content) != "" {
			picked = append(picked, m)
		}
	}
	var b strings.Builder
	for i := len(picked) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--- %s:\n%s\n", picked[i].Role, excerpt(picked[i].Content, reviewChars))
	}
	return b.String()
}

// dispatch creates a delegation of tasks for the command's conversation
// when they fit under delegation.max_concurrent_children beside its
// pending and running ones (else a Full refusal, FullOf).
func (c commands) dispatch(ctx context.Context, call *sessions.CommandCall, source string, tasks []Task) (Delegation, error) {
	d := Delegation{
		ID: commandID(call.In), Conv: call.In.Conv, User: call.In.UserKey(call.Target.Platform),
		Origin: call.Target, Source: source, CreatedAt: c.opts.Clock.Now(),
		Trace: tracing.Inject(ctx, nil),
	}
	if c.opts.Meta != nil {
		if meta, err := c.opts.Meta(ctx, call.In.Conv); err == nil {
			d.Session = meta[sessions.ConvMetaSession]
		}
	}
	for i, t := range tasks {
		d.Children = append(d.Children, Child{ID: NewID("sub_"), Delegation: d.ID, Index: i, Status: StatusPending, Task: t})
	}
	if err := c.opts.Store.Create(ctx, Dispatch{Delegation: d, Limit: c.opts.MaxChildren}); err != nil {
		return d, err
	}
	if c.opts.Runner != nil {
		c.opts.Runner.Dispatched(d)
		c.opts.Runner.Wake()
	}
	return d, nil
}

// commandID is the delegation id of a command's message: the same for a
// redelivery of it, a fresh one for a message without an id.
func commandID(in sessions.Inbound) string {
	if in.MessageID == "" {
		return NewID("deleg_")
	}
	sum := sha256.Sum256([]byte(in.Conv + "\x00" + in.MessageID))
	return "deleg_" + hex.EncodeToString(sum[:8])
}
