package discord

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// approval is an approval's four buttons, in order.
var approval = []outbox.Button{
	{Text: "Allow once", Data: "/approve once ap_1"},
	{Text: "Allow this session", Data: "/approve session ap_1"},
	{Text: "Always allow", Data: "/approve always ap_1"},
	{Text: "Deny", Data: "/deny ap_1"},
}

var inDM = outbox.Target{Platform: Platform, Chat: "dm", Thread: dmChannel}

// ask sends an approval to target and returns its message id.
func ask(t *testing.T, h *harness, target outbox.Target, text string) string {
	t.Helper()
	res := h.a.Send(context.Background(), outbox.Message{Target: target, Text: text, Buttons: approval})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	return res.MessageID
}

func TestButtonsAreComponentsUnderTheLastPart(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	ask(t, h, inDM, strings.Repeat("a line of the command to approve\n", 100)) // over 2,000 characters
	msgs := h.fake.Messages()
	if len(msgs) < 2 {
		t.Fatalf("%d messages, want the text in parts", len(msgs))
	}
	for i, m := range msgs[:len(msgs)-1] {
		if m.Components != nil {
			t.Errorf("part %d has components %+v", i, m.Components)
		}
	}
	want := []discordfake.Row{{Type: 1, Components: []discordfake.Button{
		{Type: 2, Style: discordfake.StylePrimary, Label: "Allow once", CustomID: "/approve once ap_1"},
		{Type: 2, Style: discordfake.StyleSecondary, Label: "Allow this session", CustomID: "/approve session ap_1"},
		{Type: 2, Style: discordfake.StyleSecondary, Label: "Always allow", CustomID: "/approve always ap_1"},
		{Type: 2, Style: discordfake.StyleDanger, Label: "Deny", CustomID: "/deny ap_1"},
	}}}
	if diff := cmp.Diff(want, msgs[len(msgs)-1].Components); diff != "" {
		t.Errorf("the last part's components (-want +got):\n%s", diff)
	}
}

func TestPressIsDeliveredThenAnswered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		target outbox.Target
		press  discordfake.PressEvent // without the message and the button
		want   sessions.Inbound       // without MessageID and MetaPressed
	}{
		{
			desc: "dm", target: inDM,
			press: discordfake.PressEvent{ChannelType: discordfake.ChannelDM, User: discordfake.User{ID: ada, Username: "ada"}},
			want:  sessions.Inbound{Conv: "discord:dm:" + dmChannel, Sender: ada, Text: "/approve session ap_1", Meta: map[string]string{}},
		},
		{
			desc: "guild channel", target: outbox.Target{Platform: Platform, Chat: guild, Thread: channel},
			press: discordfake.PressEvent{GuildID: guild, ChannelType: discordfake.ChannelText, User: discordfake.User{ID: ada, Username: "ada"}},
			want: sessions.Inbound{Conv: "discord:" + guild + ":" + channel, Sender: ada, Text: "/approve session ap_1",
				Meta: map[string]string{sessions.MetaChannelUser: "discord:" + guild + ":" + channel + ":user:" + ada}},
		},
		{
			desc: "thread", target: outbox.Target{Platform: Platform, Chat: guild, Thread: channel + ":" + thread},
			press: discordfake.PressEvent{GuildID: guild, ChannelType: discordfake.ChannelPublicThread, ParentID: channel,
				User: discordfake.User{ID: ada, Username: "ada"}},
			want: sessions.Inbound{Conv: "discord:" + guild + ":" + channel + ":" + thread, Sender: ada, Text: "/approve session ap_1",
				Meta: map[string]string{sessions.MetaChannelUser: "discord:" + guild + ":" + channel + ":user:" + ada}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := start(t, setup{})
			id := ask(t, h, tc.target, "Run `make clean`?")
			p := tc.press
			p.MessageID, p.CustomID = id, approval[1].Data
			it := h.fake.SendPress(p)

			d := h.inbox.next(t)
			want := tc.want
			want.MessageID = "press:" + it.ID
			want.Meta[sessions.MetaPressed] = id
			if diff := cmp.Diff(want, d.in); diff != "" {
				t.Errorf("inbound (-want +got):\n%s", diff)
			}
			h.fake.Wait("the press's answer", func() bool { return len(h.fake.Callbacks()) == 1 })
			cb := h.fake.Callbacks()[0]
			if cb.InteractionID != it.ID || cb.Type != 6 {
				t.Errorf("answered %+v, want a deferred update (6) of %s", cb, it.ID)
			}
			if cb.At.Before(d.at) {
				t.Errorf("answered at %v, before the press was delivered at %v", cb.At, d.at)
			}
		})
	}
}

func TestPressNotQueuedIsStillAnswered(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	id := ask(t, h, inDM, "Run it?")
	h.inbox.failing.Store(1)
	h.fake.SendPress(discordfake.PressEvent{MessageID: id, CustomID: "/deny ap_1", ChannelType: discordfake.ChannelDM, User: discordfake.User{ID: ada}})
	h.fake.Wait("the press's answer", func() bool { return len(h.fake.Callbacks()) == 1 })
	if cb := h.fake.Callbacks()[0]; cb.Type != 6 {
		t.Errorf("answered with type %d, want a deferred update (6)", cb.Type)
	}
	if n := h.inbox.calls.Load(); n != 1 || len(h.inbox.ch) != 0 {
		t.Errorf("%d deliveries, %d taken; want one try, none taken", n, len(h.inbox.ch))
	}
}

func TestPressOfAUserNotAllowedIsDropped(t *testing.T) {
	t.Parallel()
	h := start(t, setup{opts: func(o *Options) { o.Access = adapters.NewAccess(Platform, []string{ada}, false) }})
	id := ask(t, h, outbox.Target{Platform: Platform, Chat: guild, Thread: channel}, "Run it?")
	h.fake.SendPress(discordfake.PressEvent{MessageID: id, CustomID: "/approve once ap_1", GuildID: guild, User: discordfake.User{ID: bob}})
	h.fake.SendPress(discordfake.PressEvent{MessageID: id, CustomID: "/deny ap_1", GuildID: guild, User: discordfake.User{ID: ada}})
	if in := h.inbox.next(t).in; in.Sender != ada || in.Text != "/deny ap_1" {
		t.Errorf("delivered %+v, want only ada's press", in)
	}
	h.fake.Wait("both answers", func() bool { return len(h.fake.Callbacks()) == 2 })
	if n := h.inbox.calls.Load(); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if cb := h.fake.Callbacks()[0]; cb.Type != 4 || !strings.Contains(string(cb.Data), "allow-list") {
		t.Errorf("bob's press answered %+v, want the allow-list notice", cb)
	}
}

func TestEditReplacesTheTextAndRemovesTheButtons(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	id := ask(t, h, inDM, "Run `make clean`?")
	res := h.a.Send(context.Background(), outbox.Message{Target: inDM, Text: "Allowed once.", Edits: id})
	if res.Outcome != adapters.Accepted || res.MessageID != id {
		t.Fatalf("Send: %+v; want accepted with the edited id %s", res, id)
	}
	m, _ := h.fake.Message(id)
	if m.Content != "Allowed once." || len(m.Components) != 0 {
		t.Errorf("message stands as %+v; want the new text without components", m)
	}
	if e := h.fake.Edits(); len(e) != 1 || e[0].Components == nil || len(*e[0].Components) != 0 {
		t.Errorf("edits %+v; want one that empties the components", e)
	}
}

func TestEditOfAMissingMessageIsSentAnew(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	res := h.a.Send(context.Background(), outbox.Message{Target: inDM, Text: "Denied.", Edits: "170000000000000001"})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	if m, ok := h.fake.Message(res.MessageID); !ok || m.Content != "Denied." || m.ChannelID != dmChannel {
		t.Errorf("sent %+v; want Denied. in the DM", m)
	}
}
