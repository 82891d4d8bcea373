package controllers_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// eachStore runs f on a controllers store of each backend, on a fake
// clock.
func eachStore(t *testing.T, f func(t *testing.T, st controllers.Store, clk *clock.Fake)) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			var st controllers.Store
			switch name {
			case "sqlite":
				db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				st = db.Controllers()
			case "redis":
				srv := testkit.StartRedis(t)
				db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix(), Clock: clk})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				st = db.Controllers()
			}
			f(t, st, clk)
		})
	}
}

const conv = "telegram:42"

func TestGoalLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, st controllers.Store, _ *clock.Fake) {
		ctx := context.Background()
		goals := &controllers.Goals{Store: st}
		if _, _, err := goals.Get(ctx, conv); !errs.Is(err, errs.NotFound) {
			t.Fatalf("Get with no goal = %v, want NotFound", err)
		}
		if _, err := goals.Pause(ctx, conv, ""); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "/goal <objective>") {
			t.Errorf("Pause with no goal = %v, want NotFound saying how to set one", err)
		}
		g, err := goals.Set(ctx, conv, controllers.GoalSpec{Objective: "ship the release", Contract: "the tag is pushed", By: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if g.Status != controllers.GoalActive || g.MaxTurns != controllers.DefaultMaxTurns || !g.CreatedAt.Equal(t0) {
			t.Errorf("set goal = %+v", g)
		}
		if g, err = goals.AddSubgoal(ctx, conv, "write the notes"); err != nil || len(g.Subgoals) != 1 {
			t.Fatalf("AddSubgoal = %+v, %v", g, err)
		}
		if g, err = goals.Pause(ctx, conv, "Paused by /goal pause."); err != nil || g.Status != controllers.GoalPaused {
			t.Fatalf("Pause = %+v, %v", g, err)
		}
		if _, err := goals.Pause(ctx, conv, ""); !errs.Is(err, errs.Invalid) {
			t.Errorf("Pause of a paused goal = %v, want Invalid", err)
		}
		if g, err = goals.Resume(ctx, conv); err != nil || g.Status != controllers.GoalActive || g.Reason != "" {
			t.Fatalf("Resume = %+v, %v", g, err)
		}
		// What a restart reads is what was written.
		got, version, err := goals.Get(ctx, conv)
		if err != nil || got.Objective != "ship the release" || got.Contract != "the tag is pushed" || len(got.Subgoals) != 1 || version < 4 {
			t.Errorf("Get = %+v (v%d), %v", got, version, err)
		}
		// A new goal replaces the old one whole.
		if g, err = goals.Set(ctx, conv, controllers.GoalSpec{Objective: "fix the build", MaxTurns: 3}); err != nil || len(g.Subgoals) != 0 || g.MaxTurns != 3 {
			t.Fatalf("Set over a goal = %+v, %v", g, err)
		}
		if err := goals.Clear(ctx, conv); err != nil {
			t.Fatal(err)
		}
		if _, _, err := goals.Get(ctx, conv); !errs.Is(err, errs.NotFound) {
			t.Errorf("Get after Clear = %v, want NotFound", err)
		}
	})
}

func TestGoalRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, st controllers.Store, _ *clock.Fake) {
		ctx := context.Background()
		goals := &controllers.Goals{Store: st, MaxTurns: 5}
		for _, spec := range []controllers.GoalSpec{
			{Objective: "  "},
			{Objective: strings.Repeat("x", controllers.MaxObjective+1)},
			{Objective: "x", MaxTurns: -1},
		} {
			if _, err := goals.Set(ctx, conv, spec); !errs.Is(err, errs.Invalid) {
				t.Errorf("Set(%.20q…) = %v, want Invalid", spec.Objective, err)
			}
		}
		g, err := goals.Set(ctx, conv, controllers.GoalSpec{Objective: "x"})
		if err != nil || g.MaxTurns != 5 {
			t.Fatalf("Set = %+v, %v; want goal.max_turns 5", g, err)
		}
		if _, err := goals.AddSubgoal(ctx, conv, ""); !errs.Is(err, errs.Invalid) {
			t.Errorf("an empty subgoal = %v, want Invalid", err)
		}
		if _, err := goals.Resume(ctx, conv); !errs.Is(err, errs.Invalid) {
			t.Errorf("Resume of an active goal = %v, want Invalid", err)
		}
	})
}

func TestParseGoal(t *testing.T) {
	for _, tc := range []struct {
		desc, args string
		want       controllers.GoalSpec
		err        string
	}{
		{desc: "objective only", args: "ship the release", want: controllers.GoalSpec{Objective: "ship the release"}},
		{desc: "every option", args: "ship it --max-turns 5 --contract the tag is pushed",
			want: controllers.GoalSpec{Objective: "ship it", MaxTurns: 5, Contract: "the tag is pushed"}},
		{desc: "a contract before the budget", args: "ship it --contract tag pushed --max-turns 2",
			want: controllers.GoalSpec{Objective: "ship it", MaxTurns: 2, Contract: "tag pushed"}},
		{desc: "a bad budget", args: "ship it --max-turns none", err: `--max-turns "none"`},
		{desc: "a budget with no number", args: "ship it --max-turns", err: "--max-turns needs a number"},
		{desc: "an unknown option", args: "ship it --fast", err: "unknown option --fast"},
		{desc: "no objective", args: "--contract done", err: "needs an objective"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := controllers.ParseGoal(tc.args)
			if tc.err != "" {
				if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want Invalid with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseGoal = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// /goal in a chat: set, status, pause, resume, clear, each answered in
// words a person can act on.
func TestGoalCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, st controllers.Store, _ *clock.Fake) {
		ctx := context.Background()
		goals := &controllers.Goals{Store: st}
		say := func(args string) string {
			return controllers.GoalCommand(ctx, goals, conv, "telegram:7", outbox.Target{Platform: "telegram", Chat: "42"}, args)
		}
		for _, tc := range []struct{ args, want string }{
			{"", "Usage: /goal"},
			{"status", "No goal is set"},
			{"pause", "this conversation has no goal: set one with /goal <objective>"},
			{"ship it --max-turns x", `--max-turns "x"`},
			{"ship the release --max-turns 3 --contract the tag is pushed", "Goal (active): ship the release\nDone when: the tag is pushed\nContinuations: 0 of 3"},
			{"status", "Goal (active): ship the release"},
			{"pause", "Goal (paused)"},
			{"pause", "the goal is paused, not active"},
			{"resume", "Goal (active)"},
			{"clear", "The goal is cleared."},
			{"status", "No goal is set"},
		} {
			if got := say(tc.args); !strings.Contains(got, tc.want) {
				t.Errorf("/goal %s = %q, want it to say %q", tc.args, got, tc.want)
			}
		}
		if g, _, err := goals.Get(ctx, conv); err == nil {
			t.Errorf("a goal is left after /goal clear: %+v", g)
		}
	})
}
