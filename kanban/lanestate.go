package kanban

import (
	"context"
	"strconv"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// LaneState is what every instance knows of a lane, kept in the store
// so that each dispatcher honours it and it outlives a restart: its
// failures in a row (the breaker's count) and the pause that holds its
// cards back, after a rate limit or when the breaker tripped.
type LaneState struct {
	Lane        string    `json:"lane"`
	Failures    int       `json:"failures,omitempty"`
	PausedUntil time.Time `json:"paused_until,omitzero"` // by the store's clock
	Reason      string    `json:"reason,omitempty"`      // why it is paused
	UpdatedAt   time.Time `json:"updated_at"`
	Version     int64     `json:"version"`
}

// Paused reports whether l holds its lane's cards back at now.
func (l LaneState) Paused(now time.Time) bool { return now.Before(l.PausedUntil) }

// CheckLaneState refuses, with Invalid, a lane state without a lane.
func CheckLaneState(op string, l LaneState) error {
	if l.Lane == "" {
		return errs.E(op, errs.Invalid, "a lane's state needs the lane's name")
	}
	return nil
}

// laneStates reads every lane's state, by name.
func (s *Service) laneStates(ctx context.Context) (map[string]LaneState, error) {
	ls, err := s.Store.Lanes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]LaneState, len(ls))
	for _, l := range ls {
		out[l.Lane] = l
	}
	return out, nil
}

// PausedLanes returns the lanes paused now, by name.
func (s *Service) PausedLanes(ctx context.Context) ([]LaneState, error) {
	now, err := s.Store.Now(ctx)
	if err != nil {
		return nil, err
	}
	ls, err := s.Store.Lanes(ctx)
	if err != nil {
		return nil, err
	}
	var out []LaneState
	for _, l := range ls {
		if l.Paused(now) {
			out = append(out, l)
		}
	}
	return out, nil
}

// updateLane writes edit's change of lane's state, read again after a
// conflict; edit reports whether there is anything to write.
func (s *Service) updateLane(ctx context.Context, lane string, edit func(l *LaneState, now time.Time) bool) error {
	const op = "kanban.updateLane"
	for range maxAttempts {
		now, err := s.Store.Now(ctx)
		if err != nil {
			return err
		}
		states, err := s.laneStates(ctx)
		if err != nil {
			return err
		}
		l, ok := states[lane]
		if !ok {
			l = LaneState{Lane: lane}
		}
		if !edit(&l, now) {
			return nil
		}
		l.UpdatedAt = now
		if _, err := s.Store.PutLane(ctx, l); errs.Is(err, errs.Conflict) {
			continue
		} else if err != nil {
			return err
		}
		return nil
	}
	return errs.E(op, errs.Conflict, "lane %s kept changing under this change; try again", lane)
}

// PauseLane holds lane's cards back on every instance for dur from now
// (by the store's clock), or longer when an earlier pause lasts longer.
func (s *Service) PauseLane(ctx context.Context, lane string, dur time.Duration, reason string) error {
	return s.updateLane(ctx, lane, func(l *LaneState, now time.Time) bool {
		until := now.Add(dur)
		if !until.After(l.PausedUntil) {
			return false
		}
		l.PausedUntil, l.Reason = until, reason
		return true
	})
}

// laneFailed counts a failure of lane's; at breakerFailures in a row it
// is paused for breakerPause, and has as many tries again after it. It
// reports whether this failure paused it.
func (s *Service) laneFailed(ctx context.Context, lane string) (bool, error) {
	tripped := false
	err := s.updateLane(ctx, lane, func(l *LaneState, now time.Time) bool {
		l.Failures++
		tripped = l.Failures >= breakerFailures
		if tripped {
			l.Failures = 0
			if until := now.Add(breakerPause); until.After(l.PausedUntil) {
				l.PausedUntil = until
				l.Reason = "its workers failed " + strconv.Itoa(breakerFailures) + " times in a row"
			}
		}
		return true
	})
	return tripped, err
}

// laneSucceeded starts lane's count of failures again.
func (s *Service) laneSucceeded(ctx context.Context, lane string) error {
	return s.updateLane(ctx, lane, func(l *LaneState, _ time.Time) bool {
		if l.Failures == 0 {
			return false
		}
		l.Failures = 0
		return true
	})
}
