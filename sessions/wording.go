package sessions

import (
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// What herald says in a chat about its turns and its commands. Every
// text of this package (and of the agent's turns, sessions/agent) that a
// person reads is made here, from the facts the logic hands over, so the
// wording is read and changed in one place.

// Notices a turn ends with (KindNotice).
const (
	// noticeStopped answers /stop from the stopped turn.
	noticeStopped = "Stopped."
	// noticeStoppedByNew ends a turn /new stopped, for an origin that
	// awaits an answer to each message.
	noticeStoppedByNew = "Stopped: the conversation was started anew."
	// noticeInterrupted ends a turn a newer message interrupted, for an
	// origin that awaits an answer to each message.
	noticeInterrupted = "Interrupted by a newer message; the reply to it answers this one too."
	// noticeSteered answers a message that was added to a running turn.
	noticeSteered = "Added to the turn that was running; its reply answers this one too."
	// noticeStaleSession heads a synthetic entry shown instead of run.
	noticeStaleSession = "This arrived for a session that was started anew since, so it was not acted on:\n\n"
	// noticeNotSaved and noticeTooLarge replace a turn's result the
	// store refused.
	noticeNotSaved = "I could not save this turn's result, so it was dropped."
	noticeTooLarge = "This turn's result was too large to save, so it was dropped. Try asking for less at once."
)

// noticeDropped answers an entry dropped after failing failures times.
func noticeDropped(failures int) string {
	return fmt.Sprintf("I could not answer this message: it failed %d times, so I dropped it.", failures)
}

// noticeUnknownCommand answers a control entry of a command this
// process does not know.
func noticeUnknownCommand(name string) string {
	return fmt.Sprintf("/%s is not available in this version of herald.", name)
}

// TurnLimitNotice ends an agent's turn that made limit model calls, the
// most a turn may make.
func TurnLimitNotice(limit int) string {
	return fmt.Sprintf("I stopped this turn after %d model calls, the limit per turn (model.max_iterations). Say \"continue\" and I will carry on from here.", limit)
}

// Answers of the core commands (KindCommand).
const (
	answerNewSession = "Started a fresh session. What I remember about you is kept."
)

// answerNotYet answers a command a later part of herald brings.
func answerNotYet(name string) string {
	return fmt.Sprintf("/%s is not available yet in this version of herald. /help lists what is.", name)
}

// answerUsage answers /queue or /steer without a message.
func answerUsage(name string) string { return fmt.Sprintf("Usage: /%s MESSAGE", name) }

// answerHelp is /help: cmds, one a line.
func answerHelp(cmds []Command) string {
	var b strings.Builder
	b.WriteString("Commands:")
	for _, cmd := range cmds {
		b.WriteString("\n/" + cmd.Name)
		if cmd.Args != "" {
			b.WriteString(" " + cmd.Args)
		}
		for _, a := range cmd.Aliases {
			b.WriteString(" (/" + a + ")")
		}
		b.WriteString(" — " + cmd.Summary)
	}
	b.WriteString("\nAnything else is a message for the agent.")
	return b.String()
}

// answerStop is /stop's answer, naming what the stop reaches: the
// running turn, when one runs (turn is its description, see describe),
// and what other parts stop for the conversation.
func answerStop(running bool, turn string, others []string) string {
	other := strings.Join(others, " and ")
	switch {
	case running && other != "":
		return "Stopping the running turn" + turn + " and " + other + "."
	case running:
		return "Stopping the running turn" + turn + "."
	case other != "":
		return "No turn is running; stopping " + other + "."
	}
	return "Nothing is running."
}

// answerStatus is /status's answer: whether a turn runs (turn is its
// description, see describe), the busy-input mode, and the lines other
// parts add.
func answerStatus(running bool, turn string, mode BusyInputMode, lines []string) string {
	var b strings.Builder
	if running {
		b.WriteString("Running a turn" + turn + ".")
	} else {
		b.WriteString("Idle: no turn is running.")
	}
	fmt.Fprintf(&b, "\nBusy input mode: %s — %s", mode, mode.explain())
	for _, line := range lines {
		b.WriteString("\n" + line)
	}
	return b.String()
}

// explain says what a message does in mode m, for /status.
func (m BusyInputMode) explain() string {
	switch m {
	case BusyQueue:
		return "a new message waits until the running turn ends."
	case BusySteer:
		return "a new message is added to the running turn."
	}
	return "a new message stops the running turn and runs next."
}

// describe is " (12s): “what it answers”" for /stop and /status.
func (rt RunningTurn) describe(now time.Time) string {
	var parts []string
	if !rt.Since.IsZero() {
		if d := now.Sub(rt.Since); d >= 0 {
			parts = append(parts, " ("+d.Round(time.Second).String()+")")
		}
	}
	if rt.Text != "" {
		parts = append(parts, ": “"+rt.Text+"”")
	}
	return strings.Join(parts, "")
}

// actsOn says which conversation l is, for a command's answer.
func (l Latest) actsOn() string {
	s := "in the thread of " + l.At.UTC().Format("Jan 2 15:04 UTC")
	if l.Text != "" {
		s += fmt.Sprintf(", “%s”", l.Text)
	}
	return s
}

// withActsOn is text with what in's command acted on said first, when
// the router pointed it at another conversation (MetaActsOn).
func withActsOn(in Inbound, text string) string {
	if on := in.Meta[MetaActsOn]; on != "" {
		return "(" + on + ") " + text
	}
	return text
}

// CommandError is err in words for a chat: the reason of a refusal a
// person can act on (Invalid, NotFound, Conflict, TooLarge), else a
// plain "try again".
func CommandError(err error) string {
	switch errs.CodeOf(err) {
	case errs.Invalid, errs.NotFound, errs.Conflict, errs.TooLarge:
		return errs.Reason(err) + "."
	}
	return "That did not work just now; try again in a moment."
}
