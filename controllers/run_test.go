package controllers_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// isContinuation tells a goal's continuation from a user's message.
func isContinuation(text string) bool {
	return strings.HasPrefix(text, "Work toward this goal") || strings.HasPrefix(text, "Continue working toward the goal")
}

func TestGoalContinuesUntilDone(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		h.judge.say(`{"verdict":"continue"}`, "```json\n{\"verdict\":\"done\",\"reason\":\"shipped v2\"}\n```")
		h.say("/goal ship v2 --contract the release is tagged")
		turns := h.settle(2)
		if !strings.HasPrefix(turns[0], "Work toward this goal: ship v2") || !strings.Contains(turns[0], "the release is tagged") {
			t.Errorf("first turn = %q, want the goal's start", turns[0])
		}
		if !strings.HasPrefix(turns[1], "Continue working toward the goal: ship v2") || !strings.Contains(turns[1], "continuation 1 of 20") {
			t.Errorf("second turn = %q, want continuation 1", turns[1])
		}
		h.wantNotice("Goal reached: ship v2\nshipped v2")
		g := h.goal()
		if g.Status != controllers.GoalDone || g.Turns != 1 || g.Owed {
			t.Errorf("goal = %+v, want done after 1 continuation, nothing owed", g)
		}
		if h.judge.count() != 2 {
			t.Errorf("judge calls = %d, want one after each turn", h.judge.count())
		}
		// Done, it neither judges nor continues.
		h.say("thanks")
		h.settle(3)
		if h.judge.count() != 2 {
			t.Errorf("judge calls after a done goal's turn = %d, want still 2", h.judge.count())
		}
	})
}

func TestGoalContinuationWaitsBehindAUserMessage(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		release := h.agent.hold("first")
		h.say("first")
		h.waitRunning("the first turn")
		h.say("/goal tidy the docs")
		h.tick() // the start is queued behind the running turn
		h.say("second")
		release()
		// The judge after "first" and after "second" finds a
		// continuation owed already: it is counted once.
		turns := h.settle(4)
		if turns[0] != "first" || turns[1] != "second" || !isContinuation(turns[2]) || !isContinuation(turns[3]) {
			t.Fatalf("turns = %q, want first, second, then the goal's", turns)
		}
		if !strings.HasPrefix(turns[2], "Work toward") || !strings.Contains(turns[3], "continuation 1 of 20") {
			t.Errorf("goal turns = %q, want the start then continuation 1", turns[2:])
		}
	})
}

func TestGoalWaitsOnATime(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.judge.say(`{"verdict":"wait","wait_seconds":120}`)
		h.say("/goal watch the build")
		h.settle(1)
		testkit.Eventually(t, "the goal waiting", func() bool { return h.goal().Wait != nil })
		clk.Advance(time.Minute)
		h.tick()
		h.say("how is it going?")
		h.waitTurns(2) // a user's turn while it waits is not judged
		if h.judge.count() != 1 {
			t.Errorf("judge calls while waiting = %d, want 1", h.judge.count())
		}
		clk.Advance(time.Minute)
		turns := h.settle(3)
		if !strings.Contains(turns[2], "continuation 1 of 20") {
			t.Errorf("turn after the wait = %q, want continuation 1", turns[2])
		}
		if g := h.goal(); g.Wait != nil || g.Turns != 2 || !g.Owed {
			t.Errorf("goal after its wait = %+v", g)
		}
	})
}

func TestGoalBlocked(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		h.judge.say(`{"verdict":"blocked","reason":"it needs the deploy key"}`)
		h.say("/goal deploy")
		h.settle(1)
		h.wantNotice("Blocked: it needs the deploy key")
		if g := h.goal(); g.Status != controllers.GoalBlocked {
			t.Errorf("goal = %+v, want blocked", g)
		}
		h.tick()
		h.waitTurns(1)
		h.say("/goal resume")
		turns := h.settle(2)
		if !isContinuation(turns[1]) {
			t.Errorf("turn after /goal resume = %q, want a continuation", turns[1])
		}
	})
}

func TestGoalJudgeFailsOpenButThreeMalformedPause(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		// An error does not count toward the three; it breaks no run.
		h.judge.say("no idea", "ERROR", "maybe?", `{"verdict":"soon"}`)
		h.say("/goal refactor")
		h.settle(4)
		h.wantNotice("unreadable answers in a row")
		g := h.goal()
		if g.Status != controllers.GoalPaused || g.Turns != 3 || g.Malformed != 3 {
			t.Errorf("goal = %+v, want paused after 3 continuations and 3 unreadable answers", g)
		}
		h.tick()
		h.waitTurns(4)
	})
}

func TestGoalBudgetPauses(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		h.say("/goal write tests --max-turns 2")
		h.settle(3)
		h.wantNotice("used its 2 continuation turns")
		if g := h.goal(); g.Status != controllers.GoalPaused || g.Turns != 2 {
			t.Errorf("goal = %+v, want paused at its budget", g)
		}
		h.tick()
		h.waitTurns(3)
	})
}

func TestGoalPauseAndClearDropQueuedContinuations(t *testing.T) {
	for _, verb := range []string{"pause", "clear"} {
		t.Run(verb, func(t *testing.T) {
			eachPlace(t, func(t *testing.T, open place) {
				h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
				release := h.agent.hold("first")
				h.say("first")
				h.waitRunning("the first turn")
				h.say("/goal polish")
				h.tick() // queued
				h.say("/goal " + verb)
				release()
				h.waitTurns(1)
				h.say("after")
				turns := h.settle(2)
				if turns[1] != "after" {
					t.Errorf("turns = %q, want the queued continuation dropped unrun", turns)
				}
			})
		})
	}
}

func TestGoalSurvivesARestart(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.say("/goal migrate")
		h.settle(1)
		testkit.Eventually(t, "continuation 1 owed", func() bool { g := h.goal(); return g.Owed && g.Turns == 1 })
		h.stop()
		h.db.Close()

		h2 := newHarness(t, open, clk, harnessOpts{name: "gw-2"})
		h2.judge.say(`{"verdict":"done"}`)
		turns := h2.settle(1)
		if !strings.Contains(turns[0], "continuation 1 of 20") {
			t.Errorf("first turn after the restart = %q, want continuation 1", turns[0])
		}
		if g := h2.goal(); g.Status != controllers.GoalDone {
			t.Errorf("goal = %+v, want done", g)
		}
	})
}

// A turn's claim says whether its conversation has a controller's
// state: a conversation with none has no goal read after its turns, and
// a goal set meanwhile elsewhere (this runner not told) is judged after
// the very next turn, whose claim finds it.
func TestGoalSetElsewhereIsJudgedAfterTheNextTurn(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.say("hello")
		h.waitTurns(1)
		if n := h.judge.count(); n != 0 {
			t.Fatalf("judge calls with no goal = %d, want 0", n)
		}
		// Set as another instance would: this runner is not told.
		if _, err := (&controllers.Goals{Store: h.db.Controllers()}).Set(h.ctx, hconv, controllers.GoalSpec{Objective: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		h.say("still there?")
		h.waitTurns(2)
		testkit.Eventually(t, "the judge after the turn", func() bool { return h.judge.count() == 1 })
	})
}

// A continuation queued for a goal replaced since does not run for the
// new one.
func TestGoalReplacedDropsTheOldContinuation(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		release := h.agent.hold("first")
		h.say("first")
		h.waitRunning("the first turn")
		h.say("/goal the old one")
		h.tick()
		clk.Advance(time.Second)
		h.say("/goal the new one")
		h.tick()
		release()
		turns := h.waitTurns(2)
		if !strings.HasPrefix(turns[1], "Work toward this goal: the new one") {
			t.Errorf("turns = %q, want the new goal's start only", turns)
		}
	})
}

func TestGoalWaitsOnADelegation(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		var mu sync.Mutex
		ended := false
		h := newHarness(t, open, clk, harnessOpts{ended: func(_ context.Context, conv string, w controllers.Wait) bool {
			mu.Lock()
			defer mu.Unlock()
			return conv == hconv && w.Delegation == "deleg_1" && ended
		}})
		h.judge.say(`{"verdict":"wait","delegation":"deleg_1"}`)
		h.say("/goal research the options")
		h.settle(1)
		testkit.Eventually(t, "the goal waiting", func() bool { w := h.goal().Wait; return w != nil && w.Delegation == "deleg_1" })
		h.say("/goal status")
		h.wantNotice("Waiting on delegation deleg_1")
		// It looks every 30 s; the delegation runs on.
		clk.Advance(controllers.WaitPoll)
		h.tick()
		h.say("anything yet?")
		h.waitTurns(2)
		if n := h.judge.count(); n != 1 {
			t.Fatalf("judge calls while the delegation runs = %d, want 1", n)
		}
		// Its result comes back as a turn: the wait is over, and that
		// turn is judged.
		mu.Lock()
		ended = true
		mu.Unlock()
		if err := h.router.Deliver(h.ctx, sessions.Inbound{Conv: hconv, Kind: sessions.KindSynthetic, MessageID: "cmp_1", Text: "results of deleg_1"}); err != nil {
			t.Fatal(err)
		}
		h.waitTurns(3)
		testkit.Eventually(t, "the judge after the result's turn", func() bool { return h.judge.count() == 2 })
		turns := h.settle(4)
		if !strings.Contains(turns[3], "continuation 1 of 20") {
			t.Errorf("turn after the result = %q, want continuation 1", turns[3])
		}
	})
}

// /subgoal waits for the running turn, whose judgement it does not undo,
// and the next continuation's judge weighs the step.
func TestSubgoalRunsBetweenTurns(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		release := h.agent.hold("Work toward")
		h.say("/goal ship v3")
		h.tick()
		h.waitRunning("the goal's start")
		h.say("/subgoal write the changelog")
		h.say("/subgoal")
		release()
		h.wantNotice("Added. Goal (active): ship v3")
		h.wantNotice("a subgoal is 1 to")
		turns := h.settle(2)
		if !strings.Contains(turns[1], "continuation 1 of 20") {
			t.Errorf("turn after the subgoal = %q, want continuation 1 (the start's judgement kept)", turns[1])
		}
		testkit.Eventually(t, "the judge weighing the step", func() bool {
			h.judge.mu.Lock()
			defer h.judge.mu.Unlock()
			return len(h.judge.calls) == 2 && strings.Contains(h.judge.calls[1], "Step 1: write the changelog")
		})
	})
}

// /stop ends a continuation; the goal goes on after the conversation's
// next turn, and does not hold its loops back meanwhile.
func TestStopEndsAContinuation(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		release := h.agent.hold("Work toward")
		defer release()
		h.say("/goal port the parser")
		h.tick()
		h.waitRunning("the goal's start")
		h.say("/stop")
		h.waitTurns(1)
		if g := h.goal(); g.Status != controllers.GoalActive || g.Owed {
			t.Errorf("goal after /stop = %+v, want active with nothing owed", g)
		}
		clk.Advance(controllers.DefaultRefire + time.Minute)
		h.tick()
		h.waitTurns(1) // nothing restarts it by itself
		h.say("/loop 1m ping")
		turns := h.settle(3)
		if turns[1] != "ping" || !isContinuation(turns[2]) {
			t.Errorf("turns after /stop = %q, want the loop's tick, then the goal going on", turns[1:])
		}
		if n := h.judge.count(); n != 2 {
			t.Errorf("judge calls = %d, want after the tick and the continuation", n)
		}
	})
}

// A turn that read a goal since cleared and set anew writes nothing over
// the new goal.
func TestClearedAndSetAgainWhileATurnRuns(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		release := h.agent.hold("Work toward this goal: old")
		h.say("/goal old")
		h.tick()
		h.waitRunning("the old goal's start")
		h.say("/goal clear")
		h.wantNotice("The goal is cleared.")
		h.say("/goal clear")
		h.wantNotice("this conversation has no goal")
		h.say("/goal new")
		release()
		h.waitTurns(1)
		if g := h.goal(); g.Objective != "new" || g.Turns != 0 || !g.Owed {
			t.Errorf("goal = %+v, want the new one, its start owed", g)
		}
		turns := h.settle(2)
		if !strings.HasPrefix(turns[1], "Work toward this goal: new") {
			t.Errorf("turn = %q, want the new goal's start", turns[1])
		}
	})
}

// A user's turn while a continuation is owed does not spend the budget.
func TestUserTurnKeepsTheOwedContinuation(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		h.say("/goal tidy --max-turns 1")
		h.settle(1)
		h.say("hello")
		h.waitTurns(2)
		if g := h.goal(); g.Status != controllers.GoalActive || !g.Owed || g.Turns != 1 {
			t.Fatalf("goal after the user's turn = %+v, want continuation 1 still owed", g)
		}
		turns := h.settle(3)
		if !strings.Contains(turns[2], "continuation 1 of 1") {
			t.Errorf("turn = %q, want continuation 1", turns[2])
		}
		h.wantNotice("used its 1 continuation turns")
	})
}
