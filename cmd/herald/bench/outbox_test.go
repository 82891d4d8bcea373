package bench

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// A short run on each store sends every backlog and every reply, and the
// figures are times and counts.
func TestOutboxMeasuresEveryRound(t *testing.T) {
	r := testkit.StartRedis(t)
	for _, store := range []string{"sqlite", "redis"} {
		t.Run(store, func(t *testing.T) {
			res, err := Outbox(context.Background(), OutboxOptions{Store: store, Backlog: 40, Rounds: 2, SendTime: time.Millisecond, RedisURL: r.URL(), TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.BareP50Ms <= 0 || res.BareP99Ms < res.BareP50Ms || res.AheadMax < 0 || res.AheadMax > res.Backlog {
				t.Errorf("figures = %+v", res)
			}
		})
	}
}
