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

// place is a redis-server of one test (or a prefix on HERALD_TEST_REDIS_URL).
type place struct{ r *testkit.Redis }

func (p place) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) storetest.Store {
	t.Helper()
	return openDB(t, p.r, clk, lim)
}

func (p place) Restart(t *testing.T) { p.r.Restart(t) }

func backend() storetest.Backend {
	return storetest.Backend{
		Name: "redis",
		New:  func(t *testing.T) storetest.Place { return place{testkit.StartRedis(t)} },
	}
}

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

func TestConformance(t *testing.T) {
	storetest.Run(t, backend())
	t.Run("Delegations", func(t *testing.T) { storetest.RunDelegations(t, backend()) })
	t.Run("Cron", func(t *testing.T) { storetest.RunCron(t, backend()) })
	t.Run("Once", func(t *testing.T) { storetest.RunOnce(t, backend()) })
	t.Run("Pools", func(t *testing.T) { storetest.RunPools(t, backend()) })
	t.Run("Kanban", func(t *testing.T) { storetest.RunKanban(t, backend()) })
	t.Run("Controllers", func(t *testing.T) { storetest.RunControllers(t, backend()) })
	t.Run("Cursors", func(t *testing.T) { storetest.RunCursors(t, backend()) })
}
