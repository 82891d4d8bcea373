package e2e

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/store/redis"
)

// redisPlace is the Redis a test's gateway processes share: one
// redis-server, or a Redis Cluster (three primaries, three replicas)
// whose primaries the test may kill.
type redisPlace struct {
	single  *testkit.Redis
	cluster *testkit.RedisCluster
	lease   time.Duration // store.lease_ttl; the tests' leaseTTL when 0
	noWait  bool          // on a cluster, redis_wait_replicas 0 rather than 1
}

func oneRedis(t *testing.T) redisPlace      { return redisPlace{single: testkit.StartRedis(t)} }
func aRedisCluster(t *testing.T) redisPlace { return redisPlace{cluster: testkit.StartRedisCluster(t)} }
func (p redisPlace) isCluster() bool        { return p.cluster != nil }
func (p redisPlace) String() string {
	return map[bool]string{false: "one redis", true: "redis cluster"}[p.isCluster()]
}

// storeYAML is the store section of a gateway's herald.yaml on p, with
// the tests' short lease; on a cluster every commit waits for a replica.
func (p redisPlace) storeYAML() string {
	lease := cmp.Or(p.lease, leaseTTL)
	if p.isCluster() {
		return fmt.Sprintf(`
store:
  backend: redis
  redis_mode: cluster
  redis_url: %s
  redis_prefix: %q
  redis_wait_replicas: %d
  lease_ttl: %s
`, p.cluster.URL(), p.cluster.Prefix(), map[bool]int{false: 1, true: 0}[p.noWait], lease)
	}
	return fmt.Sprintf(`
store:
  backend: redis
  redis_url: %s
  redis_prefix: %q
  lease_ttl: %s
`, p.single.URL(), p.single.Prefix(), lease)
}

// open opens the store the gateways share, for the test's own reads.
func (p redisPlace) open(t *testing.T) *redis.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opt := redis.Options{}
	if p.isCluster() {
		opt.URL, opt.Prefix, opt.Cluster = p.cluster.URL(), p.cluster.Prefix(), true
	} else {
		opt.URL, opt.Prefix = p.single.URL(), p.single.Prefix()
	}
	db, err := redis.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// killPrimary SIGKILLs the primary serving a slot of the cluster, waits
// until its replica took over, and starts the dead node again, which
// rejoins as a replica. It returns how long the cluster had no primary
// for those slots.
func (p redisPlace) killPrimary(t *testing.T) time.Duration {
	t.Helper()
	victim := p.cluster.Primary(t, "{0}")
	at := time.Now()
	p.cluster.Kill(t, victim)
	p.cluster.WaitOK(t)
	took := time.Since(at)
	p.cluster.Revive(t, victim)
	return took
}
