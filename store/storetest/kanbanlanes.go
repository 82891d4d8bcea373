package storetest

import (
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/sessions"
)

// runKbLanes: a lane's state (its breaker's count, its pause) is
// written by compare-and-set, read by every handle, and outlives a
// restart.
func runKbLanes(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		if ls, err := f.kb().Lanes(f.ctx); err != nil || len(ls) != 0 {
			t.Fatalf("Lanes of a new store = %+v, %v", ls, err)
		}
		until := t0.Add(30 * time.Minute)
		q, err := f.kb().PutLane(f.ctx, kanban.LaneState{Lane: "quota", PausedUntil: until, Reason: "rate limited", UpdatedAt: t0})
		if err != nil || q.Version != 1 {
			t.Fatalf("PutLane = %+v, %v", q, err)
		}
		if _, err := f.kb().PutLane(f.ctx, kanban.LaneState{Lane: "coder", Failures: 2, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		_, err = f.kb().PutLane(f.ctx, kanban.LaneState{Lane: "quota", Failures: 1})
		wantCode(t, "a second new state of a lane", err, errs.Conflict)
		q.Failures = 1
		q2, err := f.kb().PutLane(f.ctx, q)
		if err != nil || q2.Version != 2 {
			t.Fatalf("an update = %+v, %v", q2, err)
		}
		_, err = f.kb().PutLane(f.ctx, q)
		wantCode(t, "an update from a stale version", err, errs.Conflict)
		_, err = f.kb().PutLane(f.ctx, kanban.LaneState{Lane: "gpu", Version: 3})
		wantCode(t, "an update of a lane with no state", err, errs.NotFound)
		_, err = f.kb().PutLane(f.ctx, kanban.LaneState{})
		wantCode(t, "a state without a lane", err, errs.Invalid)

		f.reopen(restart)
		ls, err := f.kb().Lanes(f.ctx)
		if err != nil || len(ls) != 2 {
			t.Fatalf("Lanes after a reopen = %+v, %v", ls, err)
		}
		c, q := ls[0], ls[1]
		if c.Lane != "coder" || c.Failures != 2 || c.Version != 1 {
			t.Errorf("lane coder = %+v", c)
		}
		if q.Lane != "quota" || !q.PausedUntil.Equal(until) || q.Reason != "rate limited" || q.Failures != 1 || q.Version != 2 {
			t.Errorf("lane quota = %+v, want paused until %s, version 2", q, until)
		}
	})
}
