package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// TestTwoGatewaysShareKeyCooling: two herald processes on one
// redis-server, with the same two model keys. The first key is out of
// credit; the process that finds out cools it, and the other never sends
// it, choosing the second key from its first request on. `herald model
// keys` shows the cooling key, masked.
func TestTwoGatewaysShareKeyCooling(t *testing.T) {
	const spent, good = "sk-spent-key-e2e-0001", "sk-good-key-e2e-0002"
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if r.APIKey() == spent {
			return testkit.Fail(402, "Payment required")
		}
		return testkit.Reply("from the good key")
	})
	yaml := fmt.Sprintf(`
store:
  backend: redis
  redis_url: %s
  redis_prefix: %q
http:
  addr: 127.0.0.1:0
model:
  base_url: %s
  name: %s
  credentials:
    - {key: %s, priority: 0}
    - {key: %s, priority: 1}
`, redis.URL(), redis.Prefix(), model.URL(), modelName, spent, good)
	homes := []string{t.TempDir(), t.TempDir()}
	for _, h := range homes {
		writeConfig(t, h, yaml)
	}
	a := startChild(t, "gw-a", homes[0])
	if got := chat(t, openAIClient(a.base, "pool-a"), "hello"); got != "from the good key" {
		t.Fatalf("gw-a replied %q", got)
	}
	b := startChild(t, "gw-b", homes[1])
	if got := chat(t, openAIClient(b.base, "pool-b"), "hello"); got != "from the good key" {
		t.Fatalf("gw-b replied %q", got)
	}
	sent := map[string]int{}
	for _, r := range model.Requests() {
		sent[r.APIKey()]++
	}
	if sent[spent] != 1 || sent[good] != 2 {
		t.Errorf("requests by key = %v, want the spent key once (by gw-a) and never by gw-b", sent)
	}
	var keys []struct{ Key, Status, Reason string }
	cliJSON(t, homes[1], &keys, "model", "keys")
	if len(keys) != 2 || keys[0].Status != "cooling" || keys[0].Reason != "payment" || keys[1].Status != "ok" {
		t.Errorf("model keys = %+v, want the first cooling for billing", keys)
	}
	for _, c := range []*child{a, b} {
		if strings.Contains(c.stderr.String(), spent) {
			t.Errorf("%s logged a key", c.name)
		}
	}
}
