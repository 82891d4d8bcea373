package testkit

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/proc"
	goredis "github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is the cluster's node timeout: how long a primary
// may be silent before its replica takes over. Short, so a test's
// failover takes seconds.
const clusterNodeTimeout = 1000 * time.Millisecond

// clusterReadyTimeout bounds the wait for the cluster to say it is ok.
const clusterReadyTimeout = 60 * time.Second

// RedisCluster is a real Redis Cluster on loopback for one test: three
// primaries and a replica of each, six redis-server processes
// (--cluster-enabled yes) joined by redis-cli --cluster create, each
// with its own data directory, all stopped when the test ends.
type RedisCluster struct {
	Nodes  []*Redis // the six, primaries first as created
	prefix string
}

// StartRedisCluster launches the cluster and waits until every slot is
// served. It fails the test when redis-server or redis-cli is missing.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testkit: redis-server is not on PATH; install it (apt-get install redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("testkit: redis-cli is not on PATH; install it (apt-get install redis-tools)")
	}
	c := &RedisCluster{prefix: testPrefix(t)}
	for range 6 {
		n := &Redis{bin: bin, dir: t.TempDir(), prefix: c.prefix}
		n.args = []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds()))}
		if err := n.launch(); err != nil {
			t.Fatalf("testkit: starting a cluster node: %v", err)
		}
		t.Cleanup(func() { _ = n.stop() })
		c.Nodes = append(c.Nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	create := exec.Command(cli, args...)
	create.Env = (*proc.Env)(nil).Build()
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("testkit: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(t)
	return c
}

// Seeds are the nodes' addresses, as a cluster client's seed list.
func (c *RedisCluster) Seeds() []string {
	out := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		out = append(out, n.addr)
	}
	return out
}

// Prefix is a key prefix no other test uses.
func (c *RedisCluster) Prefix() string { return c.prefix }

// Client is a cluster client seeded with every node, closed when the
// test ends.
func (c *RedisCluster) Client(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Seeds()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// WaitOK waits until every live node says the cluster's state is ok
// and every slot is served by a primary that answers.
func (c *RedisCluster) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterReadyTimeout)
	var last string
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range c.Nodes {
			if !n.alive() {
				continue
			}
			// Every live node must say so: one that has not heard of a
			// failover yet still answers CLUSTERDOWN for its slots.
			last = c.info(n.addr)
			if !strings.Contains(last, "cluster_state:ok") || !strings.Contains(last, "cluster_slots_ok:16384") {
				ok = false
				break
			}
		}
		if ok && c.mastersAnswer() && c.replicasLinked() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("testkit: the cluster was not ok within %s: %s", clusterReadyTimeout, last)
}

// Primary is the node serving key's slot now.
func (c *RedisCluster) Primary(t testing.TB, key string) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Seeds()})
	defer cc.Close()
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("testkit: CLUSTER KEYSLOT %s: %v", key, err)
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("testkit: CLUSTER SHARDS: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				if n := c.node(primaryOf(sh)); n != nil {
					return n
				}
			}
		}
	}
	t.Fatalf("testkit: no node serves the slot of %s", key)
	return nil
}

// Kill SIGKILLs node n: what it acknowledged and had not passed on to
// its replica is lost with it, as a machine's loss would lose it.
func (c *RedisCluster) Kill(t testing.TB, n *Redis) {
	t.Helper()
	if n.cmd == nil || !n.alive() {
		t.Fatalf("testkit: node %s is not running", n.addr)
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// alive reports whether n's process runs.
func (n *Redis) alive() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// info is CLUSTER INFO as the node at addr answers it, "" when it does
// not.
func (c *RedisCluster) info(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	s, _ := rc.ClusterInfo(ctx).Result()
	return s
}

// mastersAnswer reports whether every primary serving slots is a node
// that runs, as the first live node sees the cluster.
func (c *RedisCluster) mastersAnswer() bool {
	first := true
	return c.eachLive(func(ctx context.Context, rc *goredis.Client) bool {
		if !first {
			return true
		}
		first = false
		shards, err := rc.ClusterShards(ctx).Result()
		if err != nil {
			return false
		}
		for _, sh := range shards {
			if p := c.node(primaryOf(sh)); len(sh.Slots) > 0 && (p == nil || !p.alive()) {
				return false
			}
		}
		return true
	})
}

// eachLive asks ok of a client of every live node, and reports whether
// every one said yes (and some node lives).
func (c *RedisCluster) eachLive(ok func(context.Context, *goredis.Client) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	asked := false
	for _, n := range c.Nodes {
		if !n.alive() {
			continue
		}
		rc := goredis.NewClient(&goredis.Options{Addr: n.addr})
		yes := ok(ctx, rc)
		rc.Close()
		if !yes {
			return false
		}
		asked = true
	}
	return asked
}

// node is the node at addr, nil for none.
func (c *RedisCluster) node(addr string) *Redis {
	for _, n := range c.Nodes {
		if n.addr == addr {
			return n
		}
	}
	return nil
}

// replicasLinked reports whether every live replica has its link to its
// primary up: a replica still making its first copy cannot take over
// from its primary.
func (c *RedisCluster) replicasLinked() bool {
	return c.eachLive(func(ctx context.Context, rc *goredis.Client) bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && (!strings.Contains(info, "role:slave") || strings.Contains(info, "master_link_status:up"))
	})
}

// primaryOf is the address of sh's primary that the cluster takes to
// be up, "" when it has none.
func primaryOf(sh goredis.ClusterShard) string {
	for _, n := range sh.Nodes {
		if n.Role == "master" && n.Health == "online" {
			return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
		}
	}
	return ""
}

// String names the cluster's nodes, for a failure's message.
func (c *RedisCluster) String() string { return fmt.Sprint(c.Seeds()) }

// URL is the cluster's seeds as a Redis URL: the first node, and each
// other as an addr parameter.
func (c *RedisCluster) URL() string {
	seeds := c.Seeds()
	u := "redis://" + seeds[0]
	for i, s := range seeds[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + s
	}
	return u
}

// Restart stops every node and starts it again on its data, then waits
// for the cluster to be ok.
func (c *RedisCluster) Restart(t testing.TB) {
	t.Helper()
	for _, n := range c.Nodes {
		if n.alive() {
			_ = n.stop()
		}
	}
	for _, n := range c.Nodes {
		c.Revive(t, n)
	}
	c.WaitOK(t)
}

// Revive starts a node Kill stopped again, on its port and data: it
// rejoins the cluster, as a replica of the primary that took over.
func (c *RedisCluster) Revive(t testing.TB, n *Redis) {
	t.Helper()
	var err error
	for range 20 { // the port was let go only a moment ago
		if err = n.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("testkit: reviving cluster node %s: %v", n.addr, err)
}

// Replicas are the running nodes that replicate the primary serving
// key's slot now.
func (c *RedisCluster) Replicas(t testing.TB, key string) []*Redis {
	t.Helper()
	primary := c.Primary(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc := goredis.NewClient(&goredis.Options{Addr: primary.addr})
	defer rc.Close()
	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("testkit: CLUSTER SHARDS: %v", err)
	}
	var out []*Redis
	for _, sh := range shards {
		if primaryOf(sh) != primary.addr {
			continue
		}
		for _, n := range sh.Nodes {
			if r := c.node(net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))); n.Role == "replica" && r != nil && r.alive() {
				out = append(out, r)
			}
		}
	}
	return out
}
