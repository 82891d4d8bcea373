package slack

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/sessions"
)

// checkInbound holds for whatever the parsers return: either a reason to
// skip, a challenge, or an Inbound the router takes (a slack key, a reply
// target Send reads back, a dedupe key, text).
func checkInbound(t *testing.T, got inbound) {
	t.Helper()
	if got.Skip != "" || got.Challenge != "" {
		if got.In.Conv != "" {
			t.Fatalf("a skip or challenge carries an Inbound: %+v", got)
		}
		return
	}
	in := got.In
	if !strings.HasPrefix(in.Conv, "slack:") || in.Sender == "" || in.Text == "" && len(in.Attachments) == 0 {
		t.Fatalf("incomplete Inbound: %+v", in)
	}
	for _, a := range in.Attachments {
		if a.Name == "" || a.PlatformID == "" || a.Kind == "" {
			t.Fatalf("incomplete attachment: %+v", a)
		}
	}
	if err := chat.ValidateConv("fuzz", in.Conv); err != nil {
		t.Fatalf("conversation key %q: %v", in.Conv, err)
	}
	target, err := sessions.ReplyTarget(in)
	if err != nil {
		t.Fatalf("reply target of %+v: %v", in, err)
	}
	if _, _, err := route(target); err != nil {
		t.Fatalf("Send cannot read back the reply target %q: %v", target, err)
	}
}

func FuzzParseEvent(f *testing.F) {
	seeds := [][]byte{
		slackfake.EventCallback(team, "Ev1", mention(alice, "C1", "1.1", "", "<@U0HERALDBOT> hi")),
		slackfake.EventCallback(team, "Ev2", mention(alice, "C1", "1.2", "1.1", "<@U0HERALDBOT|h> /review x")),
		slackfake.EventCallback(team, "Ev3", dm(alice, "D1", "1.3", "", "&lt;hi&gt; &amp;")),
		slackfake.EventCallback(team, "Ev4", dm(alice, "D1", "1.4", "1.3", "<@")),
		slackfake.EventCallback(team, "Ev5", map[string]any{"type": "message", "subtype": "message_changed",
			"channel": "D1", "message": map[string]any{"text": "x"}, "previous_message": map[string]any{"text": "y"}}),
		slackfake.EventCallback(team, "Ev6", map[string]any{"type": "message", "subtype": "thread_broadcast",
			"channel": "C1", "user": alice, "ts": "1.5", "root": map[string]any{"text": "r"}}),
		slackfake.EventCallback(team, "Ev7", map[string]any{"type": "member_joined_channel", "user": alice}),
		slackfake.URLVerification("challenge"),
		[]byte(`{"type":"event_callback","event":null}`),
		[]byte(`{"type":"event_callback","team_id":"T","event":{"type":"message","channel":"D1","user":"U","ts":"1","text":"<@U>"}}`),
		[]byte(`{"type":"event_callback","event":{"type":"app_mention","edited":{"user":"U","ts":"1"}}}`),
		[]byte(`{"type":"app_rate_limited"}`),
		[]byte(`[]`),
		[]byte(`"x"`),
		[]byte(`{`),
		[]byte(``),
	}
	for _, s := range seeds {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, body []byte, perUser bool) {
		scope := adapters.ScopeAuto
		if perUser {
			scope = adapters.ScopePerUser
		}
		got, err := parseEvent(body, self, scope)
		if err != nil {
			return
		}
		checkInbound(t, got)
	})
}

func FuzzParseSlashCommand(f *testing.F) {
	seeds := []slackfake.SlashCommand{
		{Team: team, Channel: "C1", ChannelName: "general", User: alice, UserName: "alice", Command: "/review", Text: "the diff", TriggerID: "t1"},
		{Team: team, Channel: "D1", ChannelName: "directmessage", User: alice, Command: "/STOP", TriggerID: "t2"},
		{Team: team, Channel: "G1", User: alice, Command: "/agents", Text: "\n\t", TriggerID: ""},
		{Team: team, Channel: "C1", User: alice, Command: "review"},
		{Team: "T:1", Channel: "C1", User: alice, Command: "/a b"},
		{Command: "/"},
	}
	for _, s := range seeds {
		f.Add(s.Form().Encode(), false)
	}
	f.Add("command=%2Fx&text=%ZZ", true)
	f.Fuzz(func(t *testing.T, form string, perUser bool) {
		scope := adapters.ScopeAuto
		if perUser {
			scope = adapters.ScopePerUser
		}
		r := httptest.NewRequest(http.MethodPost, CommandsPath, strings.NewReader(form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		c, err := slackapi.SlashCommandParse(r)
		if err != nil {
			return
		}
		got := parseSlashCommand(c, scope)
		checkInbound(t, got)
		if got.Skip == "" && !strings.HasPrefix(got.In.Text, "/") {
			t.Fatalf("a command delivered as %q, not /name", got.In.Text)
		}
	})
}

func FuzzPressInbound(f *testing.F) {
	press := func(channel, thread, value string) []byte {
		b := `{"type":"block_actions","team":{"id":"` + team + `"},"user":{"id":"` + alice + `","username":"alice"},` +
			`"container":{"type":"message","message_ts":"1.9","channel_id":"` + channel + `"`
		if thread != "" {
			b += `,"thread_ts":"` + thread + `"`
		}
		return []byte(b + `},"trigger_id":"t1","actions":[{"type":"button","action_id":"a0","value":"` + value + `"}]}`)
	}
	seeds := [][]byte{
		press("C1", "1.1", "/approve once ap_1"),
		press("D1", "", "/deny ap_1"),
		press("D1", "1.1", " "),
		press("C:1", "", "x"),
		[]byte(`{"type":"view_submission"}`),
		[]byte(`{"type":"block_actions","container":{"type":"view"},"actions":[{"value":"x"}]}`),
	}
	for _, s := range seeds {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, payload []byte, perUser bool) {
		scope := adapters.ScopeAuto
		if perUser {
			scope = adapters.ScopePerUser
		}
		var cb slackapi.InteractionCallback
		if err := cb.UnmarshalJSON(payload); err != nil {
			return
		}
		got := pressInbound(cb, scope)
		checkInbound(t, got)
		if got.Skip == "" && (!strings.HasPrefix(got.In.MessageID, adapters.PressPrefix) || got.In.Meta[sessions.MetaPressed] == "") {
			t.Fatalf("a press delivered as %+v", got.In)
		}
	})
}
