package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/slack"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
)

// onEachStore runs f on a gateway config for SQLite and one for Redis.
func onEachStore(t *testing.T, f func(t *testing.T, model *testkit.ModelServer, cfg config.Config)) {
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Platforms.AllowAllUsers = true
			// The reply goes out after its turn's commit, not in progress
			// before it: once it shows, the thread's history holds it.
			cfg.Display.Streaming = false
			if backend == config.BackendRedis {
				cfg.Store.Backend, cfg.Store.RedisURL = config.BackendRedis, testkit.StartRedis(t).URL()
			}
			f(t, model, cfg)
		})
	}
}

// wantActsOnThread checks a command's answer: it acted on the thread
// that starts with "fix the login bug" and says so.
func wantActsOnThread(t *testing.T, answer string) {
	t.Helper()
	if !strings.HasPrefix(answer, "(in the thread of ") || !strings.Contains(answer, "fix the login bug") {
		t.Errorf("the answer %q does not say which thread it acted on", answer)
	}
	if !strings.Contains(answer, "Review started") {
		t.Errorf("the answer %q: /review did not act on the thread's conversation", answer)
	}
}

// A Slack slash command typed in a channel carries no thread, while
// herald answers an @-mention there in a thread: the command acts on the
// user's latest conversation with herald in that channel, and its answer,
// in the channel, says which.
func TestSlackSlashCommandInAChannelActsOnTheUsersThread(t *testing.T) {
	onEachStore(t, func(t *testing.T, model *testkit.ModelServer, cfg config.Config) {
		fake := slackfake.New(t)
		cfg.Platforms.Slack = config.Slack{BotToken: fake.BotToken, SigningSecret: "secret", APIURL: fake.URL()}
		h := startGateway(t, cfg, Options{})
		base := "http://" + h.g.Addr()
		post := func(r *http.Request) {
			t.Helper()
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", r.URL.Path, res.StatusCode)
			}
		}

		const alice, channel, thread = "U0ALICE", "C0WORK", "1700000100.000100"
		model.Script(testkit.Reply("Looking into the login bug."))
		post(slackfake.SignedRequest(base+slack.EventsPath, "secret", time.Now(), "application/json",
			slackfake.EventCallback(fake.TeamID, "Ev1", map[string]any{
				"type": "app_mention", "user": alice, "text": "<@" + fake.BotUserID + "> fix the login bug",
				"ts": thread, "channel": channel, "event_ts": thread,
			})))
		if got := fake.WaitCalls("chat.postMessage", 1)[0]; got.Params.Get("thread_ts") != thread {
			t.Fatalf("the reply went to thread %q, want the mention's (%s)", got.Params.Get("thread_ts"), thread)
		}

		form := slackfake.SlashCommand{Team: fake.TeamID, Channel: channel, ChannelName: "work", User: alice,
			Command: "/review", TriggerID: "trig1"}.Form()
		post(slackfake.SignedRequest(base+slack.CommandsPath, "secret", time.Now(), "application/x-www-form-urlencoded",
			[]byte(form.Encode())))
		answer := fake.WaitCalls("chat.postMessage", 2)[1]
		if answer.Params.Get("channel") != channel || answer.Params.Get("thread_ts") != "" {
			t.Errorf("the answer went to %s/%s, want the channel the command was typed in",
				answer.Params.Get("channel"), answer.Params.Get("thread_ts"))
		}
		wantActsOnThread(t, answer.Params.Get("text"))
	})
}

// The same on Discord: a user who talks to herald in a thread and types
// an application command in the thread's channel reaches that thread's
// conversation.
func TestDiscordCommandInAChannelActsOnTheUsersThread(t *testing.T) {
	onEachStore(t, func(t *testing.T, model *testkit.ModelServer, cfg config.Config) {
		const guild, channel, thread, user = "110000000000000001", "120000000000000001", "120000000000000009", "150000000000000001"
		fake := discordfake.New(t, discordfake.Options{})
		fake.SetChannel(discordfake.Channel{ID: thread, GuildID: guild, Type: discordfake.ChannelPublicThread, ParentID: channel})
		fake.SetChannel(discordfake.Channel{ID: channel, GuildID: guild, Type: discordfake.ChannelText})
		cfg.Platforms.Discord.Token = fake.Token()
		cfg.Platforms.Discord.APIURL = fake.URL()
		startGateway(t, cfg, Options{})

		model.Script(testkit.Reply("Looking into the login bug."))
		bot := discordfake.User{ID: fake.BotID(), Username: "herald", Bot: true}
		fake.SendMessage(discordfake.MessageEvent{ChannelID: thread, GuildID: guild,
			Author: discordfake.User{ID: user, Username: "ada"}, Content: "<@" + fake.BotID() + "> fix the login bug",
			Mentions: []discordfake.User{bot}})
		fake.Wait("the reply in the thread", func() bool {
			for _, m := range fake.Messages() {
				if m.ChannelID == thread {
					return true
				}
			}
			return false
		})

		fake.SendInteraction(discordfake.InteractionEvent{ChannelID: channel, GuildID: guild, ChannelType: discordfake.ChannelText,
			User: discordfake.User{ID: user, Username: "ada"}, Name: "review"})
		var answer string
		fake.Wait("the command's answer", func() bool {
			for _, m := range fake.Messages() {
				if m.Followup {
					answer = m.Content
					return true
				}
			}
			return false
		})
		wantActsOnThread(t, answer)
	})
}
