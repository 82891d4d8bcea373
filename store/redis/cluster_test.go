package redis

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/storetest"
)

// TestConformanceOnCluster runs the suite on a real Redis Cluster (three
// primaries, three replicas), each place a prefix of its own on the one
// cluster the test starts: every script must touch one slot there, or
// the cluster refuses it.
func TestConformanceOnCluster(t *testing.T) {
	c := testkit.StartRedisCluster(t)
	var n atomic.Int64
	var restart sync.Mutex
	storetest.RunAll(t, storetest.Backend{
		Name: "redis-cluster",
		New: func(t *testing.T) storetest.Place {
			return clusterPlace{c: c, prefix: c.Prefix() + strconv.FormatInt(n.Add(1), 10) + ":", restart: &restart}
		},
	})
}

// clusterPlace is a prefix on the test's cluster.
type clusterPlace struct {
	c       *testkit.RedisCluster
	prefix  string
	restart *sync.Mutex
}

func (p clusterPlace) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) storetest.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := Open(ctx, Options{URL: p.c.URL(), Cluster: true, Prefix: p.prefix, Clock: clk, Limits: lim})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (p clusterPlace) Restart(t *testing.T) {
	p.restart.Lock()
	defer p.restart.Unlock()
	p.c.Restart(t)
}
