package redis

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunAll(t, storetest.Backend{
		Name: "redis",
		New:  func(t *testing.T) storetest.Place { return place{testkit.StartRedis(t)} },
	})
}

// place is a redis-server of one test (or a prefix on HERALD_TEST_REDIS_URL).
type place struct{ r *testkit.Redis }

func (p place) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) storetest.Store {
	t.Helper()
	return openDB(t, p.r, clk, lim)
}

func (p place) Restart(t *testing.T) { p.r.Restart(t) }

func openDB(t testing.TB, r *testkit.Redis, clk clock.Clock, lim sessions.Limits) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := Open(ctx, Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk, Limits: lim})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformanceSharded runs the suite on one server in the sharded
// layout a cluster uses, so that every family's routing to its shards is
// checked without a cluster.
func TestConformanceSharded(t *testing.T) {
	storetest.RunAll(t, storetest.Backend{
		Name: "redis-sharded",
		New:  func(t *testing.T) storetest.Place { return shardedPlace{place{testkit.StartRedis(t)}} },
	})
}

// shardedPlace opens its stores with four shards.
type shardedPlace struct{ place }

func (p shardedPlace) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) storetest.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := Open(ctx, Options{URL: p.r.URL(), Prefix: p.r.Prefix(), Clock: clk, Limits: lim, Shards: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
