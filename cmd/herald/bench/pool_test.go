package bench

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// A short run on each store chooses a key for every request, on both
// sides, and the figures are times.
func TestPoolMeasuresEveryRequest(t *testing.T) {
	r := testkit.StartRedis(t)
	for _, store := range []string{"sqlite", "redis"} {
		t.Run(store, func(t *testing.T) {
			res, err := Pool(context.Background(), PoolOptions{Store: store, Requests: 200, Keys: 3, Clients: 2, RedisURL: r.URL(), TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if res.Counted != 200 {
				t.Errorf("the store counted %d uses, want one a request", res.Counted)
			}
			if res.P50Us <= 0 || res.P99Us < res.P50Us || res.RawP50Us <= 0 || res.RawP99Us < res.RawP50Us {
				t.Errorf("figures = %+v", res)
			}
		})
	}
}
