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
	if held, err := ls.Acquire(ctx, "adapter:telegram", "p1", ttl); err != nil || !held {
		t.Fatalf("Acquire(p1) = %v, %v; want true", held, err)
	}
	key := db.leaseKey("adapter:telegram")
	if !strings.HasPrefix(key, r.Prefix()) {
		t.Errorf("lease key %q is outside the prefix %q", key, r.Prefix())
	}
	pttl, err := db.client.PTTL(ctx, key).Result()
	if err != nil || pttl <= 0 || pttl > ttl {
		t.Errorf("the lease key's TTL = %v, %v; want in (0, %v]", pttl, err, ttl)
	}
	if held, err := ls.Acquire(ctx, "adapter:telegram", "p2", ttl); err != nil || held {
		t.Fatalf("Acquire(p2) while p1 holds = %v, %v; want false", held, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, err := ls.Acquire(ctx, "adapter:telegram", "p2", ttl)
		if err != nil {
			t.Fatalf("Acquire(p2): %v", err)
		}
		if held {
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
