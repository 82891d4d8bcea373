package discord

import (
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// checkDelivered holds for every event the parsers deliver: its
// conversation is Discord's, and its reply target reads back as a route.
func checkDelivered(t *testing.T, ev event) {
	t.Helper()
	if !strings.HasPrefix(ev.in.Conv, Platform+":") || ev.in.MessageID == "" || ev.in.Sender == "" {
		t.Fatalf("delivered %+v", ev.in)
	}
	tg, err := sessions.ReplyTarget(ev.in)
	if err != nil {
		t.Fatalf("reply target of %+v: %v", ev.in, err)
	}
	if _, err := parseRoute(tg); err != nil {
		t.Fatalf("reply target %s: %v", tg, err)
	}
}

func fuzzEnvs() []env {
	e := testEnv()
	all := e
	all.trigger, all.scope = config.TriggerAll, adapters.ScopePerUser
	return []env{e, all}
}

func FuzzParseMessage(f *testing.F) {
	mention := "<@" + testBot + ">"
	for _, seed := range []map[string]any{
		dmMessage,
		guildMessage(mention + " hi"),
		guildMessage("<@!" + testBot + ">"),
		guildMessage("no mention"),
	} {
		f.Add(payload(f, seed, nil))
	}
	f.Add(payload(f, guildMessage(mention+" in a thread"), map[string]any{"channel_id": testThread}))
	f.Add(payload(f, dmMessage, map[string]any{"author": map[string]any{"id": testUser, "bot": true}}))
	f.Add(payload(f, dmMessage, map[string]any{"type": 19, "content": "a reply"}))
	f.Add([]byte(`{"id":"1","channel_id":"2","author":{"id":"3"},"content":"x","attachments":[null,{"id":"4"}],"mentions":[null]}`))
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, e := range fuzzEnvs() {
			ev, why := parseMessage(raw, e)
			if why != "" {
				continue
			}
			checkDelivered(t, ev)
			if strings.Contains(ev.in.Text, "<@"+testBot+">") || ev.reply != nil {
				t.Fatalf("delivered %+v with the mention or an interaction", ev.in)
			}
		}
	})
}

func FuzzParseInteraction(f *testing.F) {
	focus := []any{map[string]any{"name": "focus", "type": 3, "value": "the tests"}}
	f.Add(payload(f, commandPayload(true, "review", focus), nil))
	f.Add(payload(f, commandPayload(false, "status", nil), nil))
	f.Add(payload(f, commandPayload(true, "agents", nil), map[string]any{
		"channel_id": testThread, "channel": map[string]any{"id": testThread, "type": 11, "parent_id": testChannel},
	}))
	f.Add(payload(f, commandPayload(true, "cron", []any{map[string]any{"name": "list", "type": 1, "options": []any{nil}}}), nil))
	f.Add(payload(f, commandPayload(true, "review", nil), map[string]any{"type": 3, "data": map[string]any{"custom_id": "x"}}))
	f.Add([]byte(`{"type":2,"data":null}`))
	f.Add([]byte(`{"type":2,"data":{"options":[{"type":1,"options":[{"value":{}}]}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, e := range fuzzEnvs() {
			ev, why := parseInteraction(raw, e)
			if why != "" {
				continue
			}
			checkDelivered(t, ev)
			if ev.reply == nil || !strings.HasPrefix(ev.in.Text, "/") {
				t.Fatalf("delivered %+v without an interaction or a command", ev.in)
			}
			if ref, ok := parseInteractionRef(ev.in.MessageID); !ok || ref != *ev.reply {
				t.Fatalf("MessageID %q reads back as %+v, %v; want %+v", ev.in.MessageID, ref, ok, *ev.reply)
			}
			if masked, want := maskTokens(ev.in.MessageID), interactionPrefix+ev.reply.id+":"+ev.reply.app+":…"; masked != want {
				t.Fatalf("MessageID %q is logged as %q, want %q", ev.in.MessageID, masked, want)
			}
		}
	})
}

func FuzzParsePress(f *testing.F) {
	press := func(guild bool, customID string) map[string]any {
		m := commandPayload(guild, "x", nil)
		m["type"] = 3
		m["data"] = map[string]any{"custom_id": customID, "component_type": 2}
		m["message"] = map[string]any{"id": testMsg, "channel_id": testChannel, "content": "Run it?"}
		return m
	}
	f.Add(payload(f, press(true, "/approve once ap_1"), nil))
	f.Add(payload(f, press(false, "/deny ap_1"), nil))
	f.Add(payload(f, press(true, " "), nil))
	f.Add(payload(f, press(true, "/deny ap_1"), map[string]any{
		"channel_id": testThread, "channel": map[string]any{"id": testThread, "type": 11, "parent_id": testChannel},
	}))
	f.Add(payload(f, press(true, "/deny ap_1"), map[string]any{"message": nil}))
	f.Add([]byte(`{"type":3,"data":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, e := range fuzzEnvs() {
			ev, why := parsePress(raw, e)
			if why != "" {
				continue
			}
			checkDelivered(t, ev)
			if ev.reply == nil || strings.TrimSpace(ev.in.Text) == "" || !strings.HasPrefix(ev.in.MessageID, adapters.PressPrefix) ||
				ev.in.Meta[sessions.MetaPressed] == "" {
				t.Fatalf("a press delivered as %+v", ev.in)
			}
		}
	})
}
