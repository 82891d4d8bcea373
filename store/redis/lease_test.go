package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// Without an injected clock the server's decides: the key expires by
// itself after the TTL, and another holder takes the lease then.
func TestLeaseOnTheServersClock(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	db := openDB(t, r, nil, sessions.Limits{})
	ls := db.Leases()
	const ttl = 200 * time.Millisecond

	start := time.Now()
	t1, err := ls.Acquire(ctx, "adapter:telegram", "p1", ttl)
	if err != nil || t1 == 0 {
		t.Fatalf("Acquire(p1) = %v, %v; want a token", t1, err)
	}
	key := db.leaseKey("adapter:telegram")
	if !strings.HasPrefix(key, r.Prefix()) {
		t.Errorf("lease key %q is outside the prefix %q", key, r.Prefix())
	}
	pttl, err := db.client.PTTL(ctx, key).Result()
	if err != nil || pttl <= 0 || pttl > ttl {
		t.Errorf("the lease key's TTL = %v, %v; want in (0, %v]", pttl, err, ttl)
	}
	if token, err := ls.Acquire(ctx, "adapter:telegram", "p2", ttl); err != nil || token != 0 {
		t.Fatalf("Acquire(p2) while p1 holds = %v, %v; want 0", token, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		token, err := ls.Acquire(ctx, "adapter:telegram", "p2", ttl)
		if err != nil {
			t.Fatalf("Acquire(p2): %v", err)
		}
		if token > 0 {
			// The key expired by itself; the token counter did not.
			if token <= t1 {
				t.Errorf("the takeover's token %d, want more than %d", token, t1)
			}
			// The server runs on this machine: a takeover before the TTL
			// ran out would be a lease that does not hold.
			if took := time.Since(start); took < ttl-10*time.Millisecond {
				t.Errorf("p2 took the lease over %v after p1 took it, before the TTL %v", took, ttl)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("p2 never took the lease over after p1's expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
