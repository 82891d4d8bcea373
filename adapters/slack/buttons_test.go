package slack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
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

// Places the approvals are posted to: a channel's thread and a DM.
var (
	inThread = outbox.Target{Platform: Platform, Chat: team, Thread: "C0GENERAL:1700000100.000001"}
	inDM     = outbox.Target{Platform: Platform, Chat: team, Thread: "D0ALICE"}
)

// ask posts an approval to target and returns its ts.
func ask(t *testing.T, f *fixture, target outbox.Target) string {
	t.Helper()
	res := f.a.Send(context.Background(), outbox.Message{Target: target, Text: "Run `make clean`?", Buttons: approval})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	return res.MessageID
}

// pressForm is a signed POST of a press to the interactivity route.
func pressForm(srvURL, secret string, payload []byte) *http.Request {
	return slackfake.SignedRequest(srvURL+InteractivityPath, secret, time.Now(), formType, slackfake.Form(payload))
}

func TestButtonsArePostedAsBlocksUnderTheText(t *testing.T) {
	f := newFixture(t, false)
	ts := ask(t, f, inThread)
	m, _ := f.fake.Message("C0GENERAL", ts)
	if m.Text != "Run `make clean`?" || m.Thread != "1700000100.000001" {
		t.Errorf("posted text %q in thread %q; want the text as the fallback, in the thread", m.Text, m.Thread)
	}
	if len(m.Blocks) != 2 || m.Blocks[0].Type != "section" || m.Blocks[0].Text.Text != "Run `make clean`?" {
		t.Fatalf("blocks %+v; want the text in a section, then the buttons", m.Blocks)
	}
	var got []outbox.Button
	ids := map[string]bool{}
	for _, e := range m.Buttons() {
		got = append(got, outbox.Button{Text: e.Text.Text, Data: e.Value})
		ids[e.ActionID] = true
		if want := map[bool]string{true: "danger"}[e.Value == "/deny ap_1"]; e.Style != want {
			t.Errorf("button %q has style %q, want %q", e.Text.Text, e.Style, want)
		}
	}
	if diff := cmp.Diff(approval, got); diff != "" || len(ids) != len(approval) {
		t.Errorf("buttons (-want +got):\n%s\naction ids %v", diff, ids)
	}
}

func TestLongTextWithButtonsIsCutIntoSections(t *testing.T) {
	f := newFixture(t, false)
	text := strings.Repeat("a line of the command to approve\n", 110) // over a section's 3,000
	res := f.a.Send(context.Background(), outbox.Message{Target: inDM, Text: text, Buttons: approval})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	m, _ := f.fake.Message("D0ALICE", res.MessageID)
	var shown strings.Builder
	for _, b := range m.Blocks {
		if b.Type == "section" {
			shown.WriteString(b.Text.Text)
		}
	}
	if len(m.Blocks) != 3 || shown.String() != m.Text || len(m.Buttons()) != 4 {
		t.Errorf("%d blocks showing %d of %d characters, %d buttons; want two sections with the whole text, then 4 buttons",
			len(m.Blocks), shown.Len(), len(m.Text), len(m.Buttons()))
	}
}

func TestPressOverHTTPIsDeliveredThenAnswered(t *testing.T) {
	tests := []struct {
		desc    string
		target  outbox.Target
		channel string
		want    sessions.Inbound // without MetaPressed
	}{
		{
			desc: "a channel's thread", target: inThread, channel: "C0GENERAL",
			want: sessions.Inbound{Conv: "slack:T0HERALD:C0GENERAL:1700000100.000001", Sender: alice, Text: "/approve always ap_1",
				Meta: map[string]string{sessions.MetaChannelUser: "slack:T0HERALD:C0GENERAL:user:" + alice}},
		},
		{
			desc: "a dm", target: inDM, channel: "D0ALICE",
			want: sessions.Inbound{Conv: "slack:T0HERALD:D0ALICE", Sender: alice, Text: "/approve always ap_1", Meta: map[string]string{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false)
			srv := f.events(t)
			ts := ask(t, f, tc.target)
			payload := f.fake.Press(slackfake.Press{Channel: tc.channel, TS: ts, ActionID: "herald_buttons_2", User: alice, TriggerID: "trig1"})

			// A press that could not be queued is not answered 200.
			f.inbox.setFail(context.DeadlineExceeded)
			if status, _ := post(t, pressForm(srv.URL, slackfake.SigningSecret, payload)); status != http.StatusInternalServerError {
				t.Errorf("failed delivery answered %d, want 500", status)
			}
			f.inbox.setFail(nil)
			if status, _ := post(t, pressForm(srv.URL, slackfake.SigningSecret, payload)); status != http.StatusOK {
				t.Fatalf("press answered %d, want 200", status)
			}
			got := f.inbox.All()
			want := tc.want
			want.MessageID = "press:trig1"
			want.Meta[sessions.MetaPressed] = ts
			if len(got) != 1 {
				t.Fatalf("delivered %d, want 1", len(got))
			}
			if diff := cmp.Diff(want, got[0]); diff != "" {
				t.Errorf("inbound (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPressOverHTTPWithoutSlacksSignatureIsRefused(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	ts := ask(t, f, inThread)
	payload := f.fake.Press(slackfake.Press{Channel: "C0GENERAL", TS: ts, ActionID: "herald_buttons_0", User: alice})
	unsigned, _ := http.NewRequest(http.MethodPost, srv.URL+InteractivityPath, strings.NewReader(string(slackfake.Form(payload))))
	unsigned.Header.Set("Content-Type", formType)
	for desc, r := range map[string]*http.Request{
		"unsigned":       unsigned,
		"another secret": pressForm(srv.URL, "not-the-secret", payload),
	} {
		if status, _ := post(t, r); status != http.StatusUnauthorized {
			t.Errorf("%s: answered %d, want 401", desc, status)
		}
	}
	if n := f.inbox.deliveries(); n != 0 {
		t.Errorf("%d deliveries, want none", n)
	}
}

func TestPressOfAUserNotAllowedIsDropped(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	ts := ask(t, f, inThread)
	payload := f.fake.Press(slackfake.Press{Channel: "C0GENERAL", TS: ts, ActionID: "herald_buttons_0", User: mallory})
	if status, _ := post(t, pressForm(srv.URL, slackfake.SigningSecret, payload)); status != http.StatusOK {
		t.Errorf("answered %d, want 200", status)
	}
	if n := f.inbox.deliveries(); n != 0 {
		t.Errorf("%d deliveries, want none", n)
	}
}

func TestSocketModePressIsDeliveredThenAcked(t *testing.T) {
	f := newFixture(t, true)
	f.run(t)
	ts := ask(t, f, inThread)
	id := f.fake.Queue(slackfake.EnvelopeInteractive,
		f.fake.Press(slackfake.Press{Channel: "C0GENERAL", TS: ts, ActionID: "herald_buttons_3", User: alice, TriggerID: "trig9"}))
	f.fake.WaitAck(id)
	// Deliver returned before the ack was sent.
	got := f.inbox.All()
	if len(got) != 1 || got[0].Text != "/deny ap_1" || got[0].MessageID != "press:trig9" || got[0].Meta[sessions.MetaPressed] != ts {
		t.Errorf("when the ack came, delivered %+v; want the press", got)
	}
}

func TestEditReplacesTheTextAndRemovesTheButtons(t *testing.T) {
	f := newFixture(t, false)
	ts := ask(t, f, inThread)
	res := f.a.Send(context.Background(), outbox.Message{Target: inThread, Text: "Allowed once.", Edits: ts})
	if res.Outcome != adapters.Accepted || res.MessageID != ts {
		t.Fatalf("Send: %+v; want accepted with the edited ts %s", res, ts)
	}
	m, _ := f.fake.Message("C0GENERAL", ts)
	if m.Text != "Allowed once." || m.Blocks != nil || m.Updates != 1 {
		t.Errorf("message stands as %+v; want the new text without blocks", m)
	}
	if n := len(f.fake.Calls("chat.postMessage")); n != 1 {
		t.Errorf("%d posts, want only the approval's", n)
	}
}

func TestEditOfAMissingMessageIsPostedAnew(t *testing.T) {
	f := newFixture(t, false)
	res := f.a.Send(context.Background(), outbox.Message{Target: inThread, Text: "Denied.", Edits: "1600000000.000001"})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	m, ok := f.fake.Message("C0GENERAL", res.MessageID)
	if !ok || m.Text != "Denied." || m.Thread != "1700000100.000001" {
		t.Errorf("posted %+v; want Denied. in the thread", m)
	}
}
