package telegram_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func TestDMIsDeliveredAndAnswered(t *testing.T) {
	fake, a, in := polling(t, nil)
	u := fake.Queue(telegramfake.Incoming{From: 42, Username: "ann", Text: "hello herald"})

	got := in.Wait(t, 1)[0]
	mid := strconv.Itoa(u.MessageID)
	want := sessions.Inbound{
		Conv:      "telegram:42",
		Sender:    "42",
		MessageID: "42:" + mid,
		Text:      "hello herald",
		Meta:      map[string]string{telegram.MetaMessageID: mid, telegram.MetaChatType: "private"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("inbound (-want +got):\n%s", diff)
	}
	fake.WaitConfirmed(u.ID)

	target, err := sessions.ReplyTarget(got)
	if err != nil {
		t.Fatal(err)
	}
	res := a.Send(context.Background(), outbox.Message{ID: "o1", Target: target, Text: "**hi** & welcome", ReplyTo: got.MessageID, Kind: "reply"})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %v %q", res.Outcome, res.Reason)
	}
	sent := fake.Sent(42)
	if len(sent) != 1 {
		t.Fatalf("%d messages sent, want 1", len(sent))
	}
	s := sent[0]
	if s.Text != "<b>hi</b> &amp; welcome" || s.ParseMode != "HTML" || s.ReplyTo != u.MessageID || res.MessageID != strconv.Itoa(s.ID) {
		t.Errorf("sent %+v, result id %q; want the HTML reply to message %d", s, res.MessageID, u.MessageID)
	}
}

func TestGroupMessagesNeedTheBot(t *testing.T) {
	const group = -100200
	fake, _, in := polling(t, nil)
	bot := "@" + fake.BotName()
	fake.Queue(telegramfake.Incoming{Chat: group, From: 42, Text: "just chatting"})
	fake.Queue(telegramfake.Incoming{Chat: group, From: 42, Text: "@someone_else look"})
	fake.Queue(telegramfake.Incoming{Chat: group, From: 42, Text: "/status@other_bot"})
	fake.Queue(telegramfake.Incoming{Chat: group, From: 43, Text: bot + " what is up?"})
	fake.Queue(telegramfake.Incoming{Chat: group, From: 42, Text: "and this", ReplyTo: 1, ReplyToBot: true})
	fake.Queue(telegramfake.Incoming{Chat: group, From: 42, Text: "/status@" + fake.BotName()})
	last := fake.Queue(telegramfake.Incoming{Chat: group, Thread: 7, From: 42, Text: "/new"})

	got := in.Wait(t, 4)
	fake.WaitConfirmed(last.ID)
	var texts []string
	for _, g := range got {
		texts = append(texts, g.Conv+" "+g.Text+" → "+g.Meta[sessions.MetaTarget])
	}
	want := []string{
		"telegram:-100200:user:43 what is up? → telegram:-100200",
		"telegram:-100200:user:42 and this → telegram:-100200",
		"telegram:-100200:user:42 /status@" + fake.BotName() + " → telegram:-100200",
		"telegram:-100200:7 /new → ",
	}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
	if n := len(in.All()); n != 4 {
		t.Errorf("%d delivered, want 4", n)
	}
}

func TestGroupTriggerAllTakesEveryMessage(t *testing.T) {
	fake, _, in := polling(t, func(o *telegram.Options) {
		o.Config.GroupTrigger = config.TriggerAll
		o.GroupSessions = adapters.ScopeShared
	})
	fake.Queue(telegramfake.Incoming{Chat: -5, ChatType: "group", From: 42, Text: "just chatting"})
	got := in.Wait(t, 1)[0]
	if got.Conv != "telegram:-5" || got.Text != "just chatting" || got.Meta[sessions.MetaTarget] != "" {
		t.Errorf("got %+v, want the shared group conversation", got)
	}
}

func TestRefusedSenderGetsNothing(t *testing.T) {
	var logs testkit.LogBuffer
	fake, _, in := polling(t, func(o *telegram.Options) {
		o.Access = adapters.NewAccess(telegram.Platform, []string{"@ann"}, false)
		o.Logger = logs.Logger()
	})
	refused := fake.Queue(telegramfake.Incoming{From: 99, Username: "mallory", Text: "let me in"})
	fake.Queue(telegramfake.Incoming{From: 42, Username: "Ann", Text: "hi"})

	got := in.Wait(t, 1)
	fake.WaitConfirmed(refused.ID + 1)
	if len(in.All()) != 1 || got[0].Sender != "42" {
		t.Errorf("delivered %+v, want only ann's message", in.All())
	}
	if fake.Served(refused.ID) == 0 {
		t.Error("the refused update was never received")
	}
	var refusals []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "refused a sender") {
			refusals = append(refusals, line)
		}
	}
	if len(refusals) != 1 || !strings.Contains(refusals[0], "user_name=mallory") || strings.Count(refusals[0], "platform=telegram") != 1 {
		t.Errorf("refusals logged: %q; want mallory's, naming the platform once", refusals)
	}
}

func TestCommandsAreRegistered(t *testing.T) {
	fake, _, _ := polling(t, func(o *telegram.Options) {
		o.Commands = []adapters.CommandInfo{
			{Name: "new", Summary: "Start a fresh session"},
			{Name: "queue", Args: "MESSAGE", Summary: "Queue a message for after this turn"},
			{Name: "Not-Valid", Summary: "dropped: Telegram refuses the name"},
			{Name: "reload-mcp", Aliases: []string{"reload_mcp"}, Summary: "offered by its alias"},
			{Name: "no-alias", Summary: "dropped: no name Telegram takes"},
		}
	})
	fake.WaitCalls("setMyCommands", 1)
	want := []telegramfake.Command{
		{Command: "new", Description: "Start a fresh session"},
		{Command: "queue", Description: "Queue a message for after this turn (MESSAGE)"},
		{Command: "reload_mcp", Description: "offered by its alias"},
	}
	if diff := cmp.Diff(want, fake.Commands()); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestGetMeIsRetriedBeforePolling(t *testing.T) {
	fake := telegramfake.New(t, "")
	fake.Fail("getMe", 2, telegramfake.ServerError)
	a := newAdapter(t, options(fake))
	in := newInbox()
	run(t, a, in)
	fake.Queue(telegramfake.Incoming{Chat: -7, From: 42, Text: "@" + fake.BotName() + " hi"})

	if got := in.Wait(t, 1)[0]; got.Text != "hi" {
		t.Errorf("text %q, want the mention dropped", got.Text)
	}
	calls := fake.Calls("getMe", "getUpdates")
	if len(calls) < 4 || calls[0].Status != 500 || calls[1].Status != 500 || calls[2].Method != "getMe" || calls[2].Status != 200 {
		t.Errorf("calls %v, want two failed getMe, one answered, then getUpdates", methods(calls))
	}
}

func methods(calls []telegramfake.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Method+" "+strconv.Itoa(c.Status))
	}
	return out
}

func TestExclusive(t *testing.T) {
	fake := telegramfake.New(t, "")
	opts := options(fake)
	a := newAdapter(t, opts)
	if got, want := a.Exclusive(), "telegram:polling:"+strconv.FormatInt(fake.BotID(), 10); got != want {
		t.Errorf("polling Exclusive %q, want %q", got, want)
	}
	opts.Config.Token = "not-a-numbered-token"
	if got := newAdapter(t, opts).Exclusive(); !strings.HasPrefix(got, "telegram:polling:") || strings.Contains(got, opts.Config.Token) {
		t.Errorf("Exclusive %q names the token", got)
	}
	opts.Config.Mode, opts.Config.WebhookURL, opts.Config.WebhookSecret = config.TelegramWebhook, "https://bot.example/tg", "s"
	if got := newAdapter(t, opts).Exclusive(); got != "" {
		t.Errorf("webhook Exclusive %q, want empty", got)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		desc   string
		change func(*config.Telegram)
	}{
		{"no token", func(c *config.Telegram) { c.Token = "" }},
		{"unknown mode", func(c *config.Telegram) { c.Mode = "push" }},
		{"unknown trigger", func(c *config.Telegram) { c.GroupTrigger = "never" }},
		{"api url without scheme", func(c *config.Telegram) { c.APIURL = "127.0.0.1:8081" }},
		{"webhook without secret", func(c *config.Telegram) {
			c.Mode, c.WebhookURL = config.TelegramWebhook, "https://bot.example/tg"
		}},
		{"webhook without path", func(c *config.Telegram) {
			c.Mode, c.WebhookURL, c.WebhookSecret = config.TelegramWebhook, "https://bot.example", "s"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			opts := telegram.Options{Config: config.Telegram{Token: "1:x", Mode: config.TelegramPolling}}
			tc.change(&opts.Config)
			if _, err := telegram.New(opts); !errs.Is(err, errs.Invalid) {
				t.Errorf("New: %v, want an Invalid error", err)
			}
		})
	}
}
