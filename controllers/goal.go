package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// DefaultMaxTurns is a goal's budget of continuation turns
// (goal.max_turns).
const DefaultMaxTurns = 20

// MaxObjective bounds a goal's objective, contract and each subgoal:
// the judge reads them all within 4,000 characters.
const MaxObjective = 2000

// GoalStatus is where a goal stands.
type GoalStatus string

// The goal statuses.
const (
	GoalActive  GoalStatus = "active"  // the judge runs after each turn
	GoalPaused  GoalStatus = "paused"  // by the user, its budget, or three malformed judgements
	GoalBlocked GoalStatus = "blocked" // the judge found it cannot go on; Reason says why
	GoalDone    GoalStatus = "done"    // the judge found it reached; Reason is its summary
	// GoalCleared: /goal clear. The state stays, so that its version
	// goes on rising: a turn that read the goal before it was cleared
	// cannot write over a goal set since.
	GoalCleared GoalStatus = "cleared"
)

// Goal is a conversation's /goal: what it works toward, and how far it
// has come.
type Goal struct {
	Objective string     `json:"objective"`
	Contract  string     `json:"contract,omitempty"`
	Subgoals  []string   `json:"subgoals,omitempty"`
	Status    GoalStatus `json:"status"`
	// Reason says why it is paused or blocked, or sums up a done goal.
	Reason   string `json:"reason,omitempty"`
	MaxTurns int    `json:"max_turns"`
	// Turns counts its continuations: those run, and the one owed.
	Turns int `json:"turns"`
	// Malformed counts the judge's unreadable answers in a row.
	Malformed int `json:"malformed,omitempty"`
	// Owed says continuation number Turns is due, or queued (its state
	// stays due until the continuation's turn moves it on): it runs only
	// while this holds (a pause, a clear or a verdict since makes it
	// stale, and it is dropped unrun when its turn comes).
	Owed bool `json:"owed,omitempty"`
	// Wait, when set, is what the goal waits on: no judgement after a
	// turn, and no continuation, until it ends.
	Wait      *Wait         `json:"wait,omitempty"`
	Origin    outbox.Target `json:"origin"` // where its continuations' replies and notices go
	CreatedBy string        `json:"created_by,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
}

// Wait is what a waiting goal waits on: a time, a delegation's end, a
// background process's end.
type Wait struct {
	Until      time.Time `json:"until,omitzero"`
	Delegation string    `json:"delegation,omitempty"`
	Process    string    `json:"process,omitempty"`
}

// Thing is what w waits on other than a time, as a message says it.
func (w Wait) Thing() string {
	switch {
	case w.Delegation != "":
		return "delegation " + w.Delegation
	case w.Process != "":
		return "process " + w.Process
	}
	return ""
}

// Goals keeps the conversations' goals in Store.
type Goals struct {
	Store    Store
	MaxTurns int // goal.max_turns; 0: DefaultMaxTurns
}

// GoalSpec is a goal to set.
type GoalSpec struct {
	Objective string
	Contract  string
	MaxTurns  int // 0: the default
	By        string
	Origin    outbox.Target
}

// Get returns conv's goal and its state's version. Errors: NotFound.
func (g *Goals) Get(ctx context.Context, conv string) (Goal, int64, error) {
	s, err := g.Store.Controller(ctx, Key{Conv: conv, Kind: KindGoal})
	if err != nil {
		return Goal{}, 0, err
	}
	var goal Goal
	if err := json.Unmarshal(s.Data, &goal); err != nil {
		return Goal{}, 0, errs.E("controllers.Goals.Get", errs.Internal, "the goal of %s is not readable: %v", conv, err)
	}
	if goal.Status == GoalCleared {
		return Goal{}, 0, errNoGoal("controllers.Goals.Get")
	}
	return goal, s.Version, nil
}

// errNoGoal is the NotFound of a conversation with no goal.
func errNoGoal(op string) error {
	return errs.E(op, errs.NotFound, "this conversation has no goal: set one with /goal <objective>")
}

// Set gives conv a new active goal, in place of any it had. Errors:
// Invalid (no objective, too long, a budget below 1).
func (g *Goals) Set(ctx context.Context, conv string, spec GoalSpec) (Goal, error) {
	const op = "controllers.Goals.Set"
	spec.Objective, spec.Contract = strings.TrimSpace(spec.Objective), strings.TrimSpace(spec.Contract)
	switch {
	case spec.Objective == "":
		return Goal{}, errs.E(op, errs.Invalid, "a goal needs an objective: /goal <what to reach>")
	case len(spec.Objective) > MaxObjective || len(spec.Contract) > MaxObjective:
		return Goal{}, errs.E(op, errs.Invalid, "a goal's objective and contract are at most %d bytes each", MaxObjective)
	case spec.MaxTurns < 0:
		return Goal{}, errs.E(op, errs.Invalid, "--max-turns must be at least 1")
	}
	if spec.MaxTurns == 0 {
		spec.MaxTurns = g.maxTurns()
	}
	var set Goal
	err := g.change(ctx, op, conv, true, func(_ Goal, now time.Time) (Goal, error) {
		// A new goal starts at once: its first continuation is owed.
		set = Goal{Objective: spec.Objective, Contract: spec.Contract, Status: GoalActive, MaxTurns: spec.MaxTurns,
			Owed: true, Origin: spec.Origin, CreatedBy: spec.By, CreatedAt: now}
		return set, nil
	})
	return set, err
}

// Pause pauses conv's active goal: the judge no longer runs after its
// turns. Errors: NotFound, Invalid (not active).
func (g *Goals) Pause(ctx context.Context, conv, reason string) (Goal, error) {
	return g.edit(ctx, "controllers.Goals.Pause", conv, func(goal *Goal) error {
		if goal.Status != GoalActive {
			return errs.E("controllers.Goals.Pause", errs.Invalid, "the goal is %s, not active", goal.Status)
		}
		goal.Status, goal.Reason, goal.Owed, goal.Wait = GoalPaused, reason, false, nil
		return nil
	})
}

// Resume makes conv's paused or blocked goal active again: its count
// of malformed judgements starts again, and a spent budget is given
// anew. Errors: NotFound, Invalid (active or done).
func (g *Goals) Resume(ctx context.Context, conv string) (Goal, error) {
	return g.edit(ctx, "controllers.Goals.Resume", conv, func(goal *Goal) error {
		switch goal.Status {
		case GoalPaused, GoalBlocked:
		default:
			return errs.E("controllers.Goals.Resume", errs.Invalid, "the goal is %s: only a paused or blocked goal resumes", goal.Status)
		}
		if goal.Turns >= goal.MaxTurns {
			goal.Turns = 0
		}
		// It goes on at once.
		goal.Status, goal.Reason, goal.Malformed, goal.Owed = GoalActive, "", 0, true
		return nil
	})
}

// AddSubgoal adds a step to conv's goal, for the judge to weigh. Errors:
// NotFound, Invalid (empty, too long, a done goal).
func (g *Goals) AddSubgoal(ctx context.Context, conv, text string) (Goal, error) {
	const op = "controllers.Goals.AddSubgoal"
	text = strings.TrimSpace(text)
	if text == "" || len(text) > MaxObjective {
		return Goal{}, errs.E(op, errs.Invalid, "a subgoal is 1 to %d bytes: /subgoal <step>", MaxObjective)
	}
	return g.edit(ctx, op, conv, func(goal *Goal) error {
		if goal.Status == GoalDone {
			return errs.E(op, errs.Invalid, "the goal is done: set a new one with /goal")
		}
		goal.Subgoals = append(goal.Subgoals, text)
		return nil
	})
}

// Clear removes conv's goal: it is cleared, and neither judged nor
// continued again. Errors: NotFound.
func (g *Goals) Clear(ctx context.Context, conv string) error {
	_, err := g.edit(ctx, "controllers.Goals.Clear", conv, func(goal *Goal) error {
		*goal = Goal{Status: GoalCleared}
		return nil
	})
	return err
}

func (g *Goals) maxTurns() int {
	if g.MaxTurns > 0 {
		return g.MaxTurns
	}
	return DefaultMaxTurns
}

// maxAttempts bounds how often a change is decided again after another
// writer changed the state first.
const maxAttempts = 16

// edit changes conv's existing goal with f.
func (g *Goals) edit(ctx context.Context, op, conv string, f func(*Goal) error) (Goal, error) {
	var out Goal
	err := g.change(ctx, op, conv, false, func(goal Goal, _ time.Time) (Goal, error) {
		if err := f(&goal); err != nil {
			return Goal{}, err
		}
		out = goal
		return goal, nil
	})
	return out, err
}

// change reads conv's goal (none is NotFound unless create), decides
// with f and writes what it decided over the version it read, deciding
// again when another writer was first.
func (g *Goals) change(ctx context.Context, op, conv string, create bool, f func(Goal, time.Time) (Goal, error)) error {
	for range maxAttempts {
		s, err := g.Store.Controller(ctx, Key{Conv: conv, Kind: KindGoal})
		var cur Goal
		switch {
		case errs.Is(err, errs.NotFound) && create:
			s = State{Conv: conv, Kind: KindGoal}
		case err != nil:
			if errs.Is(err, errs.NotFound) {
				return errNoGoal(op)
			}
			return err
		default:
			if err := json.Unmarshal(s.Data, &cur); err != nil {
				return errs.E(op, errs.Internal, "the goal of %s is not readable: %v", conv, err)
			}
			if cur.Status == GoalCleared && !create {
				return errNoGoal(op)
			}
		}
		now, err := g.Store.Now(ctx)
		if err != nil {
			return err
		}
		next, err := f(cur, now)
		if err != nil {
			return err
		}
		if s.Data, err = json.Marshal(next); err != nil {
			return err
		}
		s.DueAt = next.due(now)
		if _, err = g.Store.PutController(ctx, s); !errs.Is(err, errs.Conflict) {
			return err
		}
	}
	return errs.E(op, errs.Conflict, "the goal kept changing; try again")
}

// continued is goal with its next continuation counted, or, when its
// budget is spent, paused saying so (ok false).
func (goal Goal) continued() (next Goal, ok bool) {
	if goal.Turns >= goal.MaxTurns {
		goal.Status, goal.Owed = GoalPaused, false
		goal.Reason = fmt.Sprintf("Paused: the goal used its %d continuation turns. /goal resume gives it %d more.", goal.MaxTurns, goal.MaxTurns)
		return goal, false
	}
	goal.Turns++
	return goal, true
}

// endedAlways is what a goal's wait on a delegation or a process takes
// to have ended when nothing can tell (RunnerOptions.Ended nil).
func endedAlways(context.Context, string, Wait) bool { return true }

// WaitPoll is how often a goal waiting on a delegation or a process
// looks whether it has ended, besides after each turn.
const WaitPoll = 30 * time.Second

// due is when goal's state fires, seen at now: at once when it owes a
// continuation, at its wait's end or next look, never otherwise.
func (goal Goal) due(now time.Time) time.Time {
	switch {
	case goal.Status != GoalActive:
		return time.Time{}
	case goal.Wait != nil && goal.Wait.Thing() != "":
		return now.Add(WaitPoll)
	case goal.Wait != nil:
		return goal.Wait.Until
	case goal.Owed:
		return now
	}
	return time.Time{}
}

// Describe is a goal in a few lines, for /goal status and /status.
func (goal Goal) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal (%s): %s", goal.Status, goal.Objective)
	if goal.Contract != "" {
		b.WriteString("\nDone when: " + goal.Contract)
	}
	for i, s := range goal.Subgoals {
		fmt.Fprintf(&b, "\n  %d. %s", i+1, s)
	}
	fmt.Fprintf(&b, "\nContinuations: %d of %d", goal.Turns, goal.MaxTurns)
	if w := goal.Wait; w != nil {
		switch {
		case w.Thing() != "":
			b.WriteString("\nWaiting on " + w.Thing())
		case !w.Until.IsZero():
			b.WriteString("\nWaiting until " + w.Until.UTC().Format(time.RFC3339))
		}
	}
	if goal.Reason != "" {
		b.WriteString("\n" + goal.Reason)
	}
	return b.String()
}
