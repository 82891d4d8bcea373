package adaptertest

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/adapters/discord"
	"github.com/heraldgw/herald/adapters/slack"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
)

// Message is a message of the bot's as the chat shows it now.
type Message struct{ ID, Text string }

// Chat is a chat on a fake platform, and what it shows.
type Chat struct {
	Name    string
	Target  outbox.Target
	ReplyTo string // the user's message the reply answers
	Dialect chatfmt.Dialect
	Limit   int
	// Adapter makes the real adapter against the fake (nil cfg: the
	// adapter alone) or sets the gateway's config to serve it.
	Adapter func(cfg *config.Config) adapters.Adapter
	// Shown is the bot's messages in the chat, in order, deleted ones
	// left out.
	Shown func() []Message
	Edits func() int
	// RefuseEdit makes the next edit fail for good (the message is gone);
	// FailEdit makes it fail for now; FailPost makes the next post fail
	// for now.
	RefuseEdit, FailEdit, FailPost func()
	// RateLimitEdit makes the next edit answer the platform's rate
	// limit, and returns the wait it asks for.
	RateLimitEdit func() time.Duration
}

// Render is how the platform shows text: its parts.
func (p Chat) Render(text string) []string {
	return chatfmt.RenderParts(text, p.Dialect, p.Limit)
}

// StreamingChats are a chat on each platform whose adapter shows replies
// in progress (adapters.Streamer): Telegram, Slack and Discord, each
// against its fake.
func StreamingChats(t testing.TB) []Chat {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	return []Chat{
		func() Chat {
			fake := telegramfake.New(t, "")
			const chat = 4242
			return Chat{
				Name: "telegram", Target: outbox.Target{Platform: "telegram", Chat: strconv.Itoa(chat)}, ReplyTo: "4242:7",
				Dialect: chatfmt.TelegramHTML, Limit: chatfmt.TelegramLimit,
				Adapter: func(cfg *config.Config) adapters.Adapter {
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
				Shown: func() []Message {
					var out []Message
					for _, m := range fake.Sent(chat) {
						if !m.Deleted {
							out = append(out, Message{strconv.Itoa(m.ID), m.Text})
						}
					}
					return out
				},
				Edits: func() int { return len(fake.Calls("editMessageText")) },
				RefuseEdit: func() {
					fake.Fail("editMessageText", 1, telegramfake.Failure{Status: http.StatusBadRequest, Description: "Bad Request: message to edit not found"})
				},
				FailEdit: func() { fake.Fail("editMessageText", 1, telegramfake.ServerError) },
				FailPost: func() { fake.Fail("sendMessage", 1, telegramfake.ServerError) },
				RateLimitEdit: func() time.Duration {
					fake.Fail("editMessageText", 1, telegramfake.TooManyRequests(5))
					return 5 * time.Second
				},
			}
		}(),
		func() Chat {
			fake := slackfake.New(t)
			return Chat{
				Name: "slack", Target: outbox.Target{Platform: "slack", Chat: fake.TeamID, Thread: "C0STREAM:1690000000.000100"},
				ReplyTo: "C0STREAM:1690000000.000100", Dialect: chatfmt.SlackMrkdwn, Limit: chatfmt.SlackLimit,
				Adapter: func(cfg *config.Config) adapters.Adapter {
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
				Shown: func() []Message {
					var out []Message
					for _, c := range fake.Calls("") {
						if c.TS == "" {
							continue
						}
						switch c.Method {
						case "chat.postMessage":
							out = append(out, Message{c.TS, c.Params.Get("text")})
						case "chat.update":
							for i := range out {
								if out[i].ID == c.TS {
									out[i].Text = c.Params.Get("text")
								}
							}
						case "chat.delete":
							out = slices.DeleteFunc(out, func(m Message) bool { return m.ID == c.TS })
						}
					}
					return out
				},
				Edits: func() int { return len(fake.Calls("chat.update")) },
				RefuseEdit: func() {
					fake.Fail("chat.update", slackfake.Failure{Error: "message_not_found"})
				},
				FailEdit: func() { fake.Fail("chat.update", slackfake.Failure{Status: http.StatusInternalServerError}) },
				FailPost: func() { fake.Fail("chat.postMessage", slackfake.Failure{Status: http.StatusInternalServerError}) },
				RateLimitEdit: func() time.Duration {
					fake.Fail("chat.update", slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 5})
					return 5 * time.Second
				},
			}
		}(),
		func() Chat {
			fake := discordfake.New(t, discordfake.Options{})
			const guild, channel = "110000000000000001", "120000000000000001"
			return Chat{
				Name: "discord", Target: outbox.Target{Platform: "discord", Chat: guild, Thread: channel},
				ReplyTo: "130000000000000001", Dialect: chatfmt.DiscordMarkdown, Limit: chatfmt.DiscordLimit,
				Adapter: func(cfg *config.Config) adapters.Adapter {
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
				Shown: func() []Message {
					deleted := fake.Deletes()
					var out []Message
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
						out = append(out, Message{m.ID, text})
					}
					return out
				},
				Edits: func() int { return len(fake.Edits()) },
				RefuseEdit: func() {
					fake.FailNext(discordfake.RouteEdit, 1, discordfake.Failure{Status: http.StatusNotFound, Code: 10008, Message: "Unknown Message"})
				},
				FailEdit: func() { fake.FailNext(discordfake.RouteEdit, 1, discordfake.ServerError()) },
				FailPost: func() { fake.FailNext(discordfake.RouteMessage, 1, discordfake.ServerError()) },
				RateLimitEdit: func() time.Duration {
					// The SDK itself holds the next call until the bucket's
					// reset, in real time: a short one.
					fake.FailNext(discordfake.RouteEdit, 1, discordfake.RateLimit(100*time.Millisecond))
					return 100 * time.Millisecond
				},
			}
		}(),
	}
}

// WaitShown waits, up to 10 s, until the chat shows want, message by
// message, and returns what it shows.
func WaitShown(t testing.TB, p Chat, what string, want ...string) []Message {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.Shown()
		if shows(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: the chat shows %q", what, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// shows reports whether got's texts are want.
func shows(got []Message, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if got[i].Text != want[i] {
			return false
		}
	}
	return true
}
