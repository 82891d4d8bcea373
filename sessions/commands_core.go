package sessions

import (
	"context"

	"github.com/heraldgw/herald/signals"
)

// stopReasonNew, in a stop signal's Text, says the stop comes from /new:
// the fresh session's own notice follows, so the stopped turn sends none.
const stopReasonNew = "new"

// DefaultCommands returns a registry with herald's core commands and a
// placeholder for each command a later part of herald brings; registering
// that part's command replaces its placeholder.
func DefaultCommands() *Commands {
	c := NewCommands()
	for _, cmd := range coreCommands() {
		if err := c.Register(cmd); err != nil {
			panic(err) // the built-in table is wrong: a bug, found by every test
		}
	}
	return c
}

func coreCommands() []Command {
	cmds := []Command{
		{Name: "help", Summary: "list the commands", OutOfBand: true, Handle: cmdHelp},
		{Name: "new", Summary: "start a fresh session (what I remember about you is kept)", OutOfBand: true, Handle: cmdNew, Run: runNew},
		{Name: "stop", Summary: "stop the running turn", OutOfBand: true, Handle: cmdStop},
		{Name: "status", Summary: "say whether a turn is running and how new messages are handled", OutOfBand: true, Handle: cmdStatus},
		{Name: "queue", Args: "MESSAGE", Summary: "send MESSAGE after the running turn ends", OutOfBand: true, Handle: cmdMode(BusyQueue)},
		{Name: "steer", Args: "MESSAGE", Summary: "add MESSAGE to the running turn", OutOfBand: true, Handle: cmdMode(BusySteer)},
	}
	later := []struct{ name, args, summary string }{
		{"agents", "", "list this session's background sub-agents"},
		{"review", "[FOCUS]", "review the work done so far"},
		{"background", "PROMPT", "run PROMPT in the background"},
		{"cron", "…", "manage scheduled jobs"},
		{"goal", "…", "keep working toward a goal"},
		{"loop", "…", "repeat a prompt on a schedule"},
		{"heartbeat", "…", "check in periodically"},
		{"kanban", "…", "work with the kanban board"},
	}
	aliases := map[string][]string{"agents": {"tasks"}, "background": {"bg"}}
	for _, l := range later {
		cmds = append(cmds, Command{
			Name: l.name, Aliases: aliases[l.name], Args: l.args, Summary: l.summary + " (not available yet)",
			OutOfBand: true, Handle: cmdNotYet,
		})
	}
	return cmds
}

func cmdNotYet(ctx context.Context, c *CommandCall) error {
	return c.Reply(ctx, answerNotYet(c.Name))
}

func cmdHelp(ctx context.Context, c *CommandCall) error {
	return c.Reply(ctx, answerHelp(c.Router.commands.List()))
}

func cmdStop(ctx context.Context, c *CommandCall) error {
	r := c.Router
	rt, running := r.runningTurn(ctx, c.In.Conv)
	// The answer goes first so that it comes before the stopped turn's
	// own "Stopped.". It names what the stop reaches: the turn, and
	// what other parts run for the conversation (its sub-agents).
	answer := answerStop(running, rt.describe(r.clock.Now()), r.commands.stopParts(ctx, c.In.Conv))
	if err := c.Reply(ctx, answer); err != nil || c.Redelivered() {
		// A redelivered /stop was answered, and its stop sent, the first
		// time: sent again, it would stop a turn that started since.
		return err
	}
	// The signal goes out even when no turn is known to run: a turn that
	// started an instant ago in another process is not known yet, and a
	// stop reaches only turns that started before it.
	return r.signal(ctx, signals.Signal{Conv: c.In.Conv, Kind: signals.Stop})
}

func cmdStatus(ctx context.Context, c *CommandCall) error {
	r := c.Router
	meta := r.meta(ctx, c.In.Conv)
	rt, running := r.runningTurnIn(c.In.Conv, meta)
	return c.Reply(ctx, answerStatus(running, rt.describe(r.clock.Now()), r.busyMode(meta), r.commands.statusLines(ctx, c.In.Conv)))
}

func cmdNew(ctx context.Context, c *CommandCall) error {
	r := c.Router
	// The reset is queued first, so that a redelivered /new, queued the
	// first time, sends no stop that would hit a turn started since. The
	// stop cannot hit the reset's own turn: a control turn takes no
	// signals. High priority: the reset runs before messages already
	// waiting, as "forget everything" means; they run in the fresh
	// session.
	if err := c.Queue(ctx, PriorityHigh); err != nil || c.Redelivered() {
		return err
	}
	// The reset is durable: a stop that does not go out only means the
	// running turn ends before the reset runs.
	if err := r.signal(ctx, signals.Signal{Conv: c.In.Conv, Kind: signals.Stop, Text: stopReasonNew}); err != nil {
		r.log.WarnContext(ctx, "the stop for /new failed; the reset waits for the running turn",
			"conv", c.In.Conv, "err", err)
	}
	return nil
}

func runNew(ctx context.Context, t *ControlTurn) error {
	// The clear is written with the entry's ack, under the lease: a reset
	// whose lease was taken over clears nothing, and runs again whole.
	t.ClearHistory()
	// The new session is named by the entry that started it, so a run
	// again after a crash names it alike.
	t.SetMeta(ConvMetaSession, "s"+t.Entry.ID)
	t.Reply(answerNewSession)
	return nil
}

// cmdMode is /queue and /steer: the message after the command, routed as
// if the conversation's busy-input mode were mode.
func cmdMode(mode BusyInputMode) func(ctx context.Context, c *CommandCall) error {
	return func(ctx context.Context, c *CommandCall) error {
		if c.Args == "" {
			return c.Reply(ctx, answerUsage(c.Name))
		}
		in := c.In
		in.Text = c.Args
		return c.route(ctx, in, mode)
	}
}
