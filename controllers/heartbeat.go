package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// DefaultHeartbeatMinInterval is the least a heartbeat's interval may be
// (heartbeat.min_interval), and the floor of that setting: a heartbeat
// runs a whole turn of the model each time.
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
	// Off: /heartbeat off. The state stays, so that its version goes on
	// rising: a tick that read it before cannot write over one set since.
	Off       bool          `json:"off,omitempty"`
	Origin    outbox.Target `json:"origin"`
	CreatedBy string        `json:"created_by,omitempty"`
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

// Heartbeats keeps the conversations' heartbeats in Store.
type Heartbeats struct {
	Store       Store
	MinInterval time.Duration // heartbeat.min_interval; below DefaultHeartbeatMinInterval (0 too): that
}

func (hs *Heartbeats) minInterval() time.Duration {
	return max(hs.MinInterval, DefaultHeartbeatMinInterval)
}

// Set gives conv heartbeat h, in place of any it had, anchored at now:
// its first tick is an interval on.
func (hs *Heartbeats) Set(ctx context.Context, conv string, h Heartbeat) (Heartbeat, error) {
	k := Key{Conv: conv, Kind: KindHeartbeat}
	for range maxAttempts {
		now, err := hs.Store.Now(ctx)
		if err != nil {
			return Heartbeat{}, err
		}
		cur, err := hs.Store.Controller(ctx, k)
		switch {
		case errs.Is(err, errs.NotFound):
			cur = State{Conv: conv, Kind: KindHeartbeat}
		case err != nil:
			return Heartbeat{}, err
		}
		h.Anchor = now
		st, err := with(cur, h, h.Due(now))
		if err != nil {
			return Heartbeat{}, err
		}
		if _, err = hs.Store.PutController(ctx, st); !errs.Is(err, errs.Conflict) {
			return h, err
		}
	}
	return Heartbeat{}, errs.E("controllers.Heartbeats.Set", errs.Conflict, "the heartbeat kept changing; try again")
}

// Get returns conv's heartbeat and when it next fires. Errors: NotFound.
func (hs *Heartbeats) Get(ctx context.Context, conv string) (Heartbeat, time.Time, error) {
	st, err := hs.Store.Controller(ctx, Key{Conv: conv, Kind: KindHeartbeat})
	if err != nil {
		return Heartbeat{}, time.Time{}, err
	}
	var h Heartbeat
	if err := json.Unmarshal(st.Data, &h); err != nil {
		return Heartbeat{}, time.Time{}, errs.E("controllers.Heartbeats.Get", errs.Internal, "the heartbeat of %s is not readable: %v", conv, err)
	}
	if h.Off {
		return Heartbeat{}, time.Time{}, errs.E("controllers.Heartbeats.Get", errs.NotFound, "%s has no heartbeat", conv)
	}
	return h, st.DueAt, nil
}

// Off removes conv's heartbeat. Errors: NotFound.
func (hs *Heartbeats) Off(ctx context.Context, conv string) error {
	const op = "controllers.Heartbeats.Off"
	for range maxAttempts {
		st, err := hs.Store.Controller(ctx, Key{Conv: conv, Kind: KindHeartbeat})
		if err != nil {
			return err
		}
		var h Heartbeat
		if json.Unmarshal(st.Data, &h) == nil && h.Off {
			return errs.E(op, errs.NotFound, "%s has no heartbeat", conv)
		}
		if st, err = with(st, Heartbeat{Off: true}, time.Time{}); err != nil {
			return err
		}
		if _, err = hs.Store.PutController(ctx, st); !errs.Is(err, errs.Conflict) {
			return err
		}
	}
	return errs.E(op, errs.Conflict, "the heartbeat kept changing; try again")
}

// Describe is a heartbeat in a line, for /heartbeat status and /status.
func (h Heartbeat) Describe(due time.Time) string {
	s := fmt.Sprintf("Heartbeat every %s (%d ticks run)", h.Interval, h.Ticks)
	if !due.IsZero() {
		s += ", next at " + due.UTC().Format(time.RFC3339)
	}
	return s + ": " + h.Prompt
}
