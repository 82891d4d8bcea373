package controllers

import (
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// DefaultHeartbeatMinInterval is the least a heartbeat's interval may be
// (heartbeat.min_interval).
const DefaultHeartbeatMinInterval = 60 * time.Second

// DefaultHeartbeatPrompt is what a heartbeat asks when /heartbeat names
// no prompt.
const DefaultHeartbeatPrompt = "Heartbeat: look over what is in progress and go on with it, or say briefly that nothing needs doing."

// Heartbeat is a conversation's /heartbeat: a prompt that runs every
// Interval while the conversation is idle.
type Heartbeat struct {
	Interval time.Duration `json:"interval"`
	Prompt   string        `json:"prompt"`
	// Anchor is the time its ticks are counted from: set when it is
	// set or resumed, so a resumed heartbeat does not fire at once for
	// the ticks it missed.
	Anchor time.Time `json:"anchor"`
	// Ticks counts the ticks whose turn ran.
	Ticks int `json:"ticks"`
}

// ParseHeartbeat reads "/heartbeat <interval> [prompt]", refusing an
// interval below least (heartbeat.min_interval).
func ParseHeartbeat(args string, least time.Duration) (Heartbeat, error) {
	const op = "controllers.ParseHeartbeat"
	first, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	d, err := time.ParseDuration(first)
	if err != nil {
		return Heartbeat{}, errs.E(op, errs.Invalid, "interval %q: want a duration like 30m or 2h: /heartbeat 30m [prompt]", first)
	}
	if d < least {
		return Heartbeat{}, errs.E(op, errs.Invalid, "interval %s is below the least, %s (heartbeat.min_interval)", d, least)
	}
	h := Heartbeat{Interval: d, Prompt: strings.TrimSpace(rest)}
	if len(h.Prompt) > MaxObjective {
		return Heartbeat{}, errs.E(op, errs.Invalid, "a heartbeat's prompt is at most %d bytes", MaxObjective)
	}
	if h.Prompt == "" {
		h.Prompt = DefaultHeartbeatPrompt
	}
	return h, nil
}

// Due is when h next fires after now: the first tick of its anchor's
// schedule that is not past. Ticks missed while the conversation was
// busy or the gateway down are one tick, not a burst.
func (h Heartbeat) Due(now time.Time) time.Time {
	if h.Interval <= 0 {
		return time.Time{}
	}
	if now.Before(h.Anchor) {
		return h.Anchor.Add(h.Interval)
	}
	n := now.Sub(h.Anchor)/h.Interval + 1
	return h.Anchor.Add(n * h.Interval)
}
