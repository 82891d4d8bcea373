package controllers

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

const (
	goalUsage      = "Usage: /goal <objective> [--max-turns N] [--contract TEXT] · /goal status|pause|resume|clear · /subgoal <step>"
	loopUsage      = "Usage: /loop <interval>|auto <prompt> [--until CONDITION] [--times N] · /loop list · /loop stop [id]"
	heartbeatUsage = "Usage: /heartbeat <interval> [prompt] · /heartbeat off|status"
)

// Set is the controllers as the commands reach them.
type Set struct {
	Goals      *Goals
	Loops      *Loops
	Heartbeats *Heartbeats
	// Changed is told of a change to conv's controllers, which may have
	// made one due (the scheduler looks at once); nil: nobody.
	Changed func(conv string)
}

func (s Set) changed(conv, reply string, err error) (string, error) {
	if err == nil && s.Changed != nil {
		s.Changed(conv)
	}
	return reply, err
}

// RegisterCommands registers /goal, /subgoal, /loop and /heartbeat in
// cmds, and their lines in /status.
func RegisterCommands(cmds *sessions.Commands, set Set) error {
	reply := func(f func(ctx context.Context, call *sessions.CommandCall) (string, error)) func(context.Context, *sessions.CommandCall) error {
		return func(ctx context.Context, call *sessions.CommandCall) error {
			text, err := f(ctx, call)
			if err != nil {
				text = sessions.CommandError(err)
			}
			return call.Reply(ctx, text)
		}
	}
	for _, c := range []sessions.Command{
		{
			Name: "goal", Args: "OBJECTIVE [--max-turns N] [--contract TEXT] | status|pause|resume|clear",
			Summary: "keep working toward an objective, judged after each turn",
			Handle: reply(func(ctx context.Context, call *sessions.CommandCall) (string, error) {
				return set.changed(call.In.Conv, goalCommand(ctx, set.Goals, call.In.Conv, call.In.UserKey(call.Target.Platform), call.Target, call.Args), nil)
			}),
		},
		{
			// Queued, it runs between turns: a continuation running
			// now commits its judgement, and the next one weighs the
			// step.
			Name: "subgoal", Args: "STEP", Summary: "add a step to the goal",
			Handle: func(ctx context.Context, call *sessions.CommandCall) error {
				return call.Queue(ctx, sessions.PriorityNormal)
			},
			Run: func(ctx context.Context, t *sessions.ControlTurn) error {
				goal, err := set.Goals.AddSubgoal(ctx, t.Lease.Conv, t.Args)
				if err != nil {
					t.Reply(sessions.CommandError(err))
					return nil
				}
				if set.Changed != nil {
					set.Changed(t.Lease.Conv)
				}
				t.Reply("Added. " + goal.Describe())
				return nil
			},
		},
		{
			Name: "loop", Args: "INTERVAL|auto PROMPT [--until C] [--times N] | list | stop [ID]",
			Summary: "run a prompt again and again",
			Handle: reply(func(ctx context.Context, call *sessions.CommandCall) (string, error) {
				text, err := loopCommand(ctx, set.Loops, call)
				return set.changed(call.In.Conv, text, err)
			}),
		},
		{
			Name: "heartbeat", Args: "INTERVAL [PROMPT] | off | status",
			Summary: "run a prompt every interval while the conversation is idle",
			Handle: reply(func(ctx context.Context, call *sessions.CommandCall) (string, error) {
				text, err := heartbeatCommand(ctx, set.Heartbeats, call)
				return set.changed(call.In.Conv, text, err)
			}),
		},
	} {
		c.OutOfBand = true
		if err := cmds.Register(c); err != nil {
			return err
		}
	}
	cmds.AddStatus(func(ctx context.Context, conv string) string { return set.status(ctx, conv) })
	return nil
}

// status is conv's controllers for /status: "" when it has none.
func (s Set) status(ctx context.Context, conv string) string {
	var lines []string
	if goal, _, err := s.Goals.Get(ctx, conv); err == nil {
		lines = append(lines, goal.Describe())
	}
	if states, loops, err := s.Loops.List(ctx, conv); err == nil {
		for i, l := range loops {
			if l.Status != LoopDone {
				lines = append(lines, l.Describe(states[i].ID))
			}
		}
	}
	if h, due, err := s.Heartbeats.Get(ctx, conv); err == nil {
		lines = append(lines, h.Describe(due))
	}
	return strings.Join(lines, "\n")
}

// loopCommand answers one /loop.
func loopCommand(ctx context.Context, loops *Loops, call *sessions.CommandCall) (string, error) {
	conv := call.In.Conv
	verb, rest, _ := strings.Cut(strings.TrimSpace(call.Args), " ")
	switch strings.ToLower(verb) {
	case "":
		return loopUsage, nil
	case "list":
		states, ls, err := loops.List(ctx, conv)
		if err != nil || len(ls) == 0 {
			return "No loops. " + loopUsage, err
		}
		lines := make([]string, len(ls))
		for i, l := range ls {
			lines[i] = l.Describe(states[i].ID)
		}
		return strings.Join(lines, "\n"), nil
	case "stop":
		n, err := loops.Stop(ctx, conv, strings.TrimSpace(rest))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Stopped %d loop(s).", n), nil
	}
	l, err := ParseLoop(call.Args, loops.minInterval())
	if err != nil {
		return sessions.CommandError(err) + "\n" + loopUsage, nil
	}
	l.Origin, l.CreatedBy = call.Target, call.In.UserKey(call.Target.Platform)
	id, err := loops.Start(ctx, conv, l)
	if err != nil {
		return "", err
	}
	return "Started. " + l.Describe(id) + "\n/loop stop " + id + " ends it.", nil
}

// heartbeatCommand answers one /heartbeat.
func heartbeatCommand(ctx context.Context, hs *Heartbeats, call *sessions.CommandCall) (string, error) {
	conv := call.In.Conv
	switch strings.ToLower(strings.TrimSpace(call.Args)) {
	case "":
		return heartbeatUsage, nil
	case "off":
		if err := hs.Off(ctx, conv); err != nil {
			return "", err
		}
		return "The heartbeat is off.", nil
	case "status":
		h, due, err := hs.Get(ctx, conv)
		if errs.Is(err, errs.NotFound) {
			return "No heartbeat. " + heartbeatUsage, nil
		}
		if err != nil {
			return "", err
		}
		return h.Describe(due), nil
	}
	h, err := ParseHeartbeat(call.Args, hs.minInterval())
	if err != nil {
		return sessions.CommandError(err) + "\n" + heartbeatUsage, nil
	}
	h.Origin, h.CreatedBy = call.Target, call.In.UserKey(call.Target.Platform)
	if h, err = hs.Set(ctx, conv, h); err != nil {
		return "", err
	}
	return "Set. " + h.Describe(h.Due(h.Anchor)), nil
}

// goalCommand answers one /goal.
func goalCommand(ctx context.Context, goals *Goals, conv, user string, origin outbox.Target, args string) string {
	verb := strings.ToLower(strings.TrimSpace(args))
	var (
		goal Goal
		err  error
	)
	switch verb {
	case "":
		return goalUsage
	case "status":
		goal, _, err = goals.Get(ctx, conv)
		if errs.Is(err, errs.NotFound) {
			return "No goal is set. " + goalUsage
		}
	case "pause":
		goal, err = goals.Pause(ctx, conv, "Paused by /goal pause.")
	case "resume":
		goal, err = goals.Resume(ctx, conv)
	case "clear":
		if err = goals.Clear(ctx, conv); err == nil {
			return "The goal is cleared."
		}
	default:
		spec, perr := ParseGoal(args)
		if perr != nil {
			return sessions.CommandError(perr) + "\n" + goalUsage
		}
		spec.By, spec.Origin = user, origin
		goal, err = goals.Set(ctx, conv, spec)
	}
	if err != nil {
		return sessions.CommandError(err)
	}
	return goal.Describe()
}

// ParseGoal reads "/goal <objective> [--max-turns N] [--contract TEXT]":
// the objective is the text before the first flag; a contract runs to
// the next flag or the end.
func ParseGoal(args string) (GoalSpec, error) {
	const op = "controllers.ParseGoal"
	var (
		spec GoalSpec
		err  error
	)
	spec.Objective, spec.Contract, spec.MaxTurns, err = options(op, strings.Fields(args), "--max-turns", "--contract")
	if err != nil {
		return GoalSpec{}, err
	}
	if spec.Objective == "" {
		return spec, errs.E(op, errs.Invalid, "a goal needs an objective")
	}
	return spec, nil
}
