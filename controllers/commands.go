package controllers

import (
	"context"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

const goalUsage = "Usage: /goal <objective> [--max-turns N] [--contract TEXT] · /goal status|pause|resume|clear · /subgoal <step>"

// RegisterCommands registers /goal and /subgoal in cmds, and the goal's
// line in /status.
func RegisterCommands(cmds *sessions.Commands, goals *Goals) error {
	err := cmds.Register(sessions.Command{
		Name: "goal", Args: "OBJECTIVE [--max-turns N] [--contract TEXT] | status|pause|resume|clear",
		Summary: "keep working toward an objective, judged after each turn", OutOfBand: true,
		Handle: func(ctx context.Context, call *sessions.CommandCall) error {
			return call.Reply(ctx, goalCommand(ctx, goals, call.In.Conv, call.In.UserKey(call.Target.Platform), call.Args))
		},
	})
	if err != nil {
		return err
	}
	err = cmds.Register(sessions.Command{
		Name: "subgoal", Args: "STEP", Summary: "add a step to the goal", OutOfBand: true,
		Handle: func(ctx context.Context, call *sessions.CommandCall) error {
			goal, err := goals.AddSubgoal(ctx, call.In.Conv, call.Args)
			if err != nil {
				return call.Reply(ctx, sessions.CommandError(err))
			}
			return call.Reply(ctx, "Added. "+goal.Describe())
		},
	})
	if err != nil {
		return err
	}
	cmds.AddStatus(func(ctx context.Context, conv string) string {
		goal, _, err := goals.Get(ctx, conv)
		if err != nil {
			return ""
		}
		return goal.Describe()
	})
	return nil
}

// goalCommand answers one /goal.
func goalCommand(ctx context.Context, goals *Goals, conv, user, args string) string {
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
		spec.By = user
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
