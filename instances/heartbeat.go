package instances

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Defaults for HeartbeatOptions.
const (
	// DefaultEvery is how often a process renews its record.
	DefaultEvery = 5 * time.Second
	// DefaultGap is the least time between two beats: a change of the
	// counts is recorded this soon, and no sooner after the last beat.
	DefaultGap = time.Second
	// ttlBeats is how many beats a record outlives the last: a process
	// that missed them is gone from the roll.
	ttlBeats = 3
)

// Minute is the span Instance.Minute counts over.
const Minute = time.Minute

// beatTimeout bounds one beat's write, and the last one's removal.
const beatTimeout = 5 * time.Second

// HeartbeatOptions configure NewHeartbeat.
type HeartbeatOptions struct {
	Store Store // required
	// Self is this process: ID (required), Host, PID, Version, StartedAt.
	Self Instance
	// Tally counts what this process does; nil records zeros.
	Tally *Tally
	// Every is how often the record is renewed; it lives three of them.
	// 0 means DefaultEvery.
	Every time.Duration
	// Gap is the least time between beats; 0 means DefaultGap.
	Gap    time.Duration
	Clock  clock.Clock  // nil: the wall clock
	Logger *slog.Logger // nil: slog.Default()
}

// Heartbeat keeps this process's record in the roll: it beats at once,
// then every Every and soon after its counts change (at most once a
// Gap), and removes the record when it shuts down.
type Heartbeat struct {
	o     HeartbeatOptions
	marks []mark // counts as they were at earlier beats, oldest first
	last  time.Time
	loop  bgloop.Loop
}

// mark is the counts as they were at one beat.
type mark struct {
	at     time.Time
	counts Counts
}

// NewHeartbeat returns the heartbeat; Start runs it. Errors: Invalid (no
// store, no id).
func NewHeartbeat(o HeartbeatOptions) (*Heartbeat, error) {
	const op = "instances.NewHeartbeat"
	if o.Store == nil {
		return nil, errs.E(op, errs.Invalid, "no store")
	}
	if err := CheckID(op, o.Self.ID); err != nil {
		return nil, err
	}
	o.Every = cmp.Or(o.Every, DefaultEvery)
	o.Gap = cmp.Or(o.Gap, DefaultGap)
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Self.StartedAt.IsZero() {
		o.Self.StartedAt = o.Clock.Now()
	}
	return &Heartbeat{o: o}, nil
}

// TTL is how long a record of this heartbeat's lives after its beat.
func (h *Heartbeat) TTL() time.Duration { return ttlBeats * h.o.Every }

// Start records this process, then renews the record until Shutdown or
// ctx ends.
func (h *Heartbeat) Start(ctx context.Context) error {
	const op = "instances.Heartbeat.Start"
	if h.loop.Started() {
		return errs.E(op, errs.Conflict, "started before")
	}
	h.marks = []mark{{at: h.o.Clock.Now(), counts: h.o.Tally.Counts()}}
	h.beat(ctx)
	return h.loop.Start(ctx, op, h.run)
}

// Shutdown stops the beats and removes this process from the roll
// within ctx.
func (h *Heartbeat) Shutdown(ctx context.Context) error {
	if err := h.loop.Stop(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), beatTimeout)
	defer cancel()
	if err := h.o.Store.Leave(ctx, h.o.Self.ID); err != nil {
		h.o.Logger.Warn("removing this process from the instances failed; its record runs out", "err", err)
	}
	return nil
}

func (h *Heartbeat) run(ctx context.Context) {
	tick := h.o.Clock.NewTicker(h.o.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		case <-h.o.Tally.Changed():
			if !h.waitGap(ctx) {
				return
			}
		}
		// The beat reads every count: a change made meanwhile is in it.
		select {
		case <-h.o.Tally.Changed():
		default:
		}
		h.beat(ctx)
	}
}

// waitGap waits until a Gap has passed since the last beat; false when
// ctx ended first.
func (h *Heartbeat) waitGap(ctx context.Context) bool {
	wait := h.last.Add(h.o.Gap).Sub(h.o.Clock.Now())
	if wait <= 0 {
		return true
	}
	return clock.SleepOn(ctx, h.o.Clock, wait)
}

// beat records this process now, with its counts over the last minute.
// A failure is logged: the next beat tries again.
func (h *Heartbeat) beat(ctx context.Context) {
	now := h.o.Clock.Now()
	h.last = now
	in := h.o.Self
	in.Minute = h.minute(now, h.o.Tally.Counts())
	ctx, cancel := context.WithTimeout(ctx, beatTimeout)
	defer cancel()
	if err := h.o.Store.Beat(ctx, in, h.TTL()); err != nil && ctx.Err() == nil {
		h.o.Logger.Warn("recording this process among the instances failed", "err", err)
	}
}

// minute is what cur counts beyond the counts of the newest earlier
// beat at least a Minute ago (or of the oldest kept, while the process
// is younger than that), and keeps cur for the beats to come.
func (h *Heartbeat) minute(now time.Time, cur Counts) Counts {
	h.marks = append(h.marks, mark{at: now, counts: cur})
	cut := now.Add(-Minute)
	i := 0
	for i+1 < len(h.marks) && !h.marks[i+1].at.After(cut) {
		i++
	}
	h.marks = h.marks[i:]
	return cur.Sub(h.marks[0].counts)
}
