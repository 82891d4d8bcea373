package bench

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// A short run on each store makes every request on both sides and
// counts each use in the store; a pool of one key asks the store
// nothing on the requests' path, one of several once for each
// conversation's first request and key.
func TestPoolMeasuresEveryRequest(t *testing.T) {
	r := testkit.StartRedis(t)
	for _, store := range []string{"sqlite", "redis"} {
		t.Run(store, func(t *testing.T) {
			one, err := Pool(context.Background(), PoolOptions{Store: store, Requests: 200, Keys: 1, Clients: 2, RedisURL: r.URL(), TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if one.Counted != 200 {
				t.Errorf("the store counted %d uses, want one a request", one.Counted)
			}
			if one.P50Us <= 0 || one.P99Us < one.P50Us || one.BareP50Us <= 0 || one.BareP99Us < one.BareP50Us {
				t.Errorf("figures = %+v", one)
			}
			// The first request reads the pool; the uses are written once
			// a second, and a short run ends before the first write.
			if one.StoreCalls > 3 {
				t.Errorf("a pool of one key made %d calls of the store for 200 requests", one.StoreCalls)
			}
			several, err := Pool(context.Background(), PoolOptions{Store: store, Requests: 200, Keys: 3, Clients: 2, Conversations: 10, RedisURL: r.URL(), TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if several.Counted != 200 || several.StoreCalls < 10 || several.StoreCalls > 25 {
				t.Errorf("3 keys, 10 conversations: %d uses counted, %d store calls; want 200, and a read and a write for each conversation's first request", several.Counted, several.StoreCalls)
			}
		})
	}
}
