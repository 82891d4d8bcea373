package discord

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

const (
	testBot     = "900000000000000001"
	testGuild   = "100000000000000001"
	testChannel = "200000000000000001"
	testThread  = "300000000000000001"
	testUser    = "400000000000000001"
	testMsg     = "500000000000000001"
	testApp     = "900000000000000001"
	testInterID = "1234567890123456789"
)

// payload is a JSON event payload: base with the fields of over replaced
// (a nil value deletes the field).
func payload(t testing.TB, base, over map[string]any) []byte {
	t.Helper()
	m := map[string]any{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func user(id, name string) map[string]any { return map[string]any{"id": id, "username": name} }

var dmMessage = map[string]any{
	"id": testMsg, "channel_id": testChannel, "type": 0, "content": "hello herald",
	"author": user(testUser, "ada"), "mentions": []any{},
}

func guildMessage(content string) map[string]any {
	m := map[string]any{}
	for k, v := range dmMessage {
		m[k] = v
	}
	m["guild_id"] = testGuild
	m["content"] = content
	return m
}

// threads knows testThread as a thread of testChannel.
func threads(ch string) (string, bool) {
	if ch == testThread {
		return testChannel, true
	}
	return "", false
}

func testEnv() env {
	return env{botID: testBot, scope: adapters.ScopeAuto, threadParent: threads}
}

// parseCase is one payload for parseMessage or parseInteraction: raw
// with over's fields replaced, parsed in testEnv changed by env.
type parseCase struct {
	desc string
	raw  map[string]any
	over map[string]any
	env  func(*env)
	want sessions.Inbound
	skip skip
}

// runParse runs the cases through parse; check looks at each event that
// is delivered beyond its Inbound.
func runParse(t *testing.T, tests []parseCase, parse func([]byte, env) (event, skip), check func(*testing.T, event)) {
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			e := testEnv()
			if tc.env != nil {
				tc.env(&e)
			}
			ev, why := parse(payload(t, tc.raw, tc.over), e)
			if why != tc.skip {
				t.Fatalf("skip = %q, want %q", why, tc.skip)
			}
			if tc.skip != "" {
				return
			}
			// Where in the channel its sender is has tests of its own.
			if diff := cmp.Diff(tc.want, ev.in, ignoreChannelUser); diff != "" {
				t.Errorf("Inbound mismatch (-want +got):\n%s", diff)
			}
			check(t, ev)
		})
	}
}

func TestParseMessage(t *testing.T) {
	mention := "<@" + testBot + ">"
	tests := []parseCase{
		{
			desc: "a DM is taken as it is",
			raw:  dmMessage,
			want: sessions.Inbound{Conv: "discord:dm:" + testChannel, Sender: testUser, MessageID: testMsg, Text: "hello herald"},
		},
		{
			desc: "a guild message that mentions the bot is taken without the mention, its layout kept, per user outside threads",
			raw:  guildMessage(mention + " review   this\n```go\nx  :=  1\n```"),
			want: sessions.Inbound{
				Conv: "discord:" + testGuild + ":" + testChannel + ":user:" + testUser, Sender: testUser, MessageID: testMsg,
				Text: "review   this\n```go\nx  :=  1\n```", Meta: map[string]string{sessions.MetaTarget: "discord:" + testGuild + ":" + testChannel},
			},
		},
		{
			desc: "a command after the bot's mention and a comma is the command",
			raw:  guildMessage(mention + ", /stop"),
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "/stop"},
		},
		{
			desc: "a colon after a mention in the middle stays",
			raw:  guildMessage("ask " + mention + ": why?"),
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "ask : why?"},
		},
		{
			desc: "the older <@!id> mention counts too",
			raw:  guildMessage("hey <@!" + testBot + ">"),
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "hey"},
		},
		{
			desc: "a mention listed in mentions only counts",
			raw:  guildMessage("hi all"),
			over: map[string]any{"mentions": []any{user(testBot, "herald")}},
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "hi all"},
		},
		{
			desc: "a message in a thread is keyed by the parent channel and the thread, shared",
			raw:  guildMessage(mention + " go on"),
			over: map[string]any{"channel_id": testThread},
			want: sessions.Inbound{
				Conv: "discord:" + testGuild + ":" + testChannel + ":" + testThread, Sender: testUser, MessageID: testMsg, Text: "go on",
			},
		},
		{
			desc: "a thread per user has the thread as its reply target",
			raw:  guildMessage(mention + " go on"),
			over: map[string]any{"channel_id": testThread},
			env:  func(e *env) { e.scope = adapters.ScopePerUser },
			want: sessions.Inbound{
				Conv:   "discord:" + testGuild + ":" + testChannel + ":" + testThread + ":user:" + testUser,
				Sender: testUser, MessageID: testMsg, Text: "go on",
				Meta: map[string]string{sessions.MetaTarget: "discord:" + testGuild + ":" + testChannel + ":" + testThread},
			},
		},
		{
			desc: "group trigger all takes an unaddressed guild message",
			raw:  guildMessage("just talking"),
			env:  func(e *env) { e.trigger = config.TriggerAll; e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "just talking"},
		},
		{
			desc: "an attachment without text is taken",
			raw:  dmMessage,
			over: map[string]any{"content": "", "attachments": []any{map[string]any{
				"id": "600000000000000001", "filename": "a.png", "content_type": "image/png", "size": 12, "url": "https://cdn/a.png",
			}}},
			want: sessions.Inbound{
				Conv: "discord:dm:" + testChannel, Sender: testUser, MessageID: testMsg,
				Attachments: []sessions.Attachment{{Name: "a.png", MIME: "image/png", Size: 12, Kind: sessions.AttachImage,
					URL: "https://cdn/a.png", PlatformID: "600000000000000001"}},
			},
		},
		{
			desc: "a voice message's recording is a voice note; a file without a type gets one from its name",
			raw:  dmMessage,
			over: map[string]any{"content": "", "flags": 8192, "attachments": []any{
				map[string]any{"id": "600000000000000002", "filename": "voice-message.ogg", "content_type": "audio/ogg",
					"size": 9000, "url": "https://cdn/v.ogg", "duration_secs": 2.5, "waveform": "AAAA"},
				map[string]any{"id": "600000000000000003", "filename": "notes.txt", "size": 5, "url": "https://cdn/n.txt"},
			}},
			want: sessions.Inbound{
				Conv: "discord:dm:" + testChannel, Sender: testUser, MessageID: testMsg,
				Attachments: []sessions.Attachment{
					{Name: "voice-message.ogg", MIME: "audio/ogg", Size: 9000, Kind: sessions.AttachVoice, URL: "https://cdn/v.ogg", PlatformID: "600000000000000002"},
					{Name: "notes.txt", MIME: "text/plain", Size: 5, Kind: sessions.AttachDocument, URL: "https://cdn/n.txt", PlatformID: "600000000000000003"},
				},
			},
		},
		{
			desc: "a reply to herald's message is addressed to herald",
			raw:  guildMessage("and then?"),
			over: map[string]any{"type": 19, "referenced_message": map[string]any{
				"id": "500000000000000000", "channel_id": testChannel, "author": user(testBot, "herald"), "content": "earlier answer",
			}},
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: testMsg, Text: "and then?"},
		},
		{
			desc: "a reply to someone else is not",
			raw:  guildMessage("and then?"),
			over: map[string]any{"type": 19, "referenced_message": map[string]any{"id": "500000000000000000", "author": user(testUser, "ada")}},
			skip: skipNotAddressed,
		},
		{desc: "an unaddressed guild message is not for herald", raw: guildMessage("just talking"), skip: skipNotAddressed},
		{desc: "a mention of someone else is not for herald", raw: guildMessage("<@42> hi"), skip: skipNotAddressed},
		{desc: "a bot's message is skipped", raw: dmMessage, over: map[string]any{"author": map[string]any{"id": testUser, "bot": true}}, skip: skipBot},
		{desc: "herald's own message is skipped", raw: dmMessage, over: map[string]any{"author": user(testBot, "herald")}, skip: skipBot},
		{desc: "a webhook's message is skipped", raw: dmMessage, over: map[string]any{"webhook_id": "700000000000000001"}, skip: skipBot},
		{desc: "a system message is skipped", raw: dmMessage, over: map[string]any{"type": 7}, skip: skipKind},
		{desc: "a mention alone is empty", raw: guildMessage(mention + "  "), skip: skipEmpty},
		{desc: "no author is malformed", raw: dmMessage, over: map[string]any{"author": nil}, skip: skipMalformed},
		{desc: "a channel id with a colon is malformed", raw: dmMessage, over: map[string]any{"channel_id": "1:2"}, skip: skipMalformed},
		{desc: "a guild id that is no snowflake is malformed", raw: guildMessage(mention), over: map[string]any{"guild_id": "dm"}, skip: skipMalformed},
	}
	runParse(t, tests, parseMessage, func(t *testing.T, ev event) {
		if ev.reply != nil {
			t.Errorf("a message carries an interaction: %+v", ev.reply)
		}
	})
}

func TestParseMessageNotMalformedJSON(t *testing.T) {
	if _, why := parseMessage([]byte(`{"id":`), testEnv()); why != skipMalformed {
		t.Errorf("skip = %q, want %q", why, skipMalformed)
	}
}

func commandPayload(guild bool, name string, options []any) map[string]any {
	m := map[string]any{
		"id": testInterID, "application_id": testApp, "type": 2, "token": "tok-en_1.x", "version": 1,
		"channel_id": testChannel, "channel": map[string]any{"id": testChannel, "type": 0},
		"data": map[string]any{"id": "800000000000000001", "name": name, "type": 1, "options": options},
	}
	if guild {
		m["guild_id"] = testGuild
		m["member"] = map[string]any{"user": user(testUser, "ada")}
	} else {
		m["user"] = user(testUser, "ada")
		m["channel"] = map[string]any{"id": testChannel, "type": 1}
	}
	return m
}

func TestParseInteraction(t *testing.T) {
	ref := interactionRef{id: testInterID, app: testApp, token: "tok-en_1.x"}
	focus := []any{map[string]any{"name": "focus", "type": 3, "value": " the tests "}}
	tests := []parseCase{
		{
			desc: "a guild command reads as typed, shared in the channel",
			raw:  commandPayload(true, "review", focus),
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: ref.String(), Text: "/review the tests"},
		},
		{
			desc: "a DM command without options",
			raw:  commandPayload(false, "status", nil),
			want: sessions.Inbound{Conv: "discord:dm:" + testChannel, Sender: testUser, MessageID: ref.String(), Text: "/status"},
		},
		{
			desc: "a command in a thread is keyed by the parent and the thread",
			raw:  commandPayload(true, "agents", nil),
			over: map[string]any{"channel_id": testThread, "channel": map[string]any{"id": testThread, "type": 11, "parent_id": testChannel}},
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel + ":" + testThread, Sender: testUser, MessageID: ref.String(), Text: "/agents"},
		},
		{
			desc: "numbers, booleans and subcommands read in order",
			raw: commandPayload(true, "cron", []any{map[string]any{"name": "pause", "type": 1, "options": []any{
				map[string]any{"name": "id", "type": 4, "value": 42},
				map[string]any{"name": "all", "type": 5, "value": true},
				map[string]any{"name": "every", "type": 10, "value": 1.5},
			}}}),
			env:  func(e *env) { e.scope = adapters.ScopeShared },
			want: sessions.Inbound{Conv: "discord:" + testGuild + ":" + testChannel, Sender: testUser, MessageID: ref.String(), Text: "/cron pause 42 true 1.5"},
		},
		{desc: "a component click is no command", raw: commandPayload(true, "review", nil), over: map[string]any{"type": 3, "data": map[string]any{"custom_id": "x"}}, skip: skipNotCommand},
		{desc: "a user context menu command is skipped", raw: commandPayload(true, "review", nil), over: map[string]any{"data": map[string]any{"name": "review", "type": 2}}, skip: skipNotCommand},
		{desc: "a token with a colon is malformed", raw: commandPayload(true, "review", nil), over: map[string]any{"token": "a:b"}, skip: skipMalformed},
		{desc: "no user is malformed", raw: commandPayload(true, "review", nil), over: map[string]any{"member": nil}, skip: skipMalformed},
		{desc: "an upper-case name is malformed", raw: commandPayload(true, "Review", nil), skip: skipMalformed},
	}
	runParse(t, tests, parseInteraction, func(t *testing.T, ev event) {
		if ev.reply == nil || *ev.reply != ref {
			t.Errorf("reply = %+v, want %+v", ev.reply, ref)
		}
	})
}

// ignoreChannelUser leaves out of a comparison where in its group
// channel the sender is (TestParseNamesTheSenderInTheChannel).
var ignoreChannelUser = testkit.WithoutKeys(sessions.MetaChannelUser, sessions.MetaLatest)

// A guild message, in a thread or not, names its sender in the channel,
// so that a command typed in the channel can reach the sender's latest
// conversation there; a command typed in the channel itself asks for it.
func TestParseNamesTheSenderInTheChannel(t *testing.T) {
	mention := "<@" + testBot + ">"
	channelUser := "discord:" + testGuild + ":" + testChannel + ":user:" + testUser
	inThread := map[string]any{"channel_id": testThread}
	threadCommand := map[string]any{"channel_id": testThread, "channel": map[string]any{"id": testThread, "type": 11, "parent_id": testChannel}}
	tests := []struct {
		desc        string
		ev          func() (event, skip)
		channelUser string
		latest      bool
	}{
		{"a DM", func() (event, skip) { return parseMessage(payload(t, dmMessage, nil), testEnv()) }, "", false},
		{"a channel message", func() (event, skip) {
			return parseMessage(payload(t, guildMessage(mention+" hi"), nil), testEnv())
		}, channelUser, false},
		{"a thread message", func() (event, skip) {
			return parseMessage(payload(t, guildMessage(mention+" hi"), inThread), testEnv())
		}, channelUser, false},
		{"a command typed in the channel", func() (event, skip) {
			return parseInteraction(payload(t, commandPayload(true, "review", nil), nil), testEnv())
		}, channelUser, true},
		{"a command typed in a thread", func() (event, skip) {
			return parseInteraction(payload(t, commandPayload(true, "review", nil), threadCommand), testEnv())
		}, channelUser, false},
		{"a command in a DM", func() (event, skip) {
			return parseInteraction(payload(t, commandPayload(false, "review", nil), nil), testEnv())
		}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ev, why := tc.ev()
			if why != "" {
				t.Fatalf("skipped: %s", why)
			}
			if got := ev.in.Meta[sessions.MetaChannelUser]; got != tc.channelUser {
				t.Errorf("channel user = %q, want %q", got, tc.channelUser)
			}
			if got := ev.in.Meta[sessions.MetaLatest] != ""; got != tc.latest {
				t.Errorf("asks for the latest conversation: %v, want %v", got, tc.latest)
			}
		})
	}
}
