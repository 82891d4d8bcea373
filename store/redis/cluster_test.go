package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
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

// TestWaitReplicasRefusesWhatNoReplicaHolds: with WaitReplicas 1, a call
// whose shard's primary has no replica left fails Unavailable rather
// than answering as if its write were safe; other shards go on, and the
// shard answers again once its replica is back.
func TestWaitReplicasRefusesWhatNoReplicaHolds(t *testing.T) {
	c := testkit.StartRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := Open(ctx, Options{URL: c.URL(), Cluster: true, Prefix: c.Prefix(), WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	in := func(conv, id string) sessions.Inbound {
		return sessions.Inbound{Conv: conv, MessageID: id, Text: "hello"}
	}
	// The replicas may still be making their first copy of their primary.
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		_, err := db.Sessions().Append(ctx, in("a", "1"))
		return err == nil, fmt.Sprintf("Append with the replica up: %v", err)
	})
	key := db.convPfx("a") + "{a}:state"
	primary := c.Primary(t, key)
	replicas := c.Replicas(t, key)
	if len(replicas) == 0 {
		t.Fatalf("the primary of %s has no replica", key)
	}
	for _, r := range replicas {
		c.Kill(t, r)
	}
	_, err = db.Sessions().Append(ctx, in("a", "2"))
	if !errs.Is(err, errs.Unavailable) {
		t.Fatalf("Append with no replica of its shard: %v, want Unavailable", err)
	}
	// A conversation whose shard another primary serves is not held up.
	other := ""
	for i := range 100 {
		conv := "b" + strconv.Itoa(i)
		if c.Primary(t, db.convPfx(conv)+"{"+conv+"}:state") != primary {
			other = conv
			break
		}
	}
	if _, err := db.Sessions().Append(ctx, in(other, "1")); err != nil {
		t.Fatalf("Append to %s on another primary: %v", other, err)
	}
	for _, r := range replicas {
		c.Revive(t, r)
	}
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		_, err := db.Sessions().Append(ctx, in("a", "3"))
		return err == nil, fmt.Sprintf("Append once the replica is back: %v", err)
	})
}
