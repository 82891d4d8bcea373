package controllers_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/controllers"
)

func TestParseJudgement(t *testing.T) {
	for _, tc := range []struct {
		desc, answer string
		want         controllers.Judgement
		ok           bool
	}{
		{desc: "continue", answer: `{"verdict":"continue"}`, want: controllers.Judgement{Verdict: controllers.VerdictContinue}, ok: true},
		{desc: "done with a summary in a code fence", answer: "```json\n{\"verdict\": \"Done\", \"reason\": \" shipped \"}\n```",
			want: controllers.Judgement{Verdict: controllers.VerdictDone, Reason: "shipped"}, ok: true},
		{desc: "wait on time", answer: `{"verdict":"wait","wait_seconds":90}`, want: controllers.Judgement{Verdict: controllers.VerdictWait, WaitSeconds: 90}, ok: true},
		{desc: "wait on a delegation", answer: `{"verdict":"wait","delegation":"deleg_1"}`, want: controllers.Judgement{Verdict: controllers.VerdictWait, Delegation: "deleg_1"}, ok: true},
		{desc: "a wait on nothing", answer: `{"verdict":"wait"}`},
		{desc: "blocked", answer: `{"verdict":"blocked","reason":"needs the password"}`, want: controllers.Judgement{Verdict: controllers.VerdictBlocked, Reason: "needs the password"}, ok: true},
		{desc: "an unknown verdict", answer: `{"verdict":"maybe"}`},
		{desc: "prose", answer: "I think it is done."},
		{desc: "broken JSON", answer: `{"verdict":`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := controllers.ParseJudgement(tc.answer)
			if ok != tc.ok || got != tc.want {
				t.Errorf("ParseJudgement = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	active := controllers.Goal{Objective: "ship", Status: controllers.GoalActive, MaxTurns: 2}
	cont := controllers.Judgement{Verdict: controllers.VerdictContinue}
	t.Run("continue queues a continuation and counts it", func(t *testing.T) {
		s := controllers.Decide(active, cont, true, false, now)
		if !s.Continue || s.Goal.Turns != 1 || s.Goal.Status != controllers.GoalActive || s.Tell != "" {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("the budget pauses the goal and says so", func(t *testing.T) {
		g := active
		g.Turns = 2
		s := controllers.Decide(g, cont, true, false, now)
		if s.Continue || s.Goal.Status != controllers.GoalPaused || !strings.Contains(s.Tell, "2 continuation turns") {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("done ends it with the summary", func(t *testing.T) {
		s := controllers.Decide(active, controllers.Judgement{Verdict: controllers.VerdictDone, Reason: "tag v1 pushed"}, true, false, now)
		if s.Continue || s.Goal.Status != controllers.GoalDone || !strings.Contains(s.Tell, "tag v1 pushed") {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("blocked pauses it and tells why", func(t *testing.T) {
		s := controllers.Decide(active, controllers.Judgement{Verdict: controllers.VerdictBlocked, Reason: "needs the password"}, true, false, now)
		if s.Continue || s.Goal.Status != controllers.GoalBlocked || !strings.Contains(s.Tell, "needs the password") {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("wait holds the continuation", func(t *testing.T) {
		s := controllers.Decide(active, controllers.Judgement{Verdict: controllers.VerdictWait, WaitSeconds: 60}, true, false, now)
		if s.Continue || !s.WaitUntil.Equal(now.Add(time.Minute)) || s.Goal.Turns != 0 {
			t.Errorf("step %+v", s)
		}
	})
	t.Run("malformed answers fail open, and three in a row pause", func(t *testing.T) {
		g := active
		g.MaxTurns = 10
		for i := 1; i <= 2; i++ {
			s := controllers.Decide(g, controllers.Judgement{}, false, false, now)
			if !s.Continue || s.Goal.Malformed != i {
				t.Fatalf("malformed answer %d: step %+v, want a continuation", i, s)
			}
			g = s.Goal
		}
		// An API error continues and does not count, nor reset the count.
		s := controllers.Decide(g, controllers.Judgement{}, false, true, now)
		if !s.Continue || s.Goal.Malformed != 2 {
			t.Fatalf("an API error: step %+v", s)
		}
		s = controllers.Decide(s.Goal, controllers.Judgement{}, false, false, now)
		if s.Continue || s.Goal.Status != controllers.GoalPaused || !strings.Contains(s.Tell, "3 unreadable answers") {
			t.Errorf("third malformed answer: step %+v, want paused", s)
		}
		// A good answer starts the count again.
		g.Malformed = 2
		if s := controllers.Decide(g, cont, true, false, now); s.Goal.Malformed != 0 {
			t.Errorf("a good answer left the count at %d", s.Goal.Malformed)
		}
	})
}

func TestJudgePromptIsBounded(t *testing.T) {
	goal := controllers.Goal{Objective: strings.Repeat("o", 3000), Contract: "done when shipped", Subgoals: []string{"a", "b"}}
	reply := strings.Repeat("r", 10000) + "THE END"
	system, user := controllers.JudgePrompt(goal, reply)
	if n := utf8.RuneCountInString(user); n > controllers.JudgeInputMax {
		t.Errorf("the judge's input is %d characters, over %d", n, controllers.JudgeInputMax)
	}
	if !strings.HasSuffix(user, "THE END") || !strings.HasPrefix(user, "Goal: ooo") {
		t.Errorf("the input keeps the goal's start and the reply's end: %.40q … %q", user, user[len(user)-20:])
	}
	if !strings.Contains(system, `"verdict"`) {
		t.Errorf("the system prompt does not ask for a verdict: %q", system)
	}
	if _, u := controllers.JudgePrompt(controllers.Goal{Objective: "x", Subgoals: []string{"step one"}}, "ok"); !strings.Contains(u, "Step 1: step one") || !strings.HasSuffix(u, "\nok") {
		t.Errorf("a small input = %q", u)
	}
}
