package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// TestTelegramPollingHasOneOwner runs two gateway processes on one
// redis-server with one Telegram bot in polling mode: only one of them
// polls, and when it is killed the other takes the poll over within the
// lease TTL. Every message is answered exactly once.
func TestTelegramPollingHasOneOwner(t *testing.T) {
	t.Parallel()
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	tg := telegramfake.New(t, "")

	cfg := clusterConfig(redis, model) + fmt.Sprintf(`platforms:
  telegram:
    token: %q
    api_url: %s
    allowed_users: ["42"]
`, tg.Token(), tg.URL())
	var gws [2]*child
	for k, name := range []string{"gateway A", "gateway B"} {
		home := t.TempDir()
		writeConfig(t, home, cfg)
		gws[k] = startChild(t, name, home)
	}

	// send queues messages from..to-1 as DMs from user 42 and waits for
	// every reply.
	send := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			tg.Queue(telegramfake.Incoming{From: 42, Text: fmt.Sprintf("m%d", i)})
		}
		tg.WaitSent(42, to)
	}
	send(0, 5)
	owner := ownerOf(t, gws[:])

	// The owner dies without letting go of its lease; the survivor polls
	// once the lease has run out.
	killed := time.Now()
	gws[owner].kill()
	send(5, 10)
	if took := time.Since(killed); took > leaseTTL+10*time.Second {
		t.Errorf("the survivor answered %s after the owner died; the lease TTL is %s", took, leaseTTL)
	}
	if survivor := ownerOf(t, gws[1-owner:2-owner]); survivor != 0 {
		t.Fatalf("the survivor does not report holding the Telegram lease")
	}

	// Let any redelivery come, then count the replies of each message.
	time.Sleep(settleWindow)
	replies := map[string]int{}
	for _, m := range tg.Sent(42) {
		replies[m.Text]++
	}
	for i := range 10 {
		if want := fmt.Sprintf("echo: m%d", i); replies[want] != 1 {
			t.Errorf("%q was sent %d times, want once (all replies: %v)", want, replies[want], replies)
		}
	}
	if n := tg.MaxConcurrentPolls(); n != 1 {
		t.Errorf("%d getUpdates calls overlapped, want 1 at a time", n)
	}
	if n := tg.Conflicts(); n != 0 {
		t.Errorf("%d getUpdates calls conflicted", n)
	}
}

// ownerOf returns the index of the one gateway among gws whose metrics
// say it holds the Telegram adapter's lease.
func ownerOf(t *testing.T, gws []*child) int {
	t.Helper()
	owner := -1
	for k, c := range gws {
		resp, err := http.Get(c.base + "/metrics")
		if err != nil {
			t.Fatalf("metrics of %s: %v", c.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), `herald_adapter_owned{platform="telegram"} 1`) {
			if owner >= 0 {
				t.Fatalf("both %s and %s hold the Telegram lease", gws[owner].name, c.name)
			}
			owner = k
		}
	}
	if owner < 0 {
		t.Fatal("no gateway holds the Telegram lease")
	}
	return owner
}
