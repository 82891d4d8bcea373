package controllers

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
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
	LastReply string        `json:"last_reply,omitempty"`
	Status    LoopStatus    `json:"status"`
	Reason    string        `json:"reason,omitempty"`
	Origin    outbox.Target `json:"origin"`
	CreatedBy string        `json:"created_by,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
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

// Loops keeps the conversations' loops in Store.
type Loops struct {
	Store       Store
	MinInterval time.Duration // loop.min_interval; 0: DefaultLoopMinInterval
}

func (ls *Loops) minInterval() time.Duration {
	return cmp.Or(ls.MinInterval, DefaultLoopMinInterval)
}

// Start adds l to conv as a new loop, whose first tick is due at once,
// and returns its id.
func (ls *Loops) Start(ctx context.Context, conv string, l Loop) (string, error) {
	now, err := ls.Store.Now(ctx)
	if err != nil {
		return "", err
	}
	l.Status, l.CreatedAt = LoopActive, now
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	st, err := with(State{Conv: conv, Kind: KindLoop, ID: "lp_" + hex.EncodeToString(b[:])}, l, now)
	if err != nil {
		return "", err
	}
	if _, err := ls.Store.PutController(ctx, st); err != nil {
		return "", err
	}
	return st.ID, nil
}

// List returns conv's loops by id.
func (ls *Loops) List(ctx context.Context, conv string) ([]State, []Loop, error) {
	all, err := ls.Store.Controllers(ctx, conv)
	if err != nil {
		return nil, nil, err
	}
	var states []State
	var loops []Loop
	for _, st := range all {
		var l Loop
		if st.Kind != KindLoop || json.Unmarshal(st.Data, &l) != nil {
			continue
		}
		states, loops = append(states, st), append(loops, l)
	}
	return states, loops, nil
}

// Stop removes conv's loop id, or every loop of conv when id is "", and
// returns how many it removed. Errors: NotFound (no such loop).
func (ls *Loops) Stop(ctx context.Context, conv, id string) (int, error) {
	states, _, err := ls.List(ctx, conv)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range states {
		if id != "" && st.ID != id {
			continue
		}
		// A loop's id is new with each loop, so one made since never
		// takes the place of the state removed.
		if err := remove(ctx, ls.Store, "controllers.Loops.Stop", st.Key()); err != nil && !errs.Is(err, errs.NotFound) {
			return n, err
		}
		n++
	}
	if id != "" && n == 0 {
		return 0, errs.E("controllers.Loops.Stop", errs.NotFound, "this conversation has no loop %s: /loop list shows them", id)
	}
	return n, nil
}

// Describe is a loop in one line, for /loop list and /status.
func (l Loop) Describe(id string) string {
	pace := l.Interval.String()
	if l.Auto {
		pace = "auto, now " + l.Interval.String()
	}
	s := fmt.Sprintf("Loop %s (%s, every %s, %d ticks", id, l.Status, pace, l.Ticks)
	if l.Times > 0 {
		s += fmt.Sprintf(" of %d", l.Times)
	}
	s += "): " + l.Prompt
	if l.Until != "" {
		s += " — until " + l.Until
	}
	if l.Reason != "" {
		s += "\n  " + l.Reason
	}
	return s
}
