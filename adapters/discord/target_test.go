package discord

import (
	"strconv"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/outbox"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		desc   string
		target string
		want   route
		dest   string
		bad    bool
	}{
		{desc: "a guild channel", target: "discord:1:2", want: route{guild: "1", channel: "2"}, dest: "2"},
		{desc: "a thread goes to the thread", target: "discord:1:2:3", want: route{guild: "1", channel: "2", thread: "3"}, dest: "3"},
		{desc: "a DM", target: "discord:dm:5", want: route{channel: "5"}, dest: "5"},
		{desc: "a per-user key names the channel", target: "discord:1:2:user:9", want: route{guild: "1", channel: "2"}, dest: "2"},
		{desc: "a per-user key in a thread names the thread", target: "discord:1:2:3:user:9", want: route{guild: "1", channel: "2", thread: "3"}, dest: "3"},
		{desc: "a guild without a channel", target: "discord:1", bad: true},
		{desc: "a DM without a channel", target: "discord:dm", bad: true},
		{desc: "a DM with a thread", target: "discord:dm:5:6", bad: true},
		{desc: "ids that are no snowflakes", target: "discord:general:chat", bad: true},
		{desc: "too many parts", target: "discord:1:2:3:4", bad: true},
		{desc: "another platform", target: "slack:T1:C1", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tg, err := outbox.ParseTarget(tc.target)
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tc.target, err)
			}
			got, err := parseRoute(tg)
			if tc.bad {
				if err == nil {
					t.Fatalf("parseRoute(%q) = %+v, want an error", tc.target, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRoute(%q): %v", tc.target, err)
			}
			if got != tc.want || got.dest() != tc.dest {
				t.Errorf("parseRoute(%q) = %+v (dest %s), want %+v (dest %s)", tc.target, got, got.dest(), tc.want, tc.dest)
			}
		})
	}
}

// A conversation key the parser makes reads back, as a target, to the
// channel or thread the message came from.
func TestConversationKeysReadBackAsRoutes(t *testing.T) {
	e := testEnv()
	for _, tc := range []struct {
		guild, channel, thread string
		dest                   string
	}{
		{"", testChannel, "", testChannel},
		{testGuild, testChannel, "", testChannel},
		{testGuild, testChannel, testThread, testThread},
	} {
		in := e.inbound(tc.guild, tc.channel, tc.thread, testUser)
		key := in.Conv
		if tg := in.Meta["target"]; tg != "" {
			key = tg
		}
		tg, err := outbox.ParseTarget(key)
		if err != nil {
			t.Fatalf("ParseTarget(%q): %v", key, err)
		}
		r, err := parseRoute(tg)
		if err != nil || r.dest() != tc.dest || r.guild != tc.guild {
			t.Errorf("%q reads back as %+v, %v; want dest %s in guild %q", key, r, err, tc.dest, tc.guild)
		}
	}
}

func TestInteractionRef(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	id := snowflakeAt(at)
	ref := interactionRef{id: id, app: testApp, token: "aW50ZXJhY3Rpb24.abc-_"}
	got, ok := parseInteractionRef(ref.String())
	if !ok || got != ref {
		t.Fatalf("parseInteractionRef(%q) = %+v, %v; want %+v", ref.String(), got, ok, ref)
	}
	if want := at.Add(interactionTTL); !got.expires().Equal(want) {
		t.Errorf("expires = %v, want %v", got.expires(), want)
	}
	for _, s := range []string{"", testMsg, "ia:", "ia:1:2", "ia:x:2:tok", "ia:1:2:to:k", "ia:1:2:to/k"} {
		if r, ok := parseInteractionRef(s); ok {
			t.Errorf("parseInteractionRef(%q) = %+v, want not an interaction", s, r)
		}
	}
}

// snowflakeAt is a Discord id made at t.
func snowflakeAt(t time.Time) string {
	return strconv.FormatUint(uint64(t.UnixMilli()-discordEpoch)<<22, 10)
}

func TestBotIDFromToken(t *testing.T) {
	for token, want := range map[string]string{
		"OTAwMDAwMDAwMDAwMDAwMDAx.GhIjKl.secret":   testBot, // base64 of the id, unpadded
		"OTAwMDAwMDAwMDAwMDAwMDAx==.GhIjKl.secret": "",      // not base64 this way
		"fake-token": "",
		"":           "",
	} {
		if got := botIDFromToken(token); got != want {
			t.Errorf("botIDFromToken(%q) = %q, want %q", token, got, want)
		}
	}
}

func TestMaskHidesInteractionTokens(t *testing.T) {
	a, err := New(Options{Config: config.Discord{Token: botToken(fakeBot)}, Access: adapters.NewAccess(Platform, nil, true)})
	if err != nil {
		t.Fatal(err)
	}
	const token = "aW50ZXJhY3Rpb246MTIz.x-y_z"
	id := interactionRef{id: "1300000000000000001", app: testApp, token: token}.String()
	tests := []struct {
		desc, in, want string
	}{
		{desc: "an interaction id", in: id, want: "ia:1300000000000000001:" + testApp + ":…"},
		{desc: "ids inside text", in: "message_id=" + id + " then " + id + ".",
			want: "message_id=ia:1300000000000000001:" + testApp + ":… then ia:1300000000000000001:" + testApp + ":…"},
		{desc: "a follow-up URL in an error", in: `Post "https://discord.com/api/v9/webhooks/` + testApp + "/" + token + `?wait=true": EOF`,
			want: `Post "https://discord.com/api/v9/webhooks/` + testApp + `/…?wait=true": EOF`},
		{desc: "an interaction response URL", in: "POST /api/v9/interactions/1300000000000000001/" + token + "/callback",
			want: "POST /api/v9/interactions/1300000000000000001/…/callback"},
		{desc: "a message id", in: testMsg, want: testMsg},
		{desc: "a word ending in ia", in: "via:1:2:abc", want: "via:1:2:abc"},
		{desc: "no token", in: "refused a sender who is not allowed", want: "refused a sender who is not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := a.Mask(tc.in); got != tc.want {
				t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
