package controllers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// JudgeInputMax bounds what the goal judge reads: the objective,
// contract, subgoals and the last reply, trimmed to fit.
const JudgeInputMax = 4000

// Verdict is the goal judge's answer after a turn.
type Verdict string

// The verdicts.
const (
	VerdictDone     Verdict = "done"
	VerdictContinue Verdict = "continue"
	VerdictWait     Verdict = "wait"
	VerdictBlocked  Verdict = "blocked"
)

// Judgement is one reading of the judge's answer.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	// Reason: why it is blocked, or the summary of a done goal.
	Reason string `json:"reason,omitempty"`
	// WaitSeconds, Delegation and Process say what a wait waits for:
	// a time, a delegation's end, a background process's end.
	WaitSeconds int    `json:"wait_seconds,omitempty"`
	Delegation  string `json:"delegation,omitempty"`
	Process     string `json:"process,omitempty"`
}

// judgeSystem tells the judge its task and the shape of its answer.
const judgeSystem = `You judge whether an agent has reached a goal a user set it. You read the goal, what counts as done, its steps, and the agent's last reply. Answer with one JSON object and nothing else:
{"verdict":"done","reason":"<a two-line summary of what was reached>"}
{"verdict":"continue"}
{"verdict":"wait","wait_seconds":<N>} or {"verdict":"wait","delegation":"<deleg_… id>"} or {"verdict":"wait","process":"<id>"} when the agent is waiting on something that will end by itself
{"verdict":"blocked","reason":"<what the user must do or decide>"}`

// JudgePrompt is what the judge reads for goal after a turn that ended
// with reply: the goal's parts first, the reply's end last, all within
// JudgeInputMax characters.
func JudgePrompt(goal Goal, reply string) (system, user string) {
	var b strings.Builder
	b.WriteString("Goal: " + goal.Objective)
	if goal.Contract != "" {
		b.WriteString("\nDone when: " + goal.Contract)
	}
	for i, s := range goal.Subgoals {
		fmt.Fprintf(&b, "\nStep %d: %s", i+1, s)
	}
	return judgeSystem, judgeInput(b.String(), "\n\nThe agent's last reply:\n", reply)
}

// judgeInput is what a judge reads: head (cut to half of JudgeInputMax),
// lead, and the end of reply in the room left.
func judgeInput(head, lead, reply string) string {
	head = trimRunes(head, JudgeInputMax/2)
	room := max(JudgeInputMax-len([]rune(head))-len([]rune(lead)), 0)
	return head + lead + lastRunes(strings.TrimSpace(reply), room)
}

// trimRunes is s cut to at most n characters.
func trimRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n-1, 0)]) + "…"
}

// lastRunes is the end of s, at most n characters.
func lastRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n == 0 {
		return ""
	}
	return "…" + string(r[len(r)-n+1:])
}

// jsonObject finds the first {...} of an answer that wraps its JSON in
// prose or a code fence.
var jsonObject = regexp.MustCompile(`(?s)\{.*\}`)

// ParseJudgement reads the judge's answer; ok is false for one that is
// not a verdict it knows (a malformed answer).
func ParseJudgement(answer string) (j Judgement, ok bool) {
	m := jsonObject.FindString(answer)
	if m == "" || json.Unmarshal([]byte(m), &j) != nil {
		return Judgement{}, false
	}
	j.Verdict = Verdict(strings.ToLower(strings.TrimSpace(string(j.Verdict))))
	j.Reason = strings.TrimSpace(j.Reason)
	switch j.Verdict {
	case VerdictDone, VerdictContinue, VerdictBlocked:
		return j, true
	case VerdictWait:
		if j.WaitSeconds > 0 || j.Delegation != "" || j.Process != "" {
			return j, true
		}
	}
	return Judgement{}, false
}

// MaxMalformed judge answers in a row pause a goal.
const MaxMalformed = 3

// Step is what a goal does after one judgement.
type Step struct {
	Goal Goal // the goal as it is to be written
	// Continue queues a continuation prompt (Continuation).
	Continue bool
	// WaitUntil, Delegation, Process: no judgement, and no
	// continuation, until the time passes or the thing ends.
	WaitUntil  time.Time
	Delegation string
	Process    string
	// Tell is what the user is told, when anything.
	Tell string
}

// Decide is what goal does after a turn: j is the judge's reading,
// ok false for a malformed answer, failed true when the judge could
// not be asked (an API error). The judge fails open: a malformed answer
// or an error continues, but MaxMalformed malformed answers in a row
// pause the goal (errors do not count). A continuation past the budget
// pauses it too.
func Decide(goal Goal, j Judgement, ok, failed bool, now time.Time) Step {
	switch {
	case failed:
		j = Judgement{Verdict: VerdictContinue}
	case !ok:
		goal.Malformed++
		if goal.Malformed >= MaxMalformed {
			goal.Status = GoalPaused
			goal.Reason = fmt.Sprintf("Paused: the goal's judge gave %d unreadable answers in a row. /goal resume goes on.", goal.Malformed)
			return Step{Goal: goal, Tell: goal.Reason}
		}
		j = Judgement{Verdict: VerdictContinue}
	default:
		goal.Malformed = 0
	}
	switch j.Verdict {
	case VerdictDone:
		goal.Status, goal.Reason = GoalDone, j.Reason
		tell := "Goal reached: " + goal.Objective
		if j.Reason != "" {
			tell += "\n" + j.Reason
		}
		return Step{Goal: goal, Tell: tell}
	case VerdictBlocked:
		goal.Status = GoalBlocked
		goal.Reason = "Blocked: " + cmp.Or(j.Reason, "the judge found it cannot go on") + ". /goal resume goes on."
		return Step{Goal: goal, Tell: goal.Reason}
	case VerdictWait:
		s := Step{Goal: goal, Delegation: j.Delegation, Process: j.Process}
		if j.WaitSeconds > 0 {
			s.WaitUntil = now.Add(time.Duration(j.WaitSeconds) * time.Second)
		}
		return s
	}
	next, ok := goal.continued()
	if !ok {
		return Step{Goal: next, Tell: next.Reason}
	}
	return Step{Goal: next, Continue: true}
}

// Continuation is the prompt a continuation turn runs with.
func Continuation(goal Goal) string {
	if goal.Turns == 0 {
		s := "Work toward this goal: " + goal.Objective
		if goal.Contract != "" {
			s += "\nIt is done when: " + goal.Contract
		}
		return s + "\n(you will be asked to go on after each turn until it is judged done; say plainly what is left when you stop)"
	}
	s := "Continue working toward the goal: " + goal.Objective
	if goal.Contract != "" {
		s += "\nIt is done when: " + goal.Contract
	}
	return s + fmt.Sprintf("\n(continuation %d of %d; say plainly what is left when you stop)", goal.Turns, goal.MaxTurns)
}

// untilSystem tells the judge of a loop's --until its task.
const untilSystem = `You judge whether a condition a user set holds, from the latest reply of an agent that checks on it. Answer with one JSON object and nothing else: {"met":true} or {"met":false}.`

// UntilPrompt is what the judge reads for a loop's condition after a
// tick that replied reply, within JudgeInputMax characters.
func UntilPrompt(cond, reply string) (system, user string) {
	return untilSystem, judgeInput("Condition: "+cond, "\n\nThe agent's latest reply:\n", reply)
}

// ParseMet reads the --until judge's answer; ok is false for one that
// is not readable.
func ParseMet(answer string) (met, ok bool) {
	var v struct {
		Met *bool `json:"met"`
	}
	m := jsonObject.FindString(answer)
	if m == "" || json.Unmarshal([]byte(m), &v) != nil || v.Met == nil {
		return false, false
	}
	return *v.Met, true
}
