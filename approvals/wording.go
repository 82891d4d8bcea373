package approvals

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/tools"
)

// What approvals says, to the model (an Ask's refusal) and to people
// (the question, its end, the commands' answers), in one place.

// maxShown bounds the action a question shows.
const maxShown = 1500

func shown(s string) string {
	if utf8.RuneCountInString(s) <= maxShown {
		return s
	}
	return string([]rune(s)[:maxShown-1]) + "…"
}

// refusedText is the model's refusal of a command approvals.deny
// matches.
func refusedText(pattern string) string {
	return fmt.Sprintf("refused: the command matches approvals.deny (pattern %s), which never runs, approved or not: "+
		"reach the goal another way, or tell the user the command to run themselves", pattern)
}

// unattendedText is the model's refusal where nobody can be asked.
func unattendedText(who string, req tools.ApprovalRequest) string {
	where := "this turn has no chat to ask in"
	switch who {
	case whoCron:
		where = "this is a scheduled job's run, with nobody to ask"
	case whoChild:
		where = "this is a sub-agent, with nobody to ask (delegation.subagent_auto_approve is off, and delegation.subagent_approvals is not ask)"
	}
	return fmt.Sprintf("refused: %s needs a person's approval (%s), but %s and approvals.unattended is deny. "+
		"Reach the goal another way, or say in your report what a person should run or allow; "+
		"an operator may allow it for good (herald approvals, or Always allow in a chat)", what(req.Tool), req.Reason, where)
}

func what(tool string) string {
	if tool == "terminal" {
		return "the command"
	}
	return "the tool " + tool
}

// questionText is the question a person is asked.
func questionText(a Approval, timeout time.Duration) string {
	var b strings.Builder
	if a.Tool == "terminal" {
		fmt.Fprintf(&b, "Approval needed: run this command?\n```\n%s\n```\n", shown(a.Action))
	} else {
		fmt.Fprintf(&b, "Approval needed: call the tool %s with\n```\n%s\n```\n", a.Tool, shown(a.Action))
	}
	fmt.Fprintf(&b, "Why it asks: %s.\n", a.Reason)
	fmt.Fprintf(&b, "No answer within %s is a deny. Or type /approve [once|session|always] %s, or /deny %s.", timeout, a.ID, a.ID)
	return b.String()
}

// decidedText says how a was decided, in place of its question.
func decidedText(a Approval) string {
	act := "the command"
	if a.Tool != "terminal" {
		act = "the tool " + a.Tool
	}
	if len(a.Action) > 0 {
		act += " `" + shown(oneLine(a.Action)) + "`"
	}
	switch a.Decision {
	case Once:
		return fmt.Sprintf("Allowed once by %s: %s.", a.DecidedBy, act)
	case Session:
		return fmt.Sprintf("Allowed for this session by %s: %s (and %s until /new).", a.DecidedBy, act, a.Pattern)
	case Always:
		return fmt.Sprintf("Always allowed by %s: %s (and %s from now on).", a.DecidedBy, act, a.Pattern)
	case Deny:
		return fmt.Sprintf("Denied by %s: %s.", a.DecidedBy, act)
	case Timeout:
		return fmt.Sprintf("No answer in time: %s was denied.", act)
	}
	return fmt.Sprintf("This approval expired: the turn that asked for %s ended.", act)
}

func oneLine(s string) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if cut {
		s += " …"
	}
	return s
}

// outcomeText is what the model reads of a decision that does not run
// the action.
func outcomeText(a Approval, timeout time.Duration) string {
	switch a.Decision {
	case Deny:
		return fmt.Sprintf("denied by %s: the user did not allow %s; do not try it another way without asking", a.DecidedBy, what(a.Tool))
	case Timeout:
		return fmt.Sprintf("no answer within %s: treated as a deny; do not try it another way without asking", timeout)
	}
	return "the approval expired before it was answered; ask the user before you try again"
}

// vanishedText is the model's refusal when its approval is gone from
// the store.
const vanishedText = "the approval this waited for is gone (it was removed); ask the user before you try again"

// What the commands answer.
const (
	noPendingText = "Nothing here waits for an approval."
	expiredText   = "This approval has expired."
	notYoursText  = "Only the person whose message asked for this, or an approvals admin, may answer it."
	usageText     = "Usage: /approve [once|session|always] [ID], /deny [ID]."
)

// decidedBeforeText answers a press on an approval already decided.
func decidedBeforeText(a Approval) string {
	switch a.Decision {
	case Expired:
		return expiredText
	case Timeout:
		return expiredText + " Nobody answered in time, so it was denied."
	}
	return fmt.Sprintf("Already decided by %s (%s).", a.DecidedBy, a.Decision)
}
