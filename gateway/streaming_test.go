package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/adapters/discord"
	"github.com/heraldgw/herald/adapters/slack"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// chatMessage is a message of the bot's as the chat shows it now.
type chatMessage struct{ id, text string }

// streamPlatform is a fake platform, and what the chat shows on it.
type streamPlatform struct {
	name    string
	target  outbox.Target
	replyTo string // the user's message the reply answers
	dialect chatfmt.Dialect
	limit   int
	// adapter makes the real adapter against the fake (nil cfg: the
	// adapter alone) or sets the gateway's config to serve it.
	adapter func(cfg *config.Config) adapters.Adapter
	// shown is the bot's messages in the chat, in order, deleted ones
	// left out.
	shown func() []chatMessage
	edits func() int
	// refuseEdit makes the next edit fail for good (the message is gone);
	// failEdit makes it fail for now; failPost makes the next post fail
	// for now.
	refuseEdit, failEdit, failPost func()
	// rateLimitEdit makes the next edit answer the platform's rate
	// limit, and returns the wait it asks for.
	rateLimitEdit func() time.Duration
}

// render is how the platform shows text: its parts.
func (p streamPlatform) render(text string) []string {
	return chatfmt.RenderParts(text, p.dialect, p.limit)
}

func streamPlatforms(t *testing.T) []streamPlatform {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	return []streamPlatform{
		func() streamPlatform {
			fake := telegramfake.New(t, "")
			const chat = 4242
			return streamPlatform{
				name: "telegram", target: outbox.Target{Platform: "telegram", Chat: strconv.Itoa(chat)}, replyTo: "4242:7",
				dialect: chatfmt.TelegramHTML, limit: chatfmt.TelegramLimit,
				adapter: func(cfg *config.Config) adapters.Adapter {
					tc := config.Telegram{Token: fake.Token(), APIURL: fake.URL(), Mode: config.TelegramPolling, GroupTrigger: config.TriggerMention}
					if cfg != nil {
						cfg.Platforms.Telegram = tc
						return nil
					}
					a, err := telegram.New(telegram.Options{Config: tc, Access: adapters.NewAccess(telegram.Platform, nil, true), Logger: quiet})
					if err != nil {
						t.Fatal(err)
					}
					return a
				},
				shown: func() []chatMessage {
					var out []chatMessage
					for _, m := range fake.Sent(chat) {
						if !m.Deleted {
							out = append(out, chatMessage{strconv.Itoa(m.ID), m.Text})
						}
					}
					return out
				},
				edits: func() int { return len(fake.Calls("editMessageText")) },
				refuseEdit: func() {
					fake.Fail("editMessageText", 1, telegramfake.Failure{Status: http.StatusBadRequest, Description: "Bad Request: message to edit not found"})
				},
				failEdit: func() { fake.Fail("editMessageText", 1, telegramfake.ServerError) },
				failPost: func() { fake.Fail("sendMessage", 1, telegramfake.ServerError) },
				rateLimitEdit: func() time.Duration {
					fake.Fail("editMessageText", 1, telegramfake.TooManyRequests(5))
					return 5 * time.Second
				},
			}
		}(),
		func() streamPlatform {
			fake := slackfake.New(t)
			return streamPlatform{
				name: "slack", target: outbox.Target{Platform: "slack", Chat: fake.TeamID, Thread: "C0STREAM:1690000000.000100"},
				replyTo: "C0STREAM:1690000000.000100", dialect: chatfmt.SlackMrkdwn, limit: chatfmt.SlackLimit,
				adapter: func(cfg *config.Config) adapters.Adapter {
					sc := config.Slack{BotToken: fake.BotToken, SigningSecret: "secret", APIURL: fake.URL()}
					if cfg != nil {
						cfg.Platforms.Slack = sc
						return nil
					}
					a, err := slack.New(slack.Options{Config: sc, Access: adapters.NewAccess(slack.Platform, nil, true), Logger: quiet})
					if err != nil {
						t.Fatal(err)
					}
					return a
				},
				shown: func() []chatMessage {
					var out []chatMessage
					for _, c := range fake.Calls("") {
						if c.TS == "" {
							continue
						}
						switch c.Method {
						case "chat.postMessage":
							out = append(out, chatMessage{c.TS, c.Params.Get("text")})
						case "chat.update":
							for i := range out {
								if out[i].id == c.TS {
									out[i].text = c.Params.Get("text")
								}
							}
						case "chat.delete":
							out = slices.DeleteFunc(out, func(m chatMessage) bool { return m.id == c.TS })
						}
					}
					return out
				},
				edits: func() int { return len(fake.Calls("chat.update")) },
				refuseEdit: func() {
					fake.Fail("chat.update", slackfake.Failure{Error: "message_not_found"})
				},
				failEdit: func() { fake.Fail("chat.update", slackfake.Failure{Status: http.StatusInternalServerError}) },
				failPost: func() { fake.Fail("chat.postMessage", slackfake.Failure{Status: http.StatusInternalServerError}) },
				rateLimitEdit: func() time.Duration {
					fake.Fail("chat.update", slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 5})
					return 5 * time.Second
				},
			}
		}(),
		func() streamPlatform {
			fake := discordfake.New(t, discordfake.Options{})
			const guild, channel = "110000000000000001", "120000000000000001"
			return streamPlatform{
				name: "discord", target: outbox.Target{Platform: "discord", Chat: guild, Thread: channel},
				replyTo: "130000000000000001", dialect: chatfmt.DiscordMarkdown, limit: chatfmt.DiscordLimit,
				adapter: func(cfg *config.Config) adapters.Adapter {
					dc := config.Default().Platforms.Discord
					dc.Token, dc.APIURL, dc.GroupTrigger = fake.Token(), fake.URL(), config.TriggerMention
					if cfg != nil {
						cfg.Platforms.Discord = dc
						return nil
					}
					a, err := discord.New(discord.Options{Config: dc, Access: adapters.NewAccess(discord.Platform, nil, true), Logger: quiet})
					if err != nil {
						t.Fatal(err)
					}
					return a
				},
				shown: func() []chatMessage {
					deleted := fake.Deletes()
					var out []chatMessage
					for _, m := range fake.Messages() {
						if slices.Contains(deleted, m.ID) {
							continue
						}
						text := m.Content
						for _, e := range fake.Edits() {
							if e.MessageID == m.ID {
								text = e.Content
							}
						}
						out = append(out, chatMessage{m.ID, text})
					}
					return out
				},
				edits: func() int { return len(fake.Edits()) },
				refuseEdit: func() {
					fake.FailNext(discordfake.RouteEdit, 1, discordfake.Failure{Status: http.StatusNotFound, Code: 10008, Message: "Unknown Message"})
				},
				failEdit: func() { fake.FailNext(discordfake.RouteEdit, 1, discordfake.ServerError()) },
				failPost: func() { fake.FailNext(discordfake.RouteMessage, 1, discordfake.ServerError()) },
				rateLimitEdit: func() time.Duration {
					// The SDK itself holds the next call until the bucket's
					// reset, in real time: a short one.
					fake.FailNext(discordfake.RouteEdit, 1, discordfake.RateLimit(100*time.Millisecond))
					return 100 * time.Millisecond
				},
			}
		}(),
	}
}

// startStreaming runs a driver over a, on clk, until the test ends.
func startStreaming(t *testing.T, a adapters.Adapter, clk clock.Clock) *Streaming {
	t.Helper()
	s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{a}, Every: 1500 * time.Millisecond, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// waitShown waits until the chat shows want, message by message.
func waitShown(t *testing.T, p streamPlatform, what string, want ...string) []chatMessage {
	t.Helper()
	var got []chatMessage
	testkit.Eventually(t, what, func() bool {
		got = p.shown()
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if got[i].text != want[i] {
				return false
			}
		}
		return true
	})
	return got
}

// streamedHello is a driver on a fake clock over p's adapter, following
// one turn that has streamed "Hello", posted as the reply in progress.
type streamedHello struct {
	clk   *clock.Fake
	a     adapters.Adapter
	s     *Streaming
	ts    sessions.TurnStream
	first chatMessage // the reply in progress
}

func streamHello(t *testing.T, p streamPlatform) streamedHello {
	t.Helper()
	h := streamedHello{clk: clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)), a: p.adapter(nil)}
	h.s = startStreaming(t, h.a, h.clk)
	h.ts = h.s.Stream(context.Background(), p.target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
	if h.ts == nil {
		t.Fatal("Stream = nil, want the turn streamed")
	}
	h.ts.Delta("Hello")
	h.first = waitShown(t, p, "the reply in progress posted", p.render("Hello")...)[0]
	waitPosted(t, h.ts)
	return h
}

// waitPosted waits until the driver has the answer to the post of ts's
// reply in progress, which the chat may show before.
func waitPosted(t *testing.T, ts sessions.TurnStream) {
	t.Helper()
	testkit.Eventually(t, "the post's answer", func() bool { return ts.(*replyStream).shownID() != "" })
}

// deliver sends m as the delivery worker does: through the driver when it
// showed m in progress, else through the adapter's Send.
func deliver(s *Streaming, a adapters.Adapter, m outbox.Message) adapters.SendResult {
	if res, ok := s.Send(context.Background(), a, m); ok {
		return res
	}
	return a.Send(context.Background(), m)
}

func reply(p streamPlatform, text string) outbox.Message {
	return outbox.Message{ID: "ob-1", Target: p.target, ReplyTo: p.replyTo, Kind: agent.KindReply, Text: text}
}

// A reply in progress is one message, edited no more often than the
// interval by the driver's clock, and its delivery makes that message the
// reply, formatted and split as any reply: the first part edited in, the
// rest sent after it. A retry of that delivery posts nothing more.
func TestStreamedReplyIsEditedByTheClockThenFinalized(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, a, s, ts := h.clk, h.a, h.s, h.ts
			first := h.first
			ts.Delta(" there,")
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			ts.Delta(" and")
			clk.Advance(1400 * time.Millisecond)
			if n := p.edits(); n != 0 {
				t.Errorf("%d edits within the interval, want none", n)
			}
			clk.Advance(100 * time.Millisecond)
			waitShown(t, p, "the text so far edited in", p.render("Hello there, and")...)
			if n := p.edits(); n != 1 {
				t.Errorf("%d edits after one interval, want 1", n)
			}
			ts.Delta(" more")
			ts.End(true)

			final := "Hello **there**, and more.\n\n" + strings.Repeat("A longer paragraph of the reply. ", 150)
			parts := p.render(final)
			if len(parts) < 2 {
				t.Fatalf("the final reply renders as %d parts, want several", len(parts))
			}
			p.failEdit()
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Transient {
				t.Fatalf("delivery with the edit failing = %+v, want Transient", res)
			}
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted || res.MessageID != first.id {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, first.id)
			}
			got := waitShown(t, p, "the reply in place of the one in progress", parts...)
			if got[0].id != first.id {
				t.Errorf("the reply's first part is message %s, want the one in progress, %s", got[0].id, first.id)
			}

			// A short reply's delivery retried (its ack lost) edits again.
			short := "Hello **there**."
			for range 2 {
				if res := deliver(s, a, outbox.Message{ID: "ob-2", Target: p.target, ReplyTo: p.replyTo, Kind: agent.KindReply, Text: short}); res.Outcome != adapters.Accepted {
					t.Fatalf("delivery = %+v, want accepted", res)
				}
			}
			want := append(p.render(short), parts[1:]...)
			waitShown(t, p, "the short reply edited in, nothing posted", want...)
		})
	}
}

// An edit the platform rate-limits is tried again no sooner than the
// platform asked, and no sooner than twice the interval, by the driver's
// clock.
func TestStreamedReplyWaitsOutARateLimit(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, ts := h.clk, h.ts
			defer ts.End(true)
			wait := max(3*time.Second, p.rateLimitEdit())
			ts.Delta(" there")
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(1500 * time.Millisecond) // the edit, refused
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(wait - 100*time.Millisecond)
			if n := clk.Waiters(); n != 1 {
				t.Fatalf("%d timers armed %s after the rate limit, want the driver's still waiting", n, wait-100*time.Millisecond)
			}
			clk.Advance(100 * time.Millisecond)
			waitShown(t, p, "the edit after the wait", p.render("Hello there")...)
		})
	}
}

// A reply delivered by another process than the one that showed it (no
// stream state there) names the message that showed it, which becomes
// the reply all the same.
func TestStreamedReplyDeliveredElsewhereIsEditedIn(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			meta := h.ts.End(true)
			if got := meta[sessions.ReplyMetaStreamed]; got != h.first.id {
				t.Fatalf("End's meta names message %q, want %q", got, h.first.id)
			}
			elsewhere := startStreaming(t, h.a, h.clk)
			final := "Hello **there**."
			m := reply(p, final)
			m.Meta = meta
			if res := deliver(elsewhere, h.a, m); res.Outcome != adapters.Accepted || res.MessageID != h.first.id {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, h.first.id)
			}
			waitShown(t, p, "the reply in place of the one in progress", p.render(final)...)
		})
	}
}

// A first post of the reply in progress that failed for now (a 5xx, a
// timeout) may have been posted all the same: the driver posts nothing
// more for that reply, which is sent as usual when it is done, once.
func TestStreamedReplyPostFailedIsNotPostedAgain(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			a := p.adapter(nil)
			s := startStreaming(t, a, clk)
			ts := s.Stream(context.Background(), p.target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn streamed")
			}
			t.Cleanup(func() { ts.End(true) }) // before the driver's shutdown
			p.failPost()
			ts.Delta("Hello")
			testkit.Eventually(t, "the driver to stop showing the reply", func() bool {
				select {
				case <-ts.(*replyStream).done:
					return true
				default:
					// Without the stop, the next try comes after a wait.
					clk.Advance(time.Second)
					return false
				}
			})
			if meta := ts.End(true); len(meta) != 0 {
				t.Errorf("End's meta = %v, want none: no message was surely posted", meta)
			}
			final := "Hello **there**."
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			waitShown(t, p, "the reply posted once", p.render(final)...)
		})
	}
}

// A reply committed by another process's run of the turn, delivered by a
// process whose own run showed another message, becomes the message it
// names: the other process's.
func TestStreamedReplyNamedByItsCommitWins(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			elsewhere := startStreaming(t, h.a, h.clk)
			ts := elsewhere.Stream(context.Background(), p.target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
			ts.Delta("Hi")
			second := waitShown(t, p, "the other run's reply in progress", append(p.render("Hello"), p.render("Hi")...)...)[1]
			waitPosted(t, ts)
			meta := ts.End(true)
			if meta[sessions.ReplyMetaStreamed] != second.id {
				t.Fatalf("End's meta = %v, want message %s", meta, second.id)
			}
			final := "Hi **there**."
			m := reply(p, final)
			m.Meta = meta
			if res := deliver(h.s, h.a, m); res.Outcome != adapters.Accepted || res.MessageID != second.id {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, second.id)
			}
			waitShown(t, p, "the reply in the message its commit named", append(p.render("Hello"), p.render(final)...)...)
		})
	}
}

// A turn handed back and run again in the same process goes on in the
// message its first run showed.
func TestStreamedReplyOfARerunGoesOnInTheSameMessage(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true) // handed back: its reply may still come
			again := h.s.Stream(context.Background(), p.target.String(),
				sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
			defer again.End(true)
			again.Delta("Hello again")
			got := waitShown(t, p, "the rerun's text in the same message", p.render("Hello again")...)
			if got[0].id != h.first.id {
				t.Errorf("the rerun shows message %s, want %s", got[0].id, h.first.id)
			}
		})
	}
}

// A turn that ended without a reply (stopped, interrupted) has its reply
// in progress deleted: no reply will take its place, and its text is in
// no history.
func TestStreamedReplyOfAStoppedTurnIsDeleted(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(false)
			waitShown(t, p, "the reply in progress deleted")
		})
	}
}

// A turn said to have a reply to come whose commit then found its lease
// lost takes that back: its reply in progress is deleted all the same,
// as the turn's next run, elsewhere, shows its own.
func TestStreamedReplyTakenBackIsDeleted(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			h.ts.End(false)
			waitShown(t, p, "the reply in progress deleted")
		})
	}
}

// A platform that refuses to edit the reply in progress gets the reply
// posted anew, and the message in progress is deleted.
func TestStreamedReplyRefusedEditIsSentPlainly(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			a, s := h.a, h.s
			first := h.first
			h.ts.End(true)

			p.refuseEdit()
			final := "Hello **there**."
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			got := waitShown(t, p, "the reply alone", p.render(final)...)
			if got[0].id == first.id {
				t.Errorf("the reply is message %s, the one whose edit was refused", got[0].id)
			}
		})
	}
}

// A reply in parts whose first part was posted anew (the edit refused)
// and whose later part failed is finished by a retry that starts after
// the parts that went, and still deletes the message in progress.
func TestStreamedReplyRefusedEditThenRetriedDeletesTheMessageInProgress(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			final := "Hello **there**.\n\n" + strings.Repeat("A longer paragraph of the reply. ", 150)
			parts := p.render(final)
			if len(parts) < 2 {
				t.Fatalf("the final reply renders as %d parts, want several", len(parts))
			}
			m := reply(p, final)
			// The outbox keeps the parts as they go; the part after the
			// first fails for now.
			ctx := adapters.WithParts(context.Background(), func(got outbox.Parts) error {
				if m.Parts == (outbox.Parts{}) {
					p.failPost()
				}
				m.Parts = got
				return nil
			})
			p.refuseEdit()
			if res, ok := h.s.Send(ctx, h.a, m); !ok || res.Outcome != adapters.Transient {
				t.Fatalf("delivery with the second part failing = %+v (through the driver: %v), want Transient", res, ok)
			}
			if m.Parts.Done != 1 {
				t.Fatalf("parts kept %+v, want the first one done", m.Parts)
			}
			if res, ok := h.s.Send(ctx, h.a, m); !ok || res.Outcome != adapters.Accepted {
				t.Fatalf("retried delivery = %+v (through the driver: %v), want accepted", res, ok)
			}
			got := waitShown(t, p, "the reply alone, the message in progress deleted", parts...)
			if got[0].id == h.first.id {
				t.Errorf("the reply is message %s, the one whose edit was refused", got[0].id)
			}
		})
	}
}

// A process that dies mid-stream leaves its message in progress as it
// was; the reply, delivered by a process that streamed nothing, is sent
// once as usual.
func TestStreamedReplyAfterACrashIsSentOnce(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, a, dead := h.clk, h.a, h.s
			fresh := startStreaming(t, a, clk)
			final := "Hello **there**."
			if res := deliver(fresh, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			waitShown(t, p, "the partial message and the reply once", append(p.render("Hello"), p.render(final)...)...)
			// The dead process's turn never ends: its driver is cut off.
			gone, cancel := context.WithCancel(ctx)
			cancel()
			_ = dead.Shutdown(gone)
		})
	}
}

// Through the gateway: a reply on each platform shows as it is written,
// in one message that becomes the reply; with display.streaming off the
// reply is one plain send and nothing is edited.
func TestGatewayStreamsRepliesOnEachPlatform(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		for _, p := range streamPlatforms(t) {
			t.Run(p.name+"/streaming="+strconv.FormatBool(streaming), func(t *testing.T) {
				model := testkit.NewModelServer(t)
				cfg := testConfig(t, model)
				cfg.Platforms.AllowAllUsers = true
				cfg.Display.Streaming = streaming
				p.adapter(&cfg)
				h := startGateway(t, cfg, Options{})

				final := "Hello **there**, and more."
				gate := testkit.NewGate()
				step := testkit.Reply(final)
				if streaming {
					step.Midway = gate
				}
				model.Script(step)
				conv := p.target.String()
				in := sessions.Inbound{Conv: conv, Sender: "u1", MessageID: p.replyTo, Text: "hi"}
				if err := h.g.Router().Deliver(context.Background(), in); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				if streaming {
					first := waitShown(t, p, "the reply in progress", p.render("Hello ")...)[0]
					gate.Release()
					got := waitShown(t, p, "the reply in its place", p.render(final)...)
					if got[0].id != first.id {
						t.Errorf("the reply is message %s, want the one in progress, %s", got[0].id, first.id)
					}
					if n := metricValue(t, h.g.metrics, "herald_stream_calls_total", "platform="+p.name, "call=post", "result=ok"); n != 1 {
						t.Errorf("herald_stream_calls_total of posts = %v, want 1", n)
					}
					return
				}
				waitShown(t, p, "the reply", p.render(final)...)
				if n := p.edits(); n != 0 {
					t.Errorf("%d edits with streaming off, want none", n)
				}
				if r := model.Requests(); len(r) != 1 || r[0].Stream {
					t.Errorf("model requests %+v, want one not streamed", r)
				}
			})
		}
	}
}

// A turn whose chat has an earlier message the outbox has not sent yet
// (here held by a worker that went away, its claim not run out) shows
// nothing in progress: its reply goes through the outbox, after the
// earlier one, as a plain send.
func TestGatewayStreamsNothingWhileAnEarlierMessageIsUnsent(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			ctx := context.Background()
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Platforms.AllowAllUsers = true
			cfg.Display.Streaming = true
			p.adapter(&cfg)
			// On Redis: a gateway alone on a SQLite file would take over
			// the claim below at once.
			cfg.Store.Backend, cfg.Store.RedisURL = config.BackendRedis, testkit.StartRedis(t).URL()

			// The earlier message is claimed by a worker that is gone
			// before the gateway starts, so none of its workers takes it.
			db, err := OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				t.Fatal(err)
			}
			earlier := outbox.Message{Target: p.target, Conv: p.target.String(), Kind: agent.KindReply, Text: "Earlier"}
			if _, _, err := db.Outbox().Enqueue(ctx, earlier); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			held, err := db.Outbox().Claim(ctx, "gone", []string{p.name}, 1, time.Hour)
			if err != nil || len(held) != 1 {
				t.Fatalf("Claim = %v, %v; want the earlier message", held, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			h := startGateway(t, cfg, Options{})
			final := "Hello **there**, and more."
			gate := testkit.NewGate()
			t.Cleanup(gate.Release)
			step := testkit.Reply(final)
			step.Midway = gate
			model.Script(step)
			in := sessions.Inbound{Conv: p.target.String(), Sender: "u1", MessageID: p.replyTo, Text: "hi"}
			if err := h.g.Router().Deliver(ctx, in); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			// The model has written "Hello " and waits: the driver either
			// posts it or says why it does not.
			testkit.Eventually(t, "the driver's decision on the reply in progress", func() bool {
				return len(p.shown()) > 0 || strings.Contains(h.logs.String(), "an earlier message to the chat is not sent yet")
			})
			if got := p.shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q while the earlier message is unsent, want nothing", got)
			}
			gate.Release()
			testkit.Eventually(t, "the reply queued behind the earlier message", func() bool {
				ms, err := h.g.Store().Outbox().Pending(ctx, 10)
				return err == nil && len(ms) == 2
			})
			if got := p.shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q before the earlier message went, want nothing", got)
			}
			// The worker's claim is given back: the earlier message goes,
			// then the reply.
			if err := h.g.Store().Outbox().Release(ctx, held[0], time.Now(), "gone"); err != nil {
				t.Fatalf("Release: %v", err)
			}
			waitShown(t, p, "the earlier message, then the reply", append(p.render("Earlier"), p.render(final)...)...)
			if n := p.edits(); n != 0 {
				t.Errorf("%d edits, want none: the reply is a plain send", n)
			}
		})
	}
}

// The driver reads the outbox once, before the first post: a chat with a
// message not sent yet, or an outbox it cannot read, shows nothing in
// progress, and the driver leaves the turn at once; the reply is then
// sent as usual.
func TestStreamedReplyIsNotShownWhileTheOutboxHoldsAnEarlierMessage(t *testing.T) {
	target := outbox.Target{Platform: "telegram", Chat: "4242"}
	for _, tc := range []struct {
		name string
		ob   func(t *testing.T, clk clock.Clock) outbox.Store
	}{
		{"unsent", func(t *testing.T, clk clock.Clock) outbox.Store {
			ob := openSQLite(t, clk).Outbox()
			m := outbox.Message{Target: target, Kind: agent.KindReply, Text: "Earlier", NextAttempt: clk.Now().Add(time.Minute)}
			if _, _, err := ob.Enqueue(context.Background(), m); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			return ob
		}},
		{"read fails", func(t *testing.T, clk clock.Clock) outbox.Store {
			db := openSQLite(t, clk)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return db.Outbox()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := streamPlatforms(t)[0]
			if p.target != target {
				t.Fatalf("the platform's target is %s, want %s", p.target, target)
			}
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			a := p.adapter(nil)
			s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{a}, Clock: clk, Logger: quietLogger(), Outbox: tc.ob(t, clk)})
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			ts := s.Stream(context.Background(), p.target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn followed")
			}
			ts.Delta("Hello")
			// Were it shown, the driver would follow the turn until End.
			done := ts.(*replyStream).done
			testkit.Eventually(t, "the driver leaving the turn", func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			})
			if got := p.shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q, want nothing", got)
			}
			if meta := ts.End(true); meta != nil {
				t.Errorf("End = %v, want no message named", meta)
			}
			m := reply(p, "Hello there")
			if res := deliver(s, a, m); res.Outcome != adapters.Accepted {
				t.Fatalf("deliver = %+v", res)
			}
			waitShown(t, p, "the reply, sent as usual", p.render("Hello there")...)
		})
	}
}

// The reply shown in progress is masked as the delivered one is: a
// secret the model writes never appears in the chat, not even for the
// moments before the reply is done.
func TestStreamedReplyIsRedacted(t *testing.T) {
	for _, p := range streamPlatforms(t) {
		t.Run(p.name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{p.adapter(nil)}, Every: 1500 * time.Millisecond, Clock: clk,
				Logger: slog.New(slog.DiscardHandler), Redact: redact.New([]string{"sk-stream-secret"}).String})
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			ts := s.Stream(context.Background(), p.target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.replyTo}}, p.target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn streamed")
			}
			ts.Delta("the key is sk-stream-secret")
			var shown []chatMessage
			testkit.Eventually(t, "the reply in progress posted", func() bool { shown = p.shown(); return len(shown) == 1 })
			if text := shown[0].text; !strings.Contains(text, "the key is") || strings.Contains(text, "sk-stream-secret") {
				t.Errorf("the chat shows %q, want the reply with its secret masked", text)
			}
			waitPosted(t, ts)
			ts.End(false)
		})
	}
}
