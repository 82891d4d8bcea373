package e2e

import (
	"fmt"
	"strings"
	"sync/atomic"
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
	yaml := twoKeysConfig(redis, model, spent, good)
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

// TestAMarkReachesAGatewayThatHoldsAView: two gateways on one
// redis-server have each served a request with the first of two keys,
// so each holds a view of the keys that says both are fine and asks the
// store nothing more. The first key then runs out of credit: the
// gateway that finds out marks it and tells the other (a signal), which
// reads the store at its next request and never sends the spent key.
func TestAMarkReachesAGatewayThatHoldsAView(t *testing.T) {
	const first, second = "sk-first-key-e2e-0001", "sk-second-key-e2e-0002"
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	var spent atomic.Bool
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if r.APIKey() == first && spent.Load() {
			return testkit.Fail(402, "Payment required")
		}
		if r.APIKey() == first {
			return testkit.Reply("from the first key")
		}
		return testkit.Reply("from the second key")
	})
	yaml := twoKeysConfig(redis, model, first, second)
	var gws [2]*child
	for i, name := range []string{"gw-a", "gw-b"} {
		home := t.TempDir()
		writeConfig(t, home, yaml)
		gws[i] = startChild(t, name, home)
		if got := chat(t, openAIClient(gws[i].base, name+"-1"), "hello"); got != "from the first key" {
			t.Fatalf("%s replied %q before the key ran out", name, got)
		}
	}
	spent.Store(true)
	before := model.Count()
	if got := chat(t, openAIClient(gws[0].base, "gw-a-2"), "hello"); got != "from the second key" {
		t.Fatalf("gw-a replied %q after the first key ran out", got)
	}
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return strings.Contains(gws[1].stderr.String(), "a key of the pool was marked or revived"), "gw-b was never told of the mark"
	})
	// The same conversation: its key, in gw-b's view, is the first.
	if got := chat(t, openAIClient(gws[1].base, "gw-b-1"), "hello again"); got != "from the second key" {
		t.Fatalf("gw-b replied %q after the first key ran out", got)
	}
	sent := map[string]int{}
	for _, r := range model.Requests()[before:] {
		sent[r.APIKey()]++
	}
	if sent[first] != 1 || sent[second] != 2 {
		t.Errorf("requests by key after the first ran out = %v, want the first once (gw-a's) and never by gw-b", sent)
	}
}

// twoKeysConfig is the config of a gateway on redis whose model has the
// keys first and second, in that order of priority.
func twoKeysConfig(redis *testkit.Redis, model *testkit.ModelServer, first, second string) string {
	return fmt.Sprintf(`
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
`, redis.URL(), redis.Prefix(), model.URL(), modelName, first, second)
}
