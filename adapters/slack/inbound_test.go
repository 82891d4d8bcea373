package slack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

const team = slackfake.TeamID

var self = identity{UserID: slackfake.BotUserID, BotID: slackfake.BotID}

func TestParseEvent(t *testing.T) {
	withMeta := func(in sessions.Inbound, target string) sessions.Inbound {
		in.Meta = map[string]string{sessions.MetaTarget: target}
		return in
	}
	tests := []struct {
		desc  string
		body  []byte
		scope string
		self  identity
		want  inbound
	}{{
		desc: "a top-level mention starts its own thread",
		body: slackfake.EventCallback(team, "Ev1", mention(alice, "C1", "100.000001", "", "<@U0HERALDBOT> hello &amp; &lt;b&gt;")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1:100.000001", Sender: alice,
			MessageID: "C1:100.000001", Text: "hello & <b>"}},
	}, {
		desc: "a mention in a thread belongs to the thread",
		body: slackfake.EventCallback(team, "Ev2", mention(alice, "C1", "100.000009", "100.000001", "<@U0HERALDBOT|herald> more")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1:100.000001", Sender: alice,
			MessageID: "C1:100.000009", Text: "more"}},
	}, {
		desc:  "per-user sessions in a thread reply to the thread",
		body:  slackfake.EventCallback(team, "Ev3", mention(alice, "C1", "100.000009", "100.000001", "<@U0HERALDBOT> more")),
		scope: adapters.ScopePerUser,
		self:  self,
		want: inbound{In: withMeta(sessions.Inbound{Conv: "slack:T0HERALD:C1:100.000001:user:U0ALICE", Sender: alice,
			MessageID: "C1:100.000009", Text: "more"}, "slack:T0HERALD:C1:100.000001")},
	}, {
		desc: "before auth.test answered, an app_mention's leading mention is the bot's",
		body: slackfake.EventCallback(team, "Ev4", mention(alice, "C1", "100.000001", "", "<@U0SOMEBOT> /review focus")),
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1:100.000001", Sender: alice,
			MessageID: "C1:100.000001", Text: "/review focus"}},
	}, {
		desc: "another user's mention stays",
		body: slackfake.EventCallback(team, "Ev5", dm(alice, "D1", "100.000001", "", "<@U0BOB> said hi")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:D1", Sender: alice,
			MessageID: "D1:100.000001", Text: "<@U0BOB> said hi"}},
	}, {
		desc: "a DM is one conversation, answered in the DM",
		body: slackfake.EventCallback(team, "Ev6", dm(alice, "D1", "100.000002", "", "hi")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:D1", Sender: alice, MessageID: "D1:100.000002", Text: "hi"}},
	}, {
		desc: "a DM written in a thread is answered in the thread, same session",
		body: slackfake.EventCallback(team, "Ev7", dm(alice, "D1", "100.000003", "100.000002", "and?")),
		self: self,
		want: inbound{In: withMeta(sessions.Inbound{Conv: "slack:T0HERALD:D1", Sender: alice,
			MessageID: "D1:100.000003", Text: "and?"}, "slack:T0HERALD:D1:100.000002")},
	}, {
		desc: "url_verification",
		body: slackfake.URLVerification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"),
		want: inbound{Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"},
	}, {
		desc: "a channel message without a mention comes as app_mention too, if at all",
		body: slackfake.EventCallback(team, "Ev8", map[string]any{"type": "message", "channel_type": "channel",
			"user": alice, "text": "hi all", "ts": "1.2", "channel": "C1"}),
		want: inbound{Skip: "a channel message without a mention"},
	}, {
		desc: "herald's own message",
		body: slackfake.EventCallback(team, "Ev9", dm(slackfake.BotUserID, "D1", "1.3", "", "an answer")),
		self: self,
		want: inbound{Skip: "a bot's message"},
	}, {
		desc: "another bot",
		body: slackfake.EventCallback(team, "Ev10", map[string]any{"type": "message", "channel_type": "im",
			"subtype": "bot_message", "bot_id": "B0OTHER", "text": "beep", "ts": "1.4", "channel": "D1"}),
		self: self,
		want: inbound{Skip: "a bot's message"},
	}, {
		desc: "an edit",
		body: slackfake.EventCallback(team, "Ev11", map[string]any{"type": "message", "channel_type": "im",
			"subtype": "message_changed", "ts": "1.5", "channel": "D1",
			"message": map[string]any{"user": alice, "text": "hi!", "ts": "1.2"}}),
		self: self,
		want: inbound{Skip: "message subtype message_changed"},
	}, {
		desc: "a join",
		body: slackfake.EventCallback(team, "Ev12", map[string]any{"type": "message", "channel_type": "im",
			"subtype": "channel_join", "user": alice, "text": "joined", "ts": "1.6", "channel": "D1"}),
		self: self,
		want: inbound{Skip: "message subtype channel_join"},
	}, {
		desc: "a command after the bot's mention and a comma is the command",
		body: slackfake.EventCallback(team, "Ev15", mention(alice, "C1", "1.8", "", "<@U0HERALDBOT>, /stop")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1:1.8", Sender: alice, MessageID: "C1:1.8", Text: "/stop"}},
	}, {
		desc: "a colon after the bot's mention goes with it",
		body: slackfake.EventCallback(team, "Ev16", mention(alice, "C1", "1.9", "", "<@U0HERALDBOT|herald>: is it done?\n```\nx\n```")),
		self: self,
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1:1.9", Sender: alice, MessageID: "C1:1.9", Text: "is it done?\n```\nx\n```"}},
	}, {
		desc: "a mention with nothing said",
		body: slackfake.EventCallback(team, "Ev13", mention(alice, "C1", "1.7", "", "<@U0HERALDBOT>  ")),
		self: self,
		want: inbound{Skip: "no text or file"},
	}, {
		desc: "an event herald does not handle",
		body: slackfake.EventCallback(team, "Ev14", map[string]any{"type": "reaction_added", "user": alice,
			"reaction": "eyes", "item": map[string]any{"type": "message", "channel": "C1", "ts": "1.1"}}),
		want: inbound{Skip: "inner event reaction_added"},
	}, {
		desc: "app_rate_limited",
		body: []byte(`{"token":"x","type":"app_rate_limited","team_id":"T1","minute_rate_limited":1518467820,"api_app_id":"A1"}`),
		want: inbound{Skip: "event type app_rate_limited"},
	}, {
		desc: "a colon in a channel id would break the key",
		body: slackfake.EventCallback(team, "Ev15", dm(alice, "D1:x", "1.8", "", "hi")),
		want: inbound{Skip: "an id that is not Slack's"},
	}, {
		desc: "a control character in a team id would break the key",
		body: slackfake.EventCallback("T\u0001", "Ev16", dm(alice, "D1", "1.8", "", "hi")),
		want: inbound{Skip: "an id that is not Slack's"},
	}}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseEvent(tc.body, tc.self, cmpScope(tc.scope))
			if err != nil {
				t.Fatalf("parseEvent: %v", err)
			}
			// Where in the channel its sender is has tests of its own.
			if diff := cmp.Diff(tc.want, got, ignoreChannelUser); diff != "" {
				t.Errorf("parseEvent (-want +got):\n%s", diff)
			}
		})
	}
}

func cmpScope(s string) string {
	if s == "" {
		return adapters.ScopeAuto
	}
	return s
}

func TestParseEventRejectsWhatIsNotJSON(t *testing.T) {
	_, err := parseEvent([]byte(`{"type":`), self, adapters.ScopeAuto)
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("parseEvent of broken JSON: %v; want Invalid", err)
	}
}

func TestParseEventSkipsWhatTheSDKCannotRead(t *testing.T) {
	got, err := parseEvent([]byte(`{"type":"event_callback","team_id":"T1","event":null}`), self, adapters.ScopeAuto)
	if err != nil || got.Skip == "" {
		t.Fatalf("parseEvent = %+v, %v; want a skip and no error", got, err)
	}
}

func TestParseSlashCommand(t *testing.T) {
	tests := []struct {
		desc  string
		cmd   slackfake.SlashCommand
		scope string
		want  inbound
	}{{
		desc: "in a channel: the user's session there, answered in the channel",
		cmd: slackfake.SlashCommand{Team: team, Channel: "C1", ChannelName: "general", User: alice, UserName: "alice",
			Command: "/Review", Text: "  the retry logic ", TriggerID: "13345224609.738474920.8088930838d88f008e0"},
		want: inbound{UserName: "alice", In: sessions.Inbound{Conv: "slack:T0HERALD:C1:user:U0ALICE", Sender: alice,
			MessageID: "13345224609.738474920.8088930838d88f008e0", Text: "/review the retry logic",
			Meta: map[string]string{sessions.MetaTarget: "slack:T0HERALD:C1"}}},
	}, {
		desc:  "in a channel with shared sessions",
		cmd:   slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/agents", TriggerID: "t2"},
		scope: adapters.ScopeShared,
		want:  inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:C1", Sender: alice, MessageID: "t2", Text: "/agents"}},
	}, {
		desc: "in a DM: the DM's session",
		cmd: slackfake.SlashCommand{Team: team, Channel: "D1", ChannelName: "directmessage", User: alice,
			Command: "/stop", TriggerID: "t3"},
		want: inbound{In: sessions.Inbound{Conv: "slack:T0HERALD:D1", Sender: alice, MessageID: "t3", Text: "/stop"}},
	}, {
		desc: "no command",
		cmd:  slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/", TriggerID: "t4"},
		want: inbound{Skip: "no command name"},
	}, {
		desc: "no user",
		cmd:  slackfake.SlashCommand{Team: team, Channel: "C1", Command: "/help", TriggerID: "t5"},
		want: inbound{Skip: "no team, channel or user"},
	}}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var c slackapi.SlashCommand
			c.TeamID, c.ChannelID, c.ChannelName = tc.cmd.Team, tc.cmd.Channel, tc.cmd.ChannelName
			c.UserID, c.UserName, c.Command, c.Text, c.TriggerID = tc.cmd.User, tc.cmd.UserName, tc.cmd.Command, tc.cmd.Text, tc.cmd.TriggerID
			got := parseSlashCommand(c, cmpScope(tc.scope))
			if diff := cmp.Diff(tc.want, got, ignoreChannelUser); diff != "" {
				t.Errorf("parseSlashCommand (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouteReadsBackWhatTheKeysWrite: every reply target the parsers
// write is read back by Send into the channel and thread it came from.
func TestRouteReadsBackWhatTheKeysWrite(t *testing.T) {
	tests := []struct {
		desc            string
		target          string
		channel, thread string
		wantErr         bool
	}{
		{desc: "a thread", target: "slack:T1:C1:1700000000.000100", channel: "C1", thread: "1700000000.000100"},
		{desc: "a DM", target: "slack:T1:D1", channel: "D1"},
		{desc: "a per-user key names its thread", target: "slack:T1:C1:1.2:user:U1", channel: "C1", thread: "1.2"},
		{desc: "a per-user channel key names its channel", target: "slack:T1:C1:user:U1", channel: "C1"},
		{desc: "no channel", target: "slack:T1", wantErr: true},
		{desc: "too many fields", target: "slack:T1:C1:1.2:3.4", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tgt, err := outbox.ParseTarget(tc.target)
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tc.target, err)
			}
			channel, thread, err := route(tgt)
			if tc.wantErr {
				if !errs.Is(err, errs.Invalid) {
					t.Fatalf("route(%q) = %q, %q, %v; want Invalid", tc.target, channel, thread, err)
				}
				return
			}
			if err != nil || channel != tc.channel || thread != tc.thread {
				t.Errorf("route(%q) = %q, %q, %v; want %q, %q", tc.target, channel, thread, err, tc.channel, tc.thread)
			}
		})
	}
}

// ignoreChannelUser leaves out of a comparison where in its group
// channel the sender is (TestChannelMessagesNameTheSenderInTheChannel).
var ignoreChannelUser = testkit.WithoutKeys(sessions.MetaChannelUser, sessions.MetaLatest)

// A mention in a channel, in a thread or not, names its sender in the
// channel; a slash command in the channel asks for the sender's latest
// conversation there; a DM does neither.
func TestChannelMessagesNameTheSenderInTheChannel(t *testing.T) {
	const channelUser = "slack:T0HERALD:C1:user:U0ALICE"
	slash := func(channel, name string) inbound {
		var c slackapi.SlashCommand
		c.TeamID, c.ChannelID, c.ChannelName, c.UserID, c.Command, c.TriggerID = team, channel, name, alice, "/review", "t1"
		return parseSlashCommand(c, adapters.ScopeAuto)
	}
	event := func(ev map[string]any) inbound {
		got, err := parseEvent(slackfake.EventCallback(team, "Ev1", ev), self, adapters.ScopeAuto)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	tests := []struct {
		desc        string
		got         inbound
		channelUser string
		latest      bool
	}{
		{"a top-level mention", event(mention(alice, "C1", "1.1", "", "<@U0HERALDBOT> hi")), channelUser, false},
		{"a mention in a thread", event(mention(alice, "C1", "1.2", "1.1", "<@U0HERALDBOT> more")), channelUser, false},
		{"a DM", event(dm(alice, "D1", "1.3", "", "hi")), "", false},
		{"a slash command in the channel", slash("C1", "general"), channelUser, true},
		{"a slash command in a DM", slash("D1", "directmessage"), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.got.Skip != "" {
				t.Fatalf("skipped: %s", tc.got.Skip)
			}
			if got := tc.got.In.Meta[sessions.MetaChannelUser]; got != tc.channelUser {
				t.Errorf("channel user = %q, want %q", got, tc.channelUser)
			}
			if got := tc.got.In.Meta[sessions.MetaLatest] != ""; got != tc.latest {
				t.Errorf("asks for the latest conversation: %v, want %v", got, tc.latest)
			}
		})
	}
}
