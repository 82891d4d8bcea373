package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// As with the other benches, the figures are not judged, only that a
// tiny run completes, every card ends as it should once and the run
// removes what it made.
func TestKanban(t *testing.T) {
	tests := []struct {
		desc string
		opt  func(t *testing.T) KanbanOptions
	}{
		{
			desc: "sqlite",
			opt: func(t *testing.T) KanbanOptions {
				return KanbanOptions{Store: "sqlite", TempDir: t.TempDir()}
			},
		},
		{
			desc: "redis",
			opt: func(t *testing.T) KanbanOptions {
				return KanbanOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL(), TempDir: t.TempDir()}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			opt := tt.opt(t)
			opt.Cycles, opt.Clients, opt.Cards, opt.ReferencePerS = 20, []int{1, 4, 32}, 20, 100
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Kanban(ctx, opt)
			if err != nil {
				t.Fatalf("Kanban: %v", err)
			}
			if res.Store != opt.Store || len(res.Cycles) != 3 || res.Dispatch == nil {
				t.Fatalf("store %q, %d cycle phases, dispatch %v; want %q, 3 and one", res.Store, len(res.Cycles), res.Dispatch, opt.Store)
			}
			// Twice the reference at 1 client on SQLite, five times on
			// Redis; ten times at 32.
			targets := map[string][]float64{"sqlite": {200, 0, 1000}, "redis": {500, 0, 1000}}[opt.Store]
			for i, c := range res.Cycles {
				if c.Clients != opt.Clients[i] || c.Cycles != 20 || c.Done != 20 || c.TargetPerS != targets[i] {
					t.Errorf("phase %d: clients %d, cycles %d, done %d, target %g; want %d, 20, 20, %g",
						i, c.Clients, c.Cycles, c.Done, c.TargetPerS, opt.Clients[i], targets[i])
				}
				if c.CyclesPerS <= 0 || c.RawPerS <= 0 || c.Ratio <= 0 || c.P50Ms > c.P99Ms || c.RawP50Ms > c.RawP99Ms || c.CPUUsPerCycle <= 0 {
					t.Errorf("phase %d: figures not consistent: %+v", i, c)
				}
			}
			d := *res.Dispatch
			if d.Cards != 20 || d.Started != 20 || d.Double != 0 || d.Running != 20 || d.Warnings != 0 {
				t.Errorf("dispatch: cards %d, started %d, double %d, running %d, warnings %d (%s); want 20, 20, 0, 20, 0",
					d.Cards, d.Started, d.Double, d.Running, d.Warnings, d.FirstWarning)
			}
			if d.AllStartedS <= 0 || d.RawS <= 0 || d.CardsPerS <= 0 || d.Ratio <= 0 {
				t.Errorf("dispatch: figures not positive: %+v", d)
			}
			assertCleanedUp(t, QueueOptions{Store: opt.Store, RedisURL: opt.RedisURL, TempDir: opt.TempDir})
			if left, err := os.ReadDir(opt.TempDir); err != nil || len(left) != 0 {
				t.Errorf("temp dir keeps %v after the run (%v)", left, err)
			}
		})
	}
}

func TestKanbanRejectsBadOptions(t *testing.T) {
	tests := []struct {
		desc string
		opt  KanbanOptions
	}{
		{desc: "unknown store", opt: KanbanOptions{Store: "mysql"}},
		{desc: "negative cycles", opt: KanbanOptions{Store: "sqlite", Cycles: -1}},
		{desc: "no clients", opt: KanbanOptions{Store: "sqlite", Clients: []int{1, 0}}},
		{desc: "negative reference", opt: KanbanOptions{Store: "sqlite", ReferencePerS: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := Kanban(context.Background(), tt.opt); err == nil {
				t.Fatal("Kanban succeeded, want an error")
			}
		})
	}
}
