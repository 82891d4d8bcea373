package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
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
	// Telegram has a reply before its sender acks it: a kill in between
	// sends it again (the duplicate window TestKillsBetweenCommitAndSend
	// measures), so the kill waits for the acks.
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		acked := counter(t, gws[0], "herald_delivery_ack_seconds_count") + counter(t, gws[1], "herald_delivery_ack_seconds_count")
		return acked >= 5, fmt.Sprintf("%v of 5 replies acked", acked)
	})
	owner := ownerOf(t, gws[:], "telegram")

	// The owner dies without letting go of its lease; the survivor polls
	// once the lease has run out.
	killed := time.Now()
	gws[owner].kill()
	send(5, 10)
	if took := time.Since(killed); took > leaseTTL+10*time.Second {
		t.Errorf("the survivor answered %s after the owner died; the lease TTL is %s", took, leaseTTL)
	}
	if survivor := ownerOf(t, gws[1-owner:2-owner], "telegram"); survivor != 0 {
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
// say it holds platform's adapter lease.
func ownerOf(t *testing.T, gws []*child, platform string) int {
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
		if strings.Contains(string(body), `herald_adapter_owned{platform="`+platform+`"} 1`) {
			if owner >= 0 {
				t.Fatalf("both %s and %s hold the %s lease", gws[owner].name, c.name, platform)
			}
			owner = k
		}
	}
	if owner < 0 {
		t.Fatalf("no gateway holds the %s lease", platform)
	}
	return owner
}

// TestDiscordMessagesWhileNoOneOwnsTheGatewayAreAnswered runs two gateway
// processes on one redis-server with one Discord bot. The owner of the
// gateway is killed; DMs posted before the survivor takes it over reach
// no connection, and Discord does not send them to a new session. The
// survivor reads them from the channel (its backfill) and each is
// answered exactly once.
func TestDiscordMessagesWhileNoOneOwnsTheGatewayAreAnswered(t *testing.T) {
	t.Parallel()
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	const bot, user, dm = "900000000000000001", "150000000000000001", "140000000000000001"
	token := base64.RawStdEncoding.EncodeToString([]byte(bot)) + ".GhIjKl.not-a-secret"
	dc := discordfake.New(t, discordfake.Options{Token: token, BotID: bot, LoseWhileAway: true})

	// Each answer is read as the message it was posted as, not shown
	// as it is written and edited after.
	cfg := clusterConfig(redis, model) + fmt.Sprintf(`display:
  streaming: false
platforms:
  discord:
    token: %q
    api_url: %s
    allowed_users: [%q]
`, token, dc.URL(), user)
	var gws [2]*child
	for k, name := range []string{"gateway A", "gateway B"} {
		home := t.TempDir()
		writeConfig(t, home, cfg)
		gws[k] = startChild(t, name, home)
	}

	author := discordfake.User{ID: user, Username: "ada"}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			dc.SendMessage(discordfake.MessageEvent{ChannelID: dm, Author: author, Content: fmt.Sprintf("d%d", i)})
		}
	}
	replies := func() map[string]int {
		out := map[string]int{}
		for _, m := range dc.Messages() {
			if m.ChannelID == dm {
				out[m.Content]++
			}
		}
		return out
	}
	waitReplies := func(n int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for len(replies()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d messages answered after %s: %v", len(replies()), n, within, replies())
			}
			time.Sleep(pollEvery)
		}
	}
	dc.Wait("a gateway session", dc.Connected)
	send(0, 3)
	waitReplies(3, waitReply)
	// Discord has a reply before its sender acks it: a kill in between
	// sends it again (the duplicate window TestKillsBetweenCommitAndSend
	// measures), so the kill waits for the acks.
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		acked := counter(t, gws[0], "herald_delivery_ack_seconds_count") + counter(t, gws[1], "herald_delivery_ack_seconds_count")
		return acked >= 3, fmt.Sprintf("%v of 3 replies acked", acked)
	})
	owner := ownerOf(t, gws[:], "discord")

	// The owner dies holding the lease; until the survivor takes it over
	// no process holds the gateway.
	gws[owner].kill()
	dc.Wait("the dead owner's connection to close", func() bool { return !dc.Connected() })
	send(3, 8)
	waitReplies(8, leaseTTL+waitReply)
	if survivor := ownerOf(t, gws[1-owner:2-owner], "discord"); survivor != 0 {
		t.Fatalf("the survivor does not report holding the Discord lease")
	}

	time.Sleep(settleWindow)
	got := replies()
	for i := range 8 {
		if want := fmt.Sprintf("echo: d%d", i); got[want] != 1 {
			t.Errorf("%q was sent %d times, want once (all replies: %v)", want, got[want], got)
		}
	}
	if len(dc.Calls(discordfake.RouteHistory)) == 0 {
		t.Error("the survivor read no channel's messages")
	}
}
