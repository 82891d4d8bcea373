package gateway

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	goredis "github.com/redis/go-redis/v9"
)

// TestAStoreRefusingWritesIsToldOnce runs a gateway on a Redis that then
// refuses writes (out of memory): its loops go on trying, the server
// refusing dozens of calls, and the log tells each loop's failure once
// rather than on every try; the gateway answers a new message with 503,
// holds back no reply for a claim the server refused, and goes on once
// the server takes writes again.
func TestAStoreRefusingWritesIsToldOnce(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	r := testkit.LaunchRedis(t)
	cfg.Store.Backend, cfg.Store.RedisURL = config.BackendRedis, r.URL()
	h := startGateway(t, cfg, Options{})

	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	t.Cleanup(func() { admin.Close() })
	rejected := regexp.MustCompile(`cmdstat_fcall:.*rejected_calls=(\d+)`)
	refused := func() int {
		info, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		m := rejected.FindStringSubmatch(info)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1mb"}} {
		if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The turn worker's claim loop alone tries several times a second.
	testkit.Eventually(t, "the server to refuse 40 calls", func() bool { return refused() >= 40 })
	if code, body := h.do("POST", "/api/v1/conversations/c/messages", `{"text":"hello"}`); code != 503 {
		t.Errorf("a message while the store refuses writes: %d %s, want 503", code, body)
	}
	if n := strings.Count(h.logs.String(), `"msg":"claiming a turn failed"`); n != 1 {
		t.Errorf("the turn claim's failure logged %d times, want once:\n%s", n, h.logs.String())
	}
	// The delivery worker's claim loop polls too; its failure is told once
	// as well, through the same log, however many of its tries follow.
	const claimFailed = `"msg":"claiming outbox messages failed"`
	testkit.Eventually(t, "the delivery claim's failure logged", func() bool { return strings.Contains(h.logs.String(), claimFailed) })
	after := refused()
	testkit.Eventually(t, "the server to refuse 20 calls more", func() bool { return refused() >= after+20 })
	if n := strings.Count(h.logs.String(), claimFailed); n != 1 {
		t.Errorf("the delivery claim's failure logged %d times, want once:\n%s", n, h.logs.String())
	}
	// A refused claim took nothing: the delivery worker holds nothing
	// back for it.
	if strings.Contains(h.logs.String(), "may have taken messages") {
		t.Errorf("the delivery worker doubts a claim the server refused:\n%s", h.logs.String())
	}

	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	model.Script(testkit.Reply("back"))
	if got := h.chat("c", "hello again"); got != "back" {
		t.Errorf("reply once the server takes writes = %q, want back", got)
	}
	testkit.Eventually(t, "the delivery claim told working again", func() bool {
		return strings.Contains(h.logs.String(), `"msg":"claiming outbox messages works again"`)
	})
}
