package discord

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

const (
	fakeBot   = "900000000000000001"
	guild     = "110000000000000001"
	channel   = "120000000000000001"
	thread    = "130000000000000001"
	dmChannel = "140000000000000001"
	ada       = "150000000000000001"
	bob       = "160000000000000002"
)

// botToken is a token of Discord's shape for bot id: its first part is
// the id in base64.
func botToken(id string) string {
	return base64.RawStdEncoding.EncodeToString([]byte(id)) + ".GhIjKl.not-a-secret"
}

// inbox records what the adapter delivers, with when. While failing is
// above 0, Deliver fails as a store that is down would, one failure less
// each time.
type inbox struct {
	ch      chan delivered
	failing atomic.Int32
	calls   atomic.Int32
}

type delivered struct {
	in sessions.Inbound
	at time.Time
}

func newInbox() *inbox { return &inbox{ch: make(chan delivered, 64)} }

func (b *inbox) Deliver(_ context.Context, in sessions.Inbound) error {
	b.calls.Add(1)
	if b.failing.Add(-1) >= 0 {
		return errs.E("store.Append", errs.Unavailable, "the store is down")
	}
	b.ch <- delivered{in: in, at: time.Now()}
	return nil
}

// next is the next delivered Inbound; it fails the test after 10 s.
func (b *inbox) next(t *testing.T) delivered {
	t.Helper()
	select {
	case d := <-b.ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a delivery")
		return delivered{}
	}
}

type harness struct {
	fake  *discordfake.Server
	a     *Adapter
	inbox *inbox
}

type setup struct {
	cfg      func(*config.Discord)
	opts     func(*Options)
	fakeOpts discordfake.Options
	before   func(*discordfake.Server) // scripts the fake before Run starts
	noRun    bool
}

// start runs an adapter against a fresh fake Discord until the test ends.
func start(t *testing.T, s setup) *harness {
	t.Helper()
	if s.fakeOpts.Token == "" {
		s.fakeOpts.Token = botToken(fakeBot)
	}
	s.fakeOpts.BotID = fakeBot
	fake := discordfake.New(t, s.fakeOpts)
	if s.before != nil {
		s.before(fake)
	}
	cfg := config.Discord{Token: fake.Token(), APIURL: fake.URL(), GroupTrigger: config.TriggerMention}
	if s.cfg != nil {
		s.cfg(&cfg)
	}
	opts := Options{
		Config: cfg, Access: adapters.NewAccess(Platform, nil, true), GroupSessions: adapters.ScopeShared,
		Logger: slog.New(slog.DiscardHandler), RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
	}
	if s.opts != nil {
		s.opts(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	a.deliverRetry = adapters.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}
	h := &harness{fake: fake, a: a, inbox: newInbox()}
	if s.noRun {
		return h
	}
	testkit.Run(t, func(ctx context.Context) error { return a.Run(ctx, h.inbox) })
	fake.Wait("the gateway session", fake.Connected)
	return h
}

func target(t *testing.T, in sessions.Inbound) outbox.Target {
	t.Helper()
	tg, err := sessions.ReplyTarget(in)
	if err != nil {
		t.Fatalf("ReplyTarget: %v", err)
	}
	return tg
}

func TestDMIsDeliveredAndAnswered(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	id := h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: discordfake.User{ID: ada, Username: "ada"}, Content: "hello"})

	in := h.inbox.next(t).in
	if in.Conv != "discord:dm:"+dmChannel || in.MessageID != id || in.Text != "hello" || in.Sender != ada {
		t.Fatalf("delivered %+v, want the DM in discord:dm:%s", in, dmChannel)
	}
	res := h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: target(t, in), Text: "hi **there**", ReplyTo: in.MessageID})
	if res.Outcome != adapters.Accepted || res.MessageID == "" {
		t.Fatalf("Send = %+v, want accepted with an id", res)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 1 {
		t.Fatalf("posted %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.ChannelID != dmChannel || m.Content != "hi **there**" || m.ReplyTo != id || m.ID != res.MessageID || m.Followup {
		t.Errorf("posted %+v, want a reply to %s in %s", m, id, dmChannel)
	}
	if !strings.Contains(string(m.AllowedMentions), `"parse":[]`) {
		t.Errorf("allowed_mentions = %s, want no parsed mentions", m.AllowedMentions)
	}
	want := int(intents)
	if got := h.fake.Intents(); got != want {
		t.Errorf("intents = %b, want %b (guilds, guild messages, DMs, message content)", got, want)
	}
}

func TestGuildMessagesNeedAMention(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	author := discordfake.User{ID: ada, Username: "ada"}
	h.fake.SendMessage(discordfake.MessageEvent{GuildID: guild, ChannelID: channel, Author: author, Content: "not for the bot"})
	id := h.fake.SendMessage(discordfake.MessageEvent{
		GuildID: guild, ChannelID: channel, Author: author, Content: "<@" + fakeBot + "> what now?",
		Mentions: []discordfake.User{{ID: fakeBot, Username: "herald", Bot: true}},
	})
	// Events are handled in order, so the unaddressed one came first and
	// was dropped if this is the addressed one.
	in := h.inbox.next(t).in
	if in.MessageID != id || in.Text != "what now?" || in.Conv != "discord:"+guild+":"+channel {
		t.Fatalf("delivered %+v, want only the mention %s as \"what now?\"", in, id)
	}
}

func TestThreadMessageKeyAndReply(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	h.fake.SetChannel(discordfake.Channel{ID: thread, GuildID: guild, Type: discordfake.ChannelPublicThread, ParentID: channel})
	h.fake.SendMessage(discordfake.MessageEvent{
		GuildID: guild, ChannelID: thread, Author: discordfake.User{ID: ada}, Content: "<@" + fakeBot + "> in a thread",
	})
	in := h.inbox.next(t).in
	if want := "discord:" + guild + ":" + channel + ":" + thread; in.Conv != want {
		t.Fatalf("conv = %q, want %q", in.Conv, want)
	}
	if res := h.a.Send(context.Background(), outbox.Message{Target: target(t, in), Text: "answer"}); res.Outcome != adapters.Accepted {
		t.Fatalf("Send = %+v", res)
	}
	if msgs := h.fake.Messages(); len(msgs) != 1 || msgs[0].ChannelID != thread {
		t.Errorf("posted %+v, want one message in the thread %s", msgs, thread)
	}
	// The channel's kind is remembered: a second message asks no more.
	h.fake.SendMessage(discordfake.MessageEvent{GuildID: guild, ChannelID: thread, Author: discordfake.User{ID: ada}, Content: "<@" + fakeBot + "> again"})
	h.inbox.next(t)
	if n := len(h.fake.Calls(discordfake.RouteChannel)); n != 1 {
		t.Errorf("GET /channels calls = %d, want 1", n)
	}
}

func TestRefusedUserIsNotDelivered(t *testing.T) {
	t.Parallel()
	h := start(t, setup{opts: func(o *Options) { o.Access = adapters.NewAccess(Platform, []string{ada}, false) }})
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: discordfake.User{ID: bob, Username: "bob"}, Content: "let me in"})
	refused := h.fake.SendInteraction(discordfake.InteractionEvent{ChannelID: dmChannel, ChannelType: discordfake.ChannelDM, User: discordfake.User{ID: bob}, Name: "status"})
	id := h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: discordfake.User{ID: ada, Username: "ada"}, Content: "hi"})

	if in := h.inbox.next(t).in; in.MessageID != id {
		t.Fatalf("delivered %+v first, want only ada's message %s", in, id)
	}
	cbs := h.fake.Callbacks()
	if len(cbs) != 1 || cbs[0].InteractionID != refused.ID || cbs[0].Type != 4 || !strings.Contains(string(cbs[0].Data), `"flags":64`) {
		t.Errorf("callbacks = %+v, want one ephemeral answer to the refused command", cbs)
	}
}

// TestDeliveryOutlastsAStoreOutage: Discord never sends a gateway event
// again, so a message is tried until the inbox takes it, however many
// attempts that needs while Run runs.
func TestDeliveryOutlastsAStoreOutage(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	const failures = 3 * deliverAttempts
	h.inbox.failing.Store(failures)
	id := h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: discordfake.User{ID: ada, Username: "ada"}, Content: "still there?"})
	if in := h.inbox.next(t).in; in.MessageID != id || in.Text != "still there?" {
		t.Fatalf("delivered %+v, want message %s", in, id)
	}
	if n := h.inbox.calls.Load(); n != failures+1 {
		t.Errorf("Deliver was called %d times, want %d", n, failures+1)
	}
}

func TestInteractionIsDeferredThenFollowedUp(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	sent := time.Now()
	it := h.fake.SendInteraction(discordfake.InteractionEvent{
		GuildID: guild, ChannelID: channel, User: discordfake.User{ID: ada, Username: "ada"}, Name: "review",
		Options: []discordfake.Option{{Name: "focus", Type: 3, Value: "the tests"}},
	})
	d := h.inbox.next(t)
	if d.in.Text != "/review the tests" || d.in.Conv != "discord:"+guild+":"+channel || !strings.HasPrefix(d.in.MessageID, "ia:"+it.ID+":") {
		t.Fatalf("delivered %+v, want /review the tests keyed by the interaction", d.in)
	}
	cbs := h.fake.Callbacks()
	if len(cbs) != 1 || cbs[0].Type != 5 || cbs[0].InteractionID != it.ID {
		t.Fatalf("callbacks = %+v, want one deferral (type 5)", cbs)
	}
	if lag := cbs[0].At.Sub(sent); lag > 3*time.Second {
		t.Errorf("deferred after %v, want within 3 s", lag)
	}
	if cbs[0].At.After(d.at) {
		t.Errorf("deferred at %v, after the delivery at %v", cbs[0].At, d.at)
	}

	res := h.a.Send(context.Background(), outbox.Message{Target: target(t, d.in), Text: "looks good", ReplyTo: d.in.MessageID})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send = %+v", res)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 1 || !msgs[0].Followup || msgs[0].Token != it.Token || msgs[0].Content != "looks good" || msgs[0].ID != res.MessageID {
		t.Errorf("posted %+v, want one follow-up with the interaction's token", msgs)
	}
}

// An answer whose interaction token has lapsed, or whose follow-up Discord
// refuses, goes to the channel.
func TestInteractionAnswerFallsBackToTheChannel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		clock     clock.Clock
		deferred  bool
		followups int // follow-up attempts that reach Discord
	}{
		{desc: "the token has lapsed", clock: clock.NewFake(time.Now().Add(16 * time.Minute)), deferred: true, followups: 0},
		{desc: "the interaction was never answered", clock: clock.Real{}, followups: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := start(t, setup{noRun: true, opts: func(o *Options) { o.Clock = tc.clock }})
			it := h.fake.SendInteraction(discordfake.InteractionEvent{GuildID: guild, ChannelID: channel, User: discordfake.User{ID: ada}, Name: "status"})
			ref := interactionRef{id: it.ID, app: h.fake.AppID(), token: it.Token}
			if tc.deferred {
				// As Run would have done.
				err := h.a.rest.InteractionRespond(&discordgo.Interaction{ID: ref.id, AppID: ref.app, Token: ref.token},
					&discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
				if err != nil {
					t.Fatalf("deferring: %v", err)
				}
			}
			tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel)
			res := h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: tg, Text: "late answer", ReplyTo: ref.String()})
			if res.Outcome != adapters.Accepted {
				t.Fatalf("Send = %+v", res)
			}
			msgs := h.fake.Messages()
			if len(msgs) != 1 || msgs[0].Followup || msgs[0].ChannelID != channel || msgs[0].ReplyTo != "" {
				t.Errorf("posted %+v, want one plain message in %s", msgs, channel)
			}
			if n := len(h.fake.Calls(discordfake.RouteFollowup)); n != tc.followups {
				t.Errorf("follow-up attempts = %d, want %d", n, tc.followups)
			}
		})
	}
}

func TestLongReplyArrivesInOrderedParts(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	var paras []string
	for i := range 31 {
		paras = append(paras, strings.Repeat(string(rune('a'+i%26)), 95))
	}
	text := strings.Join(paras, "\n\n") // 31 × 97 - 2 = 3,005 characters
	tg, _ := outbox.ParseTarget("discord:dm:" + dmChannel)
	res := h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: tg, Text: text, ReplyTo: "170000000000000001"})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send = %+v", res)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 2 {
		t.Fatalf("posted %d messages, want 2", len(msgs))
	}
	if res.MessageID != msgs[0].ID || msgs[0].ReplyTo != "170000000000000001" || msgs[1].ReplyTo != "" {
		t.Errorf("first id %s, replies %q %q; want the first part to reply and be the result", res.MessageID, msgs[0].ReplyTo, msgs[1].ReplyTo)
	}
	var got []string
	for _, m := range msgs {
		if n := len([]rune(m.Content)); n > 2000 {
			t.Errorf("a part has %d characters", n)
		}
		got = append(got, strings.Split(m.Content, "\n\n")...)
	}
	if strings.Join(got, "\n\n") != text {
		t.Errorf("the parts do not read back as the reply in order")
	}
}

func TestRateLimitIsHonoured(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel)
	text := strings.Repeat("word ", 300) + "\n\n" + strings.Repeat("more ", 300) // two parts
	h.fake.FailAt(discordfake.RouteMessage, 2, discordfake.RateLimit(300*time.Millisecond))

	var kept outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = p
		return nil
	})
	res := h.a.Send(ctx, outbox.Message{ID: "o1", Target: tg, Text: text})
	if res.Outcome != adapters.RateLimited || res.RetryAfter != 300*time.Millisecond {
		t.Fatalf("Send = %+v, want rate limited for 300ms", res)
	}
	// The outbox waits RetryAfter and sends again, with the parts it
	// kept: only the second part goes out, and not before Discord's wait
	// is over.
	res = h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: tg, Text: text, Parts: kept})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("retry = %+v, want accepted", res)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Content, "word") || !strings.HasPrefix(msgs[1].Content, "more") {
		t.Fatalf("posted %d messages, want the two parts once each in order", len(msgs))
	}
	if res.MessageID != msgs[0].ID {
		t.Errorf("MessageID = %s, want the first part's %s", res.MessageID, msgs[0].ID)
	}
	calls := h.fake.Calls(discordfake.RouteMessage)
	limited, retried := calls[1].At, calls[2].At
	if gap := retried.Sub(limited); gap < 250*time.Millisecond {
		t.Errorf("sent again %v after the 429, want after Discord's 300ms", gap)
	}
}

func TestSendClassifiesDiscordsAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		fail    discordfake.Failure
		outcome adapters.Outcome
		reason  string
	}{
		{desc: "missing access", fail: discordfake.Forbidden(50001, "Missing Access"), outcome: adapters.Permanent, reason: "403: Missing Access (code 50001)"},
		{desc: "cannot DM the user", fail: discordfake.Forbidden(50007, "Cannot send messages to this user"), outcome: adapters.Permanent, reason: "Cannot send messages to this user"},
		{desc: "unknown channel", fail: discordfake.Failure{Status: 404, Code: 10003, Message: "Unknown Channel"}, outcome: adapters.Permanent, reason: "404: Unknown Channel"},
		{desc: "too long", fail: discordfake.Failure{Status: 400, Code: 50035, Message: "Invalid Form Body"}, outcome: adapters.Permanent, reason: "400: Invalid Form Body"},
		{desc: "server error", fail: discordfake.ServerError(), outcome: adapters.Transient, reason: "500"},
		{desc: "bad gateway", fail: discordfake.Failure{Status: 502, Message: "bad gateway"}, outcome: adapters.Transient, reason: "502"},
		{desc: "rate limited", fail: discordfake.RateLimit(1500 * time.Millisecond), outcome: adapters.RateLimited, reason: "rate limited"},
		// A bad token is the operator's to fix; the message waits for it
		// (adapters.Transient).
		{desc: "token refused", fail: discordfake.Failure{Status: 401, Message: "401: Unauthorized"}, outcome: adapters.Transient, reason: "Discord refused the bot token"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := start(t, setup{noRun: true})
			h.fake.FailNext(discordfake.RouteMessage, 1, tc.fail)
			tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel)
			res := h.a.Send(context.Background(), outbox.Message{Target: tg, Text: "hello"})
			if res.Outcome != tc.outcome || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("Send = %+v, want %v with %q", res, tc.outcome, tc.reason)
			}
			if n := len(h.fake.Calls(discordfake.RouteMessage)); n != 1 {
				t.Errorf("%d sends reached Discord, want 1 (retries are the outbox's)", n)
			}
		})
	}
}

func TestSendRefusesABadTarget(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	for _, s := range []string{"discord:general:chat", "telegram:1", "discord:dm"} {
		tg, _ := outbox.ParseTarget(s)
		if res := h.a.Send(context.Background(), outbox.Message{Target: tg, Text: "x"}); res.Outcome != adapters.Permanent {
			t.Errorf("Send to %q = %+v, want permanent", s, res)
		}
	}
	if n := len(h.fake.Calls()); n != 0 {
		t.Errorf("%d calls reached Discord, want none", n)
	}
}

func TestGatewayResumesAfterADrop(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	author := discordfake.User{ID: ada}
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: author, Content: "before"})
	if in := h.inbox.next(t).in; in.Text != "before" {
		t.Fatalf("delivered %q, want before", in.Text)
	}
	h.fake.DropConnection()
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: author, Content: "while away"})
	h.fake.Wait("a resumed session", func() bool { return h.fake.Resumes() == 1 && h.fake.Connected() })
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: author, Content: "after"})
	for _, want := range []string{"while away", "after"} {
		if in := h.inbox.next(t).in; in.Text != want {
			t.Fatalf("delivered %q, want %q", in.Text, want)
		}
	}
	if n := h.fake.Identifies(); n != 1 {
		t.Errorf("identified %d times, want 1 (resumed, not a new session)", n)
	}
}

func TestCommandsAreRegistered(t *testing.T) {
	t.Parallel()
	cmds := []adapters.CommandInfo{
		{Name: "review", Args: "[FOCUS]", Summary: "review the work done so far"},
		{Name: "queue", Args: "MESSAGE", Summary: "send MESSAGE after the running turn ends"},
		{Name: "status", Summary: "say whether a turn is running"},
		{Name: "Bad Name", Summary: "not a Discord command name"},
	}
	for _, tc := range []struct{ desc, guild string }{{"globally", ""}, {"in the configured guild", guild}} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := start(t, setup{
				cfg:  func(c *config.Discord) { c.GuildID = tc.guild },
				opts: func(o *Options) { o.Commands = cmds },
			})
			h.fake.Wait("the commands", func() bool { return len(h.fake.CommandSets()) == 1 })
			set := h.fake.CommandSets()[0]
			if set.GuildID != tc.guild || set.AppID != fakeBot {
				t.Errorf("registered for app %s guild %q, want app %s guild %q", set.AppID, set.GuildID, fakeBot, tc.guild)
			}
			want := []discordfake.Command{
				{Name: "review", Description: "review the work done so far", Options: []discordfake.CommandOption{{Type: 3, Name: "focus", Description: "[FOCUS]"}}},
				{Name: "queue", Description: "send MESSAGE after the running turn ends", Options: []discordfake.CommandOption{{Type: 3, Name: "message", Description: "MESSAGE", Required: true}}},
				{Name: "status", Description: "say whether a turn is running", Options: []discordfake.CommandOption{}},
			}
			if len(set.Commands) != len(want) {
				t.Fatalf("registered %+v, want %+v", set.Commands, want)
			}
			for i := range want {
				if got := set.Commands[i]; got.Name != want[i].Name || got.Description != want[i].Description ||
					len(got.Options) != len(want[i].Options) || (len(got.Options) == 1 && got.Options[0] != want[i].Options[0]) {
					t.Errorf("command %d = %+v, want %+v", i, got, want[i])
				}
			}
		})
	}
}

func TestRegistrationIsRetried(t *testing.T) {
	t.Parallel()
	h := start(t, setup{
		before: func(f *discordfake.Server) { f.FailNext(discordfake.RouteCommands, 2, discordfake.ServerError()) },
		opts:   func(o *Options) { o.Commands = []adapters.CommandInfo{{Name: "help", Summary: "list the commands"}} },
	})
	h.fake.Wait("the commands", func() bool { return len(h.fake.CommandSets()) == 1 })
	if n := len(h.fake.Calls(discordfake.RouteCommands)); n != 3 {
		t.Errorf("registration calls = %d, want 2 failed and 1 good", n)
	}
}

func TestOpenIsRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	fake := discordfake.New(t, discordfake.Options{Token: botToken(fakeBot), BotID: fakeBot})
	fake.FailNext(discordfake.RouteGateway, 3, discordfake.ServerError())
	a, err := New(Options{
		Config: config.Discord{Token: fake.Token(), APIURL: fake.URL()}, Access: adapters.NewAccess(Platform, nil, true),
		Logger: slog.New(slog.DiscardHandler), RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, func(ctx context.Context) error { return a.Run(ctx, newInbox()) })
	fake.Wait("the gateway session", fake.Connected)
	if n := len(fake.Calls(discordfake.RouteGateway)); n != 4 {
		t.Errorf("gateway lookups = %d, want 3 failed and 1 good", n)
	}
}

func TestRunRefusesABadToken(t *testing.T) {
	t.Parallel()
	fake := discordfake.New(t, discordfake.Options{Token: botToken(fakeBot)})
	fake.FailNext(discordfake.RouteGateway, 1, discordfake.Failure{Status: 401, Message: "401: Unauthorized"})
	a, err := New(Options{
		Config: config.Discord{Token: "wrong", APIURL: fake.URL()}, Access: adapters.NewAccess(Platform, nil, true),
		Logger: slog.New(slog.DiscardHandler), RetryMin: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background(), newInbox()); !errs.Is(err, errs.Invalid) {
		t.Errorf("Run = %v, want Invalid", err)
	}
}

func TestPresence(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	ctx := context.Background()
	tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel + ":" + thread)
	if err := h.a.Typing(ctx, tg); err != nil {
		t.Fatalf("Typing: %v", err)
	}
	id, err := h.a.Status(ctx, tg, "", "running a tool")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if again, err := h.a.Status(ctx, tg, id, "running another tool"); err != nil || again != id {
		t.Fatalf("Status edit = %q, %v; want %q", again, err, id)
	}
	if err := h.a.ClearStatus(ctx, tg, id); err != nil {
		t.Fatalf("ClearStatus: %v", err)
	}
	if got := h.fake.Typing(); len(got) != 1 || got[0] != thread {
		t.Errorf("typing in %v, want [%s]", got, thread)
	}
	if msgs := h.fake.Messages(); len(msgs) != 1 || msgs[0].ChannelID != thread || msgs[0].Content != "running a tool" {
		t.Errorf("status posted as %+v", msgs)
	}
	if e := h.fake.Edits(); len(e) != 1 || e[0].MessageID != id || e[0].Content != "running another tool" {
		t.Errorf("edits = %+v", e)
	}
	if d := h.fake.Deletes(); len(d) != 1 || d[0] != id {
		t.Errorf("deletes = %v, want [%s]", d, id)
	}
	h.fake.FailNext(discordfake.RouteTyping, 1, discordfake.ServerError())
	if err := h.a.Typing(ctx, tg); err == nil {
		t.Error("Typing on a 500 = nil, want an error")
	}
	h.fake.FailNext(discordfake.RouteDelete, 1, discordfake.Failure{Status: 404, Code: 10008, Message: "Unknown Message"})
	if err := h.a.ClearStatus(ctx, tg, id); err != nil {
		t.Errorf("ClearStatus of a line already gone = %v, want nil", err)
	}
	h.fake.FailNext(discordfake.RouteDelete, 1, discordfake.ServerError())
	if err := h.a.ClearStatus(ctx, tg, id); !errs.Is(err, errs.Unavailable) {
		t.Errorf("ClearStatus on a 500 = %v, want Unavailable", err)
	}
}

func TestExclusiveNamesTheBotNotTheToken(t *testing.T) {
	for token, want := range map[string]string{
		botToken(fakeBot):          "discord:gateway:" + fakeBot,
		"Bot " + botToken(fakeBot): "discord:gateway:" + fakeBot,
	} {
		a, err := New(Options{Config: config.Discord{Token: token}, Access: adapters.NewAccess(Platform, nil, true)})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Exclusive(); got != want {
			t.Errorf("Exclusive() = %q, want %q", got, want)
		}
	}
	a, err := New(Options{Config: config.Discord{Token: "some-opaque-token"}, Access: adapters.NewAccess(Platform, nil, true)})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Exclusive(); !strings.HasPrefix(got, "discord:gateway:") || strings.Contains(got, "some-opaque-token") {
		t.Errorf("Exclusive() = %q, want a name without the token", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	access := adapters.NewAccess(Platform, nil, true)
	for _, tc := range []struct {
		desc string
		opts Options
	}{
		{"no token", Options{Access: access}},
		{"no access list", Options{Config: config.Discord{Token: "t"}}},
		{"an API URL that is no URL", Options{Config: config.Discord{Token: "t", APIURL: "discord"}, Access: access}},
		{"an unknown group trigger", Options{Config: config.Discord{Token: "t", GroupTrigger: "sometimes"}, Access: access}},
		{"an unknown scope", Options{Config: config.Discord{Token: "t"}, Access: access, GroupSessions: "per_channel"}},
	} {
		if _, err := New(tc.opts); !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: New = %v, want Invalid", tc.desc, err)
		}
	}
}

// Two adapters in one process each reach their own API: the redirect is
// per client, never discordgo's shared endpoint variables.
func TestTwoAdaptersKeepTheirOwnAPI(t *testing.T) {
	t.Parallel()
	one, two := start(t, setup{noRun: true}), start(t, setup{noRun: true})
	var wg sync.WaitGroup
	for _, h := range []*harness{one, two} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg, _ := outbox.ParseTarget("discord:dm:" + dmChannel)
			h.a.Send(context.Background(), outbox.Message{Target: tg, Text: "mine"})
		}()
	}
	wg.Wait()
	if len(one.fake.Messages()) != 1 || len(two.fake.Messages()) != 1 {
		t.Errorf("messages: %d and %d, want one each", len(one.fake.Messages()), len(two.fake.Messages()))
	}
}
