package controllers_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
)

// loops reads the conversation's loops.
func (h *harness) loops() []controllers.Loop {
	h.t.Helper()
	_, ls, err := h.set.Loops.List(h.ctx, hconv)
	if err != nil {
		h.t.Fatal(err)
	}
	return ls
}

func (h *harness) loop() controllers.Loop {
	h.t.Helper()
	ls := h.loops()
	if len(ls) != 1 {
		h.t.Fatalf("loops = %+v, want one", ls)
	}
	return ls[0]
}

// due is when the conversation's only controller of kind next fires.
func (h *harness) due(kind controllers.Kind) time.Time {
	h.t.Helper()
	states, err := h.db.Controllers().Controllers(h.ctx, hconv)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, st := range states {
		if st.Kind == kind {
			return st.DueAt
		}
	}
	h.t.Fatalf("no %s", kind)
	return time.Time{}
}

func TestLoopFixedInterval(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.say("/loop 10m check the deploy --times 3")
		h.settle(1)
		if got := h.due(controllers.KindLoop); !got.Equal(t0.Add(10 * time.Minute)) {
			t.Errorf("next tick at t0+%v, want an interval after the first", got.Sub(t0))
		}
		clk.Advance(9 * time.Minute)
		h.tick()
		h.waitTurns(1)
		clk.Advance(time.Minute)
		h.settle(2)
		clk.Advance(10 * time.Minute)
		turns := h.settle(3)
		for _, tt := range turns {
			if tt != "check the deploy" {
				t.Errorf("a tick ran %q, want the loop's prompt", tt)
			}
		}
		h.wantNotice("ran its 3 times")
		if l := h.loop(); l.Status != controllers.LoopDone || l.Ticks != 3 {
			t.Errorf("loop = %+v, want done after 3 ticks", l)
		}
		clk.Advance(time.Hour)
		h.tick()
		h.waitTurns(3)
	})
}

func TestLoopSelfPaced(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		reply := "nothing new"
		h.agent.reply = func(string) string { return reply }
		h.say("/loop auto watch the queue")
		h.settle(1)
		// The first reply is new: the pace stays at 60 s; then it
		// doubles while the reply stays the same.
		want := []time.Duration{60 * time.Second, 120 * time.Second, 240 * time.Second, 480 * time.Second, 900 * time.Second, 900 * time.Second}
		for i, w := range want {
			if got := h.loop().Interval; got != w {
				t.Fatalf("pace after tick %d = %v, want %v", i+1, got, w)
			}
			clk.Advance(w)
			h.settle(i + 2)
		}
		reply = "a new job arrived"
		clk.Advance(900 * time.Second)
		h.settle(len(want) + 2)
		if got := h.loop().Interval; got != 60*time.Second {
			t.Errorf("pace after a changed reply = %v, want 60s again", got)
		}
	})
}

func TestLoopEnds(t *testing.T) {
	t.Run("LOOP_COMPLETE", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			n := 0
			h.agent.reply = func(string) string {
				n++
				if n == 2 {
					return "all green\n LOOP_COMPLETE \n"
				}
				return "still red; LOOP_COMPLETE is what I will say"
			}
			h.say("/loop 1m poll the tests")
			h.settle(1)
			clk.Advance(time.Minute)
			h.settle(2)
			h.wantNotice("its reply said LOOP_COMPLETE")
			if l := h.loop(); l.Status != controllers.LoopDone {
				t.Errorf("loop = %+v, want done", l)
			}
		})
	})
	t.Run("until", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			// Unreadable and failed answers are not met: the loop goes on.
			h.judge.say("hmm", "ERROR", `{"met":false}`, `{"met": true}`)
			h.say("/loop 1m check the build --until the build passes")
			h.settle(1)
			for i := 2; i <= 4; i++ {
				clk.Advance(time.Minute)
				h.settle(i)
			}
			h.wantNotice("its condition is met (the build passes)")
			if l := h.loop(); l.Status != controllers.LoopDone || l.Ticks != 4 {
				t.Errorf("loop = %+v, want done after 4 ticks", l)
			}
			h.judge.mu.Lock()
			calls := h.judge.calls
			h.judge.mu.Unlock()
			if len(calls) != 4 || !strings.Contains(calls[0], "Condition: the build passes") {
				t.Errorf("judge calls = %q, want 4 asking about the condition", calls)
			}
		})
	})
	t.Run("max_ticks", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{maxTicks: 2})
			h.say("/loop 1m ping")
			h.settle(1)
			clk.Advance(time.Minute)
			h.settle(2)
			h.wantNotice("paused: it ran 2 ticks (loop.max_ticks)")
			if l := h.loop(); l.Status != controllers.LoopPaused {
				t.Errorf("loop = %+v, want paused", l)
			}
			clk.Advance(time.Hour)
			h.tick()
			h.waitTurns(2)
		})
	})
	t.Run("stop", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			h.say("/loop 1m ping")
			h.settle(1)
			h.say("/loop stop lp_nope")
			h.wantNotice("no loop lp_nope")
			h.say("/loop stop")
			h.wantNotice("Stopped 1 loop(s).")
			clk.Advance(time.Hour)
			h.tick()
			h.waitTurns(1)
			if ls := h.loops(); len(ls) != 0 {
				t.Errorf("loops after /loop stop = %+v", ls)
			}
		})
	})
}

func TestLoopRefusesBadInput(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		h := newHarness(t, open, clock.NewFake(t0), harnessOpts{})
		h.say("/loop 10s too fast")
		h.wantNotice("below the least, 30s")
		h.say("/loop soon check")
		h.wantNotice(`interval "soon"`)
		h.say("/loop 1m check --times zero")
		h.wantNotice(`--times "zero"`)
		if ls := h.loops(); len(ls) != 0 {
			t.Errorf("refused loops were kept: %+v", ls)
		}
	})
}

func TestGoalDefersLoopTicks(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		release := h.agent.hold("Work toward")
		h.say("/goal ship it")
		h.tick()
		h.waitRunning("the goal's turn")
		h.say("/loop 1m ping")
		clk.Advance(time.Minute)
		h.tick()
		// The verdict is ready before the turn ends, which asks for it.
		h.judge.say(`{"verdict":"wait","wait_seconds":600}`)
		release()
		turns := h.waitTurns(1)
		if !isContinuation(turns[0]) {
			t.Fatalf("turns = %q", turns)
		}
		// The goal waits now: the loop may use the idle window.
		testkit.Eventually(t, "the goal waiting", func() bool { return h.goal().Wait != nil })
		clk.Advance(time.Minute)
		turns = h.settle(2)
		if turns[1] != "ping" {
			t.Errorf("turn while the goal waits = %q, want the loop's tick", turns[1])
		}
		var g controllers.Goal
		st, _ := h.db.Controllers().Controller(h.ctx, controllers.Key{Conv: hconv, Kind: controllers.KindGoal})
		_ = json.Unmarshal(st.Data, &g)
		if g.Turns != 0 {
			t.Errorf("a loop's tick counted as a continuation: %+v", g)
		}
	})
}

func TestActiveGoalHoldsTheLoopBack(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.say("/goal tidy up --max-turns 1")
		h.say("/loop 1m ping")
		// The goal owns the conversation while it runs: its two turns,
		// then its pause at the budget, before any tick.
		turns := h.settle(2)
		for _, tt := range turns {
			if !isContinuation(tt) {
				t.Fatalf("turns while the goal runs = %q, want only the goal's", turns)
			}
		}
		h.wantNotice("used its 1 continuation turns")
		clk.Advance(time.Minute)
		turns = h.settle(3)
		if turns[2] != "ping" {
			t.Errorf("turn after the goal paused = %q, want the loop's tick", turns[2])
		}
	})
}

func TestHeartbeat(t *testing.T) {
	t.Run("fires when idle, coalescing missed ticks", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			h.say("/heartbeat 30s")
			h.wantNotice("below the least, 1m0s")
			h.say("/heartbeat 1h look at the inbox")
			h.wantNotice("Heartbeat every 1h0m0s")
			clk.Advance(59 * time.Minute)
			h.tick()
			h.waitTurns(0)
			clk.Advance(time.Minute)
			if turns := h.settle(1); turns[0] != "look at the inbox" {
				t.Errorf("heartbeat ran %q", turns[0])
			}
			// Five hours with no instance running: one tick, and the
			// timer starts again from then.
			clk.Advance(5*time.Hour + 30*time.Minute)
			h.settle(2)
			h.tick()
			h.waitTurns(2)
			if got, want := h.due(controllers.KindHeartbeat), t0.Add(7*time.Hour+30*time.Minute); !got.Equal(want) {
				t.Errorf("next heartbeat at t0+%v, want t0+%v (re-anchored an hour after the late tick)", got.Sub(t0), want.Sub(t0))
			}
		})
	})
	t.Run("not while busy", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			h.say("/heartbeat 1h")
			h.busy = true
			clk.Advance(time.Hour)
			h.tick()
			h.waitTurns(0)
			if got := h.due(controllers.KindHeartbeat); !got.Equal(t0.Add(2 * time.Hour)) {
				t.Errorf("a busy conversation's heartbeat is next at t0+%v, want the next tick, t0+2h", got.Sub(t0))
			}
			h.busy = false
			clk.Advance(time.Hour)
			if turns := h.settle(1); turns[0] != controllers.DefaultHeartbeatPrompt {
				t.Errorf("heartbeat ran %q, want the default prompt", turns[0])
			}
		})
	})
	t.Run("a tick a user message overtook is rolled back", func(t *testing.T) {
		eachPlace(t, func(t *testing.T, open place) {
			clk := clock.NewFake(t0)
			h := newHarness(t, open, clk, harnessOpts{})
			h.say("/heartbeat 1h ping")
			release := h.agent.hold("first")
			h.say("first")
			h.waitRunning("the first turn")
			clk.Advance(time.Hour)
			h.tick() // queued behind the running turn: Busy is the test's
			h.say("second")
			clk.Advance(time.Second)
			release()
			turns := h.waitTurns(2)
			if turns[0] != "first" || turns[1] != "second" {
				t.Fatalf("turns = %q, want the user's and no heartbeat", turns)
			}
			hb, _, err := h.set.Heartbeats.Get(h.ctx, hconv)
			if err != nil || hb.Ticks != 0 {
				t.Errorf("heartbeat = %+v, %v; want no tick counted", hb, err)
			}
			if got := h.due(controllers.KindHeartbeat); !got.Equal(t0.Add(2 * time.Hour)) {
				t.Errorf("after the rollback the heartbeat is next at t0+%v, want t0+2h", got.Sub(t0))
			}
			h.say("/heartbeat off")
			h.wantNotice("The heartbeat is off.")
		})
	})
}

// /stop ends a tick's turn: the tick is over uncounted, due again an
// interval on, and nothing runs it a second time.
func TestStopEndsATick(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		release := h.agent.hold("ping")
		defer release()
		h.say("/loop 1m ping")
		h.tick()
		h.waitRunning("the tick")
		h.say("/stop")
		h.waitTurns(1)
		if l := h.loop(); l.Ticks != 0 || l.Status != controllers.LoopActive {
			t.Errorf("loop after /stop = %+v, want active with no tick counted", l)
		}
		if got := h.due(controllers.KindLoop); !got.Equal(t0.Add(time.Minute)) {
			t.Errorf("next tick at t0+%v, want t0+1m", got.Sub(t0))
		}
		// Long past Refire: the tick that was cut short is not run again.
		clk.Advance(30 * time.Second)
		h.tick()
		h.waitTurns(1)
		clk.Advance(30 * time.Second)
		h.settle(2)
		clk.Advance(20 * time.Minute)
		h.settle(3)
		h.tick()
		h.waitTurns(3)
		if l := h.loop(); l.Ticks != 2 {
			t.Errorf("loop = %+v, want 2 ticks counted", l)
		}
	})
}

// An entry queued again for a tick (here: the state was due long ago, so
// a second entry is queued while the first waits) runs once.
func TestARequeuedTickRunsOnce(t *testing.T) {
	eachPlace(t, func(t *testing.T, open place) {
		clk := clock.NewFake(t0)
		h := newHarness(t, open, clk, harnessOpts{})
		h.say("/loop 1m ping")
		h.settle(1)
		clk.Advance(45 * time.Minute) // no instance ran meanwhile
		release := h.agent.hold("ping")
		h.tick()
		h.waitRunning("the tick")
		h.tick() // due 44 min ago and done: queued again
		release()
		h.waitTurns(2)
		if l := h.loop(); l.Ticks != 2 {
			t.Errorf("loop = %+v, want 2 ticks", l)
		}
	})
}
