package testkit

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The cluster rig is a cluster: three primaries with a replica each,
// keys spread over them by their hash tags; a primary SIGKILLed is
// replaced by its replica, and a write its replica acknowledged (WAIT)
// before the kill is still there after.
func TestRedisClusterRig(t *testing.T) {
	c := StartRedisCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cc := c.Client(t)
	primaries := map[string]bool{}
	for i := range 30 {
		key := c.Prefix() + "{k" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "}"
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		primaries[c.Primary(t, key).Addr()] = true
	}
	if len(primaries) != 3 {
		t.Errorf("30 keys on %d primaries, want 3", len(primaries))
	}
	nodes, err := cc.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	replicas := 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "slave") {
			replicas++
		}
	}
	if replicas != 3 {
		t.Errorf("%d replicas, want 3", replicas)
	}

	const key = "{kept}"
	primary := c.Primary(t, c.Prefix()+key)
	direct := goredis.NewClient(&goredis.Options{Addr: primary.Addr(), PoolSize: 1})
	defer direct.Close()
	if err := direct.Set(ctx, c.Prefix()+key, "acknowledged", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := direct.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	c.Kill(t, primary)
	c.WaitOK(t)
	if now := c.Primary(t, c.Prefix()+key); now == primary {
		t.Fatalf("the killed node %s still serves the key", primary.Addr())
	}
	// A client that learns the cluster's new layout (one that knew the
	// old must find it out: MOVED, or a refused node's slots read again).
	got, err := c.Client(t).Get(ctx, c.Prefix()+key).Result()
	if err != nil || got != "acknowledged" {
		t.Errorf("after the failover GET = %q, %v; want the write its replica acknowledged", got, err)
	}
}
