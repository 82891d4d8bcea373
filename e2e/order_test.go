package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// sharedStore is the store section of gateway processes that share one
// store: a redis-server, or one SQLite file.
type sharedStore struct {
	name    string
	section func(t *testing.T) string
}

var sharedStores = []sharedStore{
	{"sqlite", func(t *testing.T) string {
		return fmt.Sprintf("  sqlite_path: %s\n", filepath.Join(t.TempDir(), "shared.db"))
	}},
	{"redis", func(t *testing.T) string {
		r := testkit.StartRedis(t)
		return fmt.Sprintf("  backend: redis\n  redis_url: %s\n  redis_prefix: %q\n", r.URL(), r.Prefix())
	}},
}

// telegramCluster starts gateway processes on one store that answer one
// Telegram bot in polling mode, each with its own home; users are the
// Telegram users allowed. Start more with start.
type telegramCluster struct {
	t     *testing.T
	tg    *telegramfake.Server
	model *testkit.ModelServer
	cfg   string
	n     int
}

func newTelegramCluster(t *testing.T, store sharedStore, users ...int64) *telegramCluster {
	model := testkit.NewModelServer(t)
	tg := telegramfake.New(t, "")
	allowed := make([]string, len(users))
	for i, u := range users {
		allowed[i] = strconv.Quote(strconv.FormatInt(u, 10))
	}
	cfg := fmt.Sprintf(`
store:
  lease_ttl: %s
%shttp:
  addr: 127.0.0.1:0
display:
  busy_input_mode: queue
  # The order held here is the outbox's: a reply shown as it is
  # written would be posted at its turn, before its delivery.
  streaming: false
model:
  base_url: %s
  name: %s
workers:
  turns: 8
  deliveries: 4
platforms:
  telegram:
    token: %q
    api_url: %s
    allowed_users: [%s]
`, leaseTTL, store.section(t), model.URL(), modelName, tg.Token(), tg.URL(), strings.Join(allowed, ", "))
	return &telegramCluster{t: t, tg: tg, model: model, cfg: cfg}
}

// start starts one more gateway process.
func (c *telegramCluster) start() *child {
	c.n++
	home := c.t.TempDir()
	writeConfig(c.t, home, c.cfg)
	return startChild(c.t, fmt.Sprintf("gateway %d", c.n), home)
}

// texts reads the texts sent to chat, in the order Telegram took them.
func (c *telegramCluster) texts(chat int64) []string {
	var out []string
	for _, m := range c.tg.Sent(chat) {
		out = append(out, m.Text)
	}
	return out
}

// counter reads a counter of c's /metrics, summed over its labels.
func counter(t *testing.T, c *child, name string) float64 {
	t.Helper()
	resp, err := http.Get(c.base + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", c.name, err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metrics of %s: %q: %v", c.name, line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("metrics of %s: %v", c.name, err)
	}
	return sum
}

// TestRepliesKeepTheirOrderAcrossAKill kills the process whose send of a
// committed reply the platform holds, while the conversation's next
// messages are answered by another process: the first reply, sent again
// by the survivor, still arrives first, and each reply arrives once.
func TestRepliesKeepTheirOrderAcrossAKill(t *testing.T) {
	t.Parallel()
	for _, store := range sharedStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			c := newTelegramCluster(t, store, 42)
			first := c.start()
			c.tg.WaitCalls("getUpdates", 1)
			second := c.start()

			c.tg.Hold("sendMessage")
			c.tg.Queue(telegramfake.Incoming{From: 42, Text: "m1"})
			c.tg.WaitHolding("sendMessage", 1)
			// The reply is committed and on its way when its process dies.
			// Its held call is dropped: once the survivor resends the
			// reply, the one call held is the survivor's.
			first.kill()

			// The survivor polls now, and runs the next turns; their
			// replies are committed while the first is still claimed by
			// the dead process, or behind the survivor's own claim of it.
			c.tg.Queue(telegramfake.Incoming{From: 42, Text: "m2"})
			c.tg.Queue(telegramfake.Incoming{From: 42, Text: "m3"})
			testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
				resent := counter(t, second, "herald_delivery_resends_total")
				return c.model.Count() >= 3 && resent == 1 && c.tg.Holding("sendMessage") == 1,
					fmt.Sprintf("%d model calls, %v resends, %d sends held", c.model.Count(), resent, c.tg.Holding("sendMessage"))
			})
			c.tg.Release("sendMessage")
			c.tg.WaitSent(42, 3)
			time.Sleep(settleWindow)
			want := []string{"echo: m1", "echo: m2", "echo: m3"}
			if got := c.texts(42); !slices.Equal(got, want) {
				t.Errorf("sent %q, want %q: each once, in the order committed", got, want)
			}
			// The dead process's claim ended unsettled: the survivor's
			// send of it is a resend.
			if n := counter(t, second, "herald_delivery_resends_total"); n != 1 {
				t.Errorf("the survivor counted %v resends, want 1", n)
			}
			second.stop()
		})
	}
}

// TestAKilledSendInPartsIsFinishedOnce kills a process between two parts
// of a long reply: the process that sends it again sends only the parts
// the platform had not taken, so every part arrives once, in order.
func TestAKilledSendInPartsIsFinishedOnce(t *testing.T) {
	t.Parallel()
	for _, store := range sharedStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			c := newTelegramCluster(t, store, 42)
			first := c.start()
			text := strings.Repeat("a long line of a long reply\n", 400)
			parts := chatfmt.RenderParts("echo: "+text, chatfmt.TelegramHTML, chatfmt.TelegramLimit)
			if len(parts) < 3 {
				t.Fatalf("the reply renders to %d parts; the test needs 3 or more", len(parts))
			}

			c.tg.HoldAfter("sendMessage", 1)
			c.tg.Queue(telegramfake.Incoming{From: 42, Text: text})
			c.tg.WaitHolding("sendMessage", 1)
			first.kill()
			c.tg.WaitHolding("sendMessage", 0)
			c.tg.Release("sendMessage")

			second := c.start()
			c.tg.WaitSent(42, len(parts))
			time.Sleep(settleWindow)
			got := c.texts(42)
			if !slices.Equal(got, parts) {
				t.Errorf("sent %d messages, want the %d parts once each, in order", len(got), len(parts))
			}
			second.stop()
		})
	}
}

// chaosRounds is how many times TestKillsBetweenCommitAndSend kills the
// process whose replies are on their way.
const chaosRounds = 6

// TestKillsBetweenCommitAndSendKeepEveryConversationInOrder is the chaos
// run with its kills placed: each round, every conversation's reply is
// committed and held at the platform when its process is killed; the
// survivor answers each conversation's next message, sends the held
// replies again and the new ones after them, and the killed process is
// started again. Every conversation gets every reply
// once, in the order its messages were sent, and each reply in flight at
// a kill is counted as one resend (the duplicate window, measured).
func TestKillsBetweenCommitAndSendKeepEveryConversationInOrder(t *testing.T) {
	t.Parallel()
	users := []int64{41, 42, 43}
	for _, store := range sharedStores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			c := newTelegramCluster(t, store, users...)
			live := []*child{c.start()}
			c.tg.WaitCalls("getUpdates", 1)
			live = append(live, c.start())
			resends, inFlight := 0.0, 0
			want := map[int64][]string{}
			queue := func(text string) {
				for _, u := range users {
					c.tg.Queue(telegramfake.Incoming{From: u, Text: text})
					want[u] = append(want[u], "echo: "+text)
				}
			}
			for r := range chaosRounds {
				c.tg.HoldNext("sendMessage", len(users))
				queue(fmt.Sprintf("r%d first", r))
				c.tg.WaitHolding("sendMessage", len(users))
				owner := ownerOf(t, live, "telegram")
				resends += counter(t, live[owner], "herald_delivery_resends_total")
				live[owner].kill()
				inFlight += len(users)
				// The platform never took the dead process's sends.
				c.tg.WaitHolding("sendMessage", 0)

				// The survivor answers the next messages while the replies
				// the dead process held wait for its heartbeat to run out;
				// then it sends them, and the new ones after them.
				queue(fmt.Sprintf("r%d second", r))
				for _, u := range users {
					c.tg.WaitSent(u, len(want[u]))
				}
				c.tg.Release("sendMessage")
				live[owner] = c.start()
			}
			time.Sleep(settleWindow)
			for _, g := range live {
				resends += counter(t, g, "herald_delivery_resends_total")
			}
			for _, u := range users {
				if got := c.texts(u); !slices.Equal(got, want[u]) {
					t.Errorf("user %d got %q, want %q: each reply once, in order", u, got, want[u])
				}
			}
			if int(resends) != inFlight {
				t.Errorf("%v resends counted, want %d: each reply in flight at a kill sent again once", resends, inFlight)
			}
			t.Logf("%s: %d kills with %d replies in flight, %v resends (%.0f per 1,000 in flight), 0 duplicates at the platform",
				store.name, chaosRounds, inFlight, resends, 1000*resends/float64(inFlight))
			for _, g := range live {
				g.stop()
			}
		})
	}
}
