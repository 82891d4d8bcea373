package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Loop defaults and bounds (loop.min_interval, loop.max_ticks).
const (
	DefaultLoopMinInterval = 30 * time.Second
	LoopIntervalFloor      = 5 * time.Second
	DefaultLoopMaxTicks    = 100
	// A self-paced loop starts at autoStart, doubles while the reply
	// does not change, up to autoMax, and starts again on a change.
	autoStart = 60 * time.Second
	autoMax   = 900 * time.Second
)

// LoopComplete, on a line of its own in a reply, ends the loop.
const LoopComplete = "LOOP_COMPLETE"

var loopCompleteLine = regexp.MustCompile(`(?m)^\s*` + LoopComplete + `\s*$`)

// LoopStatus is where a loop stands.
type LoopStatus string

// The loop statuses.
const (
	LoopActive LoopStatus = "active"
	LoopPaused LoopStatus = "paused" // at loop.max_ticks
	LoopDone   LoopStatus = "done"
)

// Loop is one /loop of a conversation: a prompt run again and again.
type Loop struct {
	Prompt string `json:"prompt"`
	// Interval is a fixed loop's; a self-paced one (Auto) keeps its
	// current pace in Interval.
	Interval time.Duration `json:"interval"`
	Auto     bool          `json:"auto,omitempty"`
	Until    string        `json:"until,omitempty"` // a condition the judge checks after each tick
	Times    int           `json:"times,omitempty"` // 0: no count
	Ticks    int           `json:"ticks"`
	// LastReply is a hash of the last tick's reply, for the pace.
	LastReply string     `json:"last_reply,omitempty"`
	Status    LoopStatus `json:"status"`
	Reason    string     `json:"reason,omitempty"`
}

// ParseLoop reads "/loop <interval>|auto <prompt> [--until C] [--times
// N]", refusing an interval below least (loop.min_interval).
func ParseLoop(args string, least time.Duration) (Loop, error) {
	const op = "controllers.ParseLoop"
	words := strings.Fields(args)
	if len(words) < 2 {
		return Loop{}, errs.E(op, errs.Invalid, "a loop needs an interval (or auto) and a prompt: /loop 10m check the deploy")
	}
	l := Loop{Status: LoopActive}
	if strings.EqualFold(words[0], "auto") {
		l.Auto, l.Interval = true, autoStart
	} else {
		d, err := time.ParseDuration(words[0])
		if err != nil {
			return Loop{}, errs.E(op, errs.Invalid, "interval %q: want a duration like 30s, 10m or 2h, or auto", words[0])
		}
		if d < least {
			return Loop{}, errs.E(op, errs.Invalid, "interval %s is below the least, %s (loop.min_interval)", d, least)
		}
		l.Interval = d
	}
	var err error
	l.Prompt, l.Until, l.Times, err = options(op, words[1:], "--times", "--until")
	if err != nil {
		return Loop{}, err
	}
	switch {
	case l.Prompt == "":
		return Loop{}, errs.E(op, errs.Invalid, "a loop needs a prompt")
	case len(l.Prompt) > MaxObjective || len(l.Until) > MaxObjective:
		return Loop{}, errs.E(op, errs.Invalid, "a loop's prompt and condition are at most %d bytes each", MaxObjective)
	}
	return l, nil
}

// Ticked is l after a tick whose reply was reply, under a cap of
// maxTicks (0: none): done on a LOOP_COMPLETE line or its last time,
// paused at the cap (said in Reason), else active with its next pace.
func (l Loop) Ticked(reply string, maxTicks int) Loop {
	l.Ticks++
	sum := sha256.Sum256([]byte(strings.TrimSpace(reply)))
	hash := hex.EncodeToString(sum[:8])
	if l.Auto {
		if hash == l.LastReply {
			l.Interval = min(l.Interval*2, autoMax)
		} else {
			l.Interval = autoStart
		}
	}
	l.LastReply = hash
	switch {
	case loopCompleteLine.MatchString(reply):
		l.Status, l.Reason = LoopDone, "The loop ended: its reply said "+LoopComplete+"."
	case l.Times > 0 && l.Ticks >= l.Times:
		l.Status, l.Reason = LoopDone, fmt.Sprintf("The loop ran its %d times.", l.Times)
	case maxTicks > 0 && l.Ticks >= maxTicks:
		l.Status, l.Reason = LoopPaused, fmt.Sprintf("The loop is paused: it ran %d ticks (loop.max_ticks).", maxTicks)
	}
	return l
}
