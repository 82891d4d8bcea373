package controllers

import (
	"context"
	"strconv"
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
	var spec GoalSpec
	words := strings.Fields(args)
	var objective, contract []string
	into := &objective
	for i := 0; i < len(words); i++ {
		switch w := words[i]; w {
		case "--max-turns":
			if i+1 >= len(words) {
				return spec, errs.E(op, errs.Invalid, "--max-turns needs a number")
			}
			n, err := strconv.Atoi(words[i+1])
			if err != nil || n < 1 {
				return spec, errs.E(op, errs.Invalid, "--max-turns %q: want a whole number of at least 1", words[i+1])
			}
			spec.MaxTurns = n
			i++
			into = &objective
		case "--contract":
			into = &contract
		default:
			if strings.HasPrefix(w, "--") {
				return spec, errs.E(op, errs.Invalid, "unknown option %s", w)
			}
			*into = append(*into, w)
		}
	}
	spec.Objective, spec.Contract = strings.Join(objective, " "), strings.Join(contract, " ")
	if spec.Objective == "" {
		return spec, errs.E(op, errs.Invalid, "a goal needs an objective")
	}
	return spec, nil
}
