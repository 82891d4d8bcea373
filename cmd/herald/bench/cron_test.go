package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// As with the other benches, the figures are not judged, only that a
// tiny run completes, its counts add up and it removes what it made.
// The jobs repeat at the shortest interval a job may have, for one
// slot, so each phase takes a few seconds of the real clock.
func TestCron(t *testing.T) {
	tests := []struct {
		desc      string
		opt       func(t *testing.T) CronOptions
		instances int // of the second phase; 0: none runs
	}{
		{
			desc: "sqlite",
			opt: func(t *testing.T) CronOptions {
				return CronOptions{Store: "sqlite", TempDir: t.TempDir()}
			},
		},
		{
			desc: "redis",
			opt: func(t *testing.T) CronOptions {
				return CronOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL(), TempDir: t.TempDir(), Instances: 3}
			},
			instances: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			opt := tt.opt(t)
			opt.Jobs, opt.Every, opt.Duration = 12, 5*time.Second, time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Cron(ctx, opt)
			if err != nil {
				t.Fatalf("Cron: %v", err)
			}
			if res.Store != opt.Store || res.Jobs != 12 || res.Slots != 1 || res.TargetLatenessP99Ms != CronLatenessTarget(opt.Store) {
				t.Errorf("store, jobs, slots, target = %q, %d, %d, %g; want %q, 12, 1, %g",
					res.Store, res.Jobs, res.Slots, res.TargetLatenessP99Ms, opt.Store, CronLatenessTarget(opt.Store))
			}
			checkCronPhase(t, "one instance", res.Single, 1, 12)
			switch {
			case tt.instances == 0 && res.Multi != nil:
				t.Errorf("a second phase ran on %s: %+v", opt.Store, *res.Multi)
			case tt.instances > 0 && res.Multi == nil:
				t.Errorf("no second phase ran")
			case tt.instances > 0:
				checkCronPhase(t, "instances", *res.Multi, tt.instances, 12)
			}
			assertCleanedUp(t, QueueOptions{Store: opt.Store, RedisURL: opt.RedisURL, TempDir: opt.TempDir})
			if left, err := os.ReadDir(opt.TempDir); err != nil || len(left) != 0 {
				t.Errorf("temp dir keeps %v after the run (%v)", left, err)
			}
		})
	}
}

// checkCronPhase checks that every expected fire ran once and that the
// figures are consistent with one another.
func checkCronPhase(t *testing.T, name string, p CronPhase, instances, fires int) {
	t.Helper()
	sum := 0
	for _, n := range p.PerInstance {
		sum += n
	}
	if p.Instances != instances || len(p.PerInstance) != instances || p.Expected != fires || p.Fires != fires || sum != fires {
		t.Errorf("%s: instances %d (%d counted), expected %d, fires %d (%d by instance); want %d instances and %d fires",
			name, p.Instances, len(p.PerInstance), p.Expected, p.Fires, sum, instances, fires)
	}
	if p.Missed != 0 || p.Double != 0 || p.Stray != 0 || p.Warnings != 0 {
		t.Errorf("%s: missed %d, double %d, stray %d, warnings %d (%s); want none", name, p.Missed, p.Double, p.Stray, p.Warnings, p.FirstWarning)
	}
	if !(0 <= p.LatenessP50Ms && p.LatenessP50Ms <= p.LatenessP99Ms && p.LatenessP99Ms <= p.LatenessMaxMs) {
		t.Errorf("%s: lateness p50 %g, p99 %g, max %g ms; want 0 ≤ p50 ≤ p99 ≤ max", name, p.LatenessP50Ms, p.LatenessP99Ms, p.LatenessMaxMs)
	}
	// One slot: its p99 is the phase's.
	if len(p.SlotP99Ms) != 1 || p.SlotP99Ms[0] != p.LatenessP99Ms {
		t.Errorf("%s: slots' p99 %v, want the one slot's, %g", name, p.SlotP99Ms, p.LatenessP99Ms)
	}
	if p.SlotDoneS*1000 < p.LatenessMaxMs || p.CPUMsPer1000 <= 0 {
		t.Errorf("%s: slot done %g s before the latest start (%g ms), or cpu %g ms per 1,000 fires not positive", name, p.SlotDoneS, p.LatenessMaxMs, p.CPUMsPer1000)
	}
}

func TestCronRejectsBadOptions(t *testing.T) {
	tests := []struct {
		desc string
		opt  CronOptions
	}{
		{desc: "unknown store", opt: CronOptions{Store: "mysql"}},
		{desc: "negative jobs", opt: CronOptions{Store: "sqlite", Jobs: -1}},
		{desc: "interval below the least", opt: CronOptions{Store: "sqlite", Every: time.Second}},
		{desc: "negative duration", opt: CronOptions{Store: "sqlite", Duration: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := Cron(context.Background(), tt.opt); err == nil {
				t.Fatal("Cron succeeded, want an error")
			}
		})
	}
}
