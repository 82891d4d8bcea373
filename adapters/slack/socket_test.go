package slack

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
)

func TestSocketModeDeliversThenAcks(t *testing.T) {
	f := newFixture(t, true)
	f.run(t)
	id := f.fake.Queue(slackfake.EnvelopeEventsAPI,
		slackfake.EventCallback(team, "Ev1", mention(alice, "C1", "1700000200.000100", "", "<@U0HERALDBOT> status of the deploy?")))
	ack := f.fake.WaitAck(id)
	// Deliver returned before the ack was sent.
	got := f.inbox.All()
	if len(got) != 1 {
		t.Fatalf("when the ack came, %d inbounds were delivered; want 1", len(got))
	}
	if len(ack.Payload) != 0 {
		t.Errorf("events_api ack carries %s; want no payload", ack.Payload)
	}
	in := got[0]
	if in.Conv != "slack:T0HERALD:C1:1700000200.000100" || in.Text != "status of the deploy?" || in.MessageID != "C1:1700000200.000100" {
		t.Errorf("delivered %+v", in)
	}
	p := reply(t, f, in, "Deployed.")
	if p.Params.Get("channel") != "C1" || p.Params.Get("thread_ts") != "1700000200.000100" {
		t.Errorf("reply posted to %q thread %q; want C1 in the mention's thread", p.Params.Get("channel"), p.Params.Get("thread_ts"))
	}
	if opens := f.fake.Calls("apps.connections.open"); len(opens) != 1 || opens[0].Token != slackfake.AppToken {
		t.Errorf("apps.connections.open calls %+v; want one with the app token", opens)
	}
}

// TestSocketModeLeavesAFailedDeliveryUnacked: Slack resends what is not
// acked, so a failed delivery is not acked; the envelope after it is
// handled all the same.
func TestSocketModeLeavesAFailedDeliveryUnacked(t *testing.T) {
	f := newFixture(t, true)
	f.inbox.setFail(errors.New("store unavailable"))
	f.run(t)
	failed := f.fake.Queue(slackfake.EnvelopeEventsAPI, slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "hi")))
	// A bot's message is skipped without a delivery, and acked.
	skipped := f.fake.Queue(slackfake.EnvelopeEventsAPI, slackfake.EventCallback(team, "Ev2",
		map[string]any{"type": "message", "channel_type": "im", "bot_id": "B0OTHER", "text": "beep", "ts": "1.2", "channel": "D1"}))
	f.fake.WaitAck(skipped)
	for _, a := range f.fake.Acks() {
		if a.EnvelopeID == failed {
			t.Fatalf("the envelope whose delivery failed was acked")
		}
	}
	if n := f.inbox.deliveries(); n != 1 {
		t.Errorf("Deliver called %d times; want once (for the failed one)", n)
	}
}

// TestSocketModeAcksARouterRefusal: an envelope the router refuses for
// good is acked, or Slack would send it again for nothing.
func TestSocketModeAcksARouterRefusal(t *testing.T) {
	f := newFixture(t, true)
	f.inbox.setFail(errs.E("sessions.Deliver", errs.Invalid, "refused"))
	f.run(t)
	id := f.fake.Queue(slackfake.EnvelopeEventsAPI, slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "hi")))
	f.fake.WaitAck(id)
	if n := f.inbox.deliveries(); n != 1 {
		t.Errorf("Deliver called %d times; want once", n)
	}
}

func TestSocketModeSlashCommandIsAckedThenDelivered(t *testing.T) {
	f := newFixture(t, true)
	f.run(t)
	cmd := slackfake.SlashCommand{Team: team, Channel: "C1", ChannelName: "general", User: alice, UserName: "alice",
		Command: "/agents", TriggerID: "t-agents-1"}
	start := time.Now()
	id := f.fake.Queue(slackfake.EnvelopeSlashCommand, cmd.JSON())
	ack := f.fake.WaitAck(id)
	if took := time.Since(start); took >= 3*time.Second || len(ack.Payload) != 0 {
		t.Errorf("acked after %v with %s; want an empty ack within 3 s", took, ack.Payload)
	}
	got := f.inbox.Wait(t, 1)
	if got[0].Text != "/agents" || got[0].MessageID != "t-agents-1" || got[0].Conv != "slack:T0HERALD:C1:user:U0ALICE" {
		t.Errorf("delivered %+v", got[0])
	}
}

func TestSocketModeSlashCommandFailureIsToldInTheAck(t *testing.T) {
	f := newFixture(t, true)
	f.inbox.setFail(errors.New("store unavailable"))
	f.run(t)
	cmd := slackfake.SlashCommand{Team: team, Channel: "D1", User: alice, Command: "/status", TriggerID: "t1"}
	ack := f.fake.WaitAck(f.fake.Queue(slackfake.EnvelopeSlashCommand, cmd.JSON()))
	var payload map[string]string
	if err := json.Unmarshal(ack.Payload, &payload); err != nil || payload["text"] != commandFailed {
		t.Errorf("ack payload %s; want the ephemeral failure", ack.Payload)
	}
}

// TestSocketModeReconnectsWhenSlackAsks: after Slack's disconnect the SDK
// opens a new connection and events flow again.
func TestSocketModeReconnectsWhenSlackAsks(t *testing.T) {
	f := newFixture(t, true)
	f.run(t)
	f.fake.WaitConnections(1)
	f.fake.Queue(slackfake.EnvelopeDisconnect, nil)
	f.fake.WaitConnections(2)
	f.fake.WaitAck(f.fake.Queue(slackfake.EnvelopeEventsAPI, slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "still there?"))))
	if got := f.inbox.All(); len(got) != 1 || got[0].Text != "still there?" {
		t.Errorf("delivered %+v after the reconnect", got)
	}
}

func TestRunLearnsTheBotsIdentity(t *testing.T) {
	f := newFixture(t, false)
	f.run(t)
	f.fake.WaitCalls("auth.test", 1)
	testkit.Eventually(t, "the bot's identity to be learned", func() bool { return f.a.bot() != (identity{}) })
	if got := f.a.bot(); got != (identity{UserID: slackfake.BotUserID, BotID: slackfake.BotID}) {
		t.Errorf("identity %+v", got)
	}
}

// TestRunEndsWhenSlackRejectsAToken: no retry mends a rejected token, so
// Run returns Invalid for the gateway to report.
func TestRunEndsWhenSlackRejectsAToken(t *testing.T) {
	tests := []struct {
		desc   string
		socket bool
		reject func(*slackfake.Server)
	}{
		{"the bot token", false, func(s *slackfake.Server) { s.BotToken = "xoxb-another" }},
		{"the app token", true, func(s *slackfake.Server) { s.AppToken = "xapp-another" }},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, tc.socket)
			tc.reject(f.fake)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if err := f.a.Run(ctx, f.inbox); !errs.Is(err, errs.Invalid) {
				t.Fatalf("Run = %v; want Invalid", err)
			}
		})
	}
}
