package bench

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// A short run on each store answers every question and runs every
// command once a turn (the bench fails on a command that started twice
// or never), and its figures are times: on Redis with the press on a
// second gateway too.
func TestApprovalsRunsEachCommandOncePerPress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opt   func(t *testing.T) ApprovalsOptions
		kinds int
	}{
		{"sqlite", func(t *testing.T) ApprovalsOptions {
			return ApprovalsOptions{Store: "sqlite", TempDir: t.TempDir()}
		}, 3},
		{"redis", func(t *testing.T) ApprovalsOptions {
			return ApprovalsOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL(), TempDir: t.TempDir()}
		}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := tc.opt(t)
			opt.Rounds = 4
			res, err := Approvals(context.Background(), opt)
			if err != nil {
				t.Fatal(err)
			}
			if want := (opt.Rounds + approvalWarmup) * tc.kinds; res.Started != want {
				t.Errorf("%d commands started, want %d", res.Started, want)
			}
			figures := [][2]float64{{res.PressP50Ms, res.PressP99Ms}, {res.APIP50Ms, res.APIP99Ms}, {res.RefP50Ms, res.RefP99Ms}}
			if tc.kinds == 4 {
				figures = append(figures, [2]float64{res.OtherP50Ms, res.OtherP99Ms})
			} else if res.OtherP50Ms != 0 {
				t.Errorf("a press on another gateway measured on SQLite: %+v", res)
			}
			for _, f := range figures {
				if f[0] <= 0 || f[1] < f[0] {
					t.Errorf("figures = %+v", res)
				}
			}
		})
	}
}
