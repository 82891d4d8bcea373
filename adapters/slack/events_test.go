package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

// signedEvent is a POST of body to the events route, signed now.
func signedEvent(srvURL string, body []byte) *http.Request {
	return slackfake.SignedRequest(srvURL+EventsPath, slackfake.SigningSecret, time.Now(), jsonType, body)
}

// reply sends text as the reply to in, as the turn worker would address
// it, and returns the fake's record of the post.
func reply(t *testing.T, f *fixture, in sessions.Inbound, text string) slackfake.Call {
	t.Helper()
	target, err := sessions.ReplyTarget(in)
	if err != nil {
		t.Fatalf("ReplyTarget: %v", err)
	}
	before := len(f.fake.Calls("chat.postMessage"))
	res := f.a.Send(context.Background(), outbox.Message{ID: "out-" + in.MessageID, Target: target, Text: text, ReplyTo: in.MessageID})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v; want accepted", res)
	}
	posts := f.fake.Calls("chat.postMessage")
	if len(posts) != before+1 {
		t.Fatalf("Send posted %d messages; want 1", len(posts)-before)
	}
	if res.MessageID != posts[before].TS {
		t.Errorf("Send's message id %q; want the post's ts %q", res.MessageID, posts[before].TS)
	}
	return posts[before]
}

func TestEventsAPIDeliversAndRepliesInTheThread(t *testing.T) {
	tests := []struct {
		desc             string
		event            map[string]any
		conv, text       string
		channel, replyTS string // where the reply is posted
	}{{
		desc:  "a top-level mention is answered in a thread under it",
		event: mention(alice, "C1", "1700000100.000100", "", "<@U0HERALDBOT> what changed?"),
		conv:  "slack:T0HERALD:C1:1700000100.000100", text: "what changed?",
		channel: "C1", replyTS: "1700000100.000100",
	}, {
		desc:  "a mention in a thread is answered in that thread",
		event: mention(alice, "C1", "1700000100.000300", "1700000100.000100", "<@U0HERALDBOT> and now?"),
		conv:  "slack:T0HERALD:C1:1700000100.000100", text: "and now?",
		channel: "C1", replyTS: "1700000100.000100",
	}, {
		desc:  "a DM is answered in the DM",
		event: dm(alice, "D1", "1700000100.000200", "", "hello"),
		conv:  "slack:T0HERALD:D1", text: "hello",
		channel: "D1",
	}, {
		desc:  "a DM written in a thread is answered in the thread",
		event: dm(alice, "D1", "1700000100.000400", "1700000100.000200", "more"),
		conv:  "slack:T0HERALD:D1", text: "more",
		channel: "D1", replyTS: "1700000100.000200",
	}}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false)
			srv := f.events(t)
			status, _ := post(t, signedEvent(srv.URL, slackfake.EventCallback(team, "Ev1", tc.event)))
			if status != http.StatusOK {
				t.Fatalf("status %d; want 200", status)
			}
			got := f.inbox.All()
			if len(got) != 1 {
				t.Fatalf("delivered %d inbounds; want 1", len(got))
			}
			in := got[0]
			if in.Conv != tc.conv || in.Text != tc.text || in.Sender != alice {
				t.Errorf("delivered %+v; want conv %q, text %q from %s", in, tc.conv, tc.text, alice)
			}
			p := reply(t, f, in, "**done**")
			if p.Params.Get("channel") != tc.channel || p.Params.Get("thread_ts") != tc.replyTS {
				t.Errorf("reply posted to channel %q thread %q; want %q thread %q",
					p.Params.Get("channel"), p.Params.Get("thread_ts"), tc.channel, tc.replyTS)
			}
			if p.Params.Get("text") != "*done*" || p.Token != slackfake.BotToken {
				t.Errorf("reply text %q with token %q; want mrkdwn *done* with the bot token", p.Params.Get("text"), p.Token)
			}
		})
	}
}

func TestEventsAPIRefusesWhatSlackDidNotSign(t *testing.T) {
	body := slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "hi"))
	tests := []struct {
		desc string
		req  func(url string) *http.Request
	}{
		{"another secret", func(url string) *http.Request {
			return slackfake.SignedRequest(url+EventsPath, "not-the-secret", time.Now(), jsonType, body)
		}},
		{"a timestamp six minutes old", func(url string) *http.Request {
			return slackfake.SignedRequest(url+EventsPath, slackfake.SigningSecret, time.Now().Add(-6*time.Minute), jsonType, body)
		}},
		{"a timestamp six minutes ahead", func(url string) *http.Request {
			return slackfake.SignedRequest(url+EventsPath, slackfake.SigningSecret, time.Now().Add(6*time.Minute), jsonType, body)
		}},
		{"a body changed after signing", func(url string) *http.Request {
			r := slackfake.SignedRequest(url+EventsPath, slackfake.SigningSecret, time.Now(), jsonType, body)
			tampered := slackfake.SignedRequest(url+EventsPath, slackfake.SigningSecret, time.Now(), jsonType,
				slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "rm -rf")))
			tampered.Header = r.Header
			return tampered
		}},
		{"no signature", func(url string) *http.Request {
			r := slackfake.SignedRequest(url+EventsPath, slackfake.SigningSecret, time.Now(), jsonType, body)
			r.Header.Del("X-Slack-Signature")
			return r
		}},
		{"a slash command with another secret", func(url string) *http.Request {
			form := slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/review", TriggerID: "t1"}.Form()
			return slackfake.SignedRequest(url+CommandsPath, "not-the-secret", time.Now(), formType, []byte(form.Encode()))
		}},
		{"a stale slash command", func(url string) *http.Request {
			form := slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/review", TriggerID: "t1"}.Form()
			return slackfake.SignedRequest(url+CommandsPath, slackfake.SigningSecret, time.Now().Add(-10*time.Minute), formType, []byte(form.Encode()))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false)
			srv := f.events(t)
			if status, _ := post(t, tc.req(srv.URL)); status != http.StatusUnauthorized {
				t.Errorf("status %d; want 401", status)
			}
			if n := f.inbox.deliveries(); n != 0 {
				t.Errorf("Deliver was called %d times; want never", n)
			}
		})
	}
}

// TestEventsAPIRetryIsTheSameMessage: Slack's retry of an event, and the
// message.im that comes with an app_mention of the same post, carry the
// same conversation and dedupe key, so the router makes one turn of them.
func TestEventsAPIRetryIsTheSameMessage(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	body := slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1700000100.000500", "", "hello"))
	if status, _ := post(t, signedEvent(srv.URL, body)); status != http.StatusOK {
		t.Fatalf("first delivery: status %d", status)
	}
	retry := signedEvent(srv.URL, body)
	retry.Header.Set("X-Slack-Retry-Num", "1")
	retry.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	if status, _ := post(t, retry); status != http.StatusOK {
		t.Fatalf("retry: status %d; want 200", status)
	}
	twin := slackfake.EventCallback(team, "Ev2", mention(alice, "D1", "1700000100.000500", "", "<@U0HERALDBOT> hello"))
	if status, _ := post(t, signedEvent(srv.URL, twin)); status != http.StatusOK {
		t.Fatalf("app_mention twin: status %d; want 200", status)
	}
	got := f.inbox.All()
	if len(got) != 3 {
		t.Fatalf("Deliver took %d inbounds; want 3 (the router dedupes them)", len(got))
	}
	for _, in := range got[1:] {
		if diff := cmp.Diff(got[0], in); diff != "" {
			t.Errorf("a redelivery differs from the first (-first +again):\n%s", diff)
		}
	}
	if got[0].MessageID != "D1:1700000100.000500" {
		t.Errorf("dedupe key %q; want the channel and ts", got[0].MessageID)
	}
}

func TestEventsAPIAnswersURLVerification(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	status, body := post(t, signedEvent(srv.URL, slackfake.URLVerification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")))
	var got struct{ Challenge string }
	if err := json.Unmarshal([]byte(body), &got); status != http.StatusOK || err != nil ||
		got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("status %d body %q; want 200 with the challenge", status, body)
	}
	if n := len(f.inbox.All()); n != 0 {
		t.Errorf("delivered %d inbounds for a url_verification", n)
	}
}

// TestEventsAPIFailedDeliveryAsksSlackToRetry: 200 only after Deliver
// returned nil, so Slack's retry finds the queue back.
func TestEventsAPIFailedDeliveryAsksSlackToRetry(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	body := slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "hi"))
	f.inbox.setFail(errors.New("store unavailable"))
	if status, _ := post(t, signedEvent(srv.URL, body)); status != http.StatusInternalServerError {
		t.Fatalf("status %d while delivery fails; want 500", status)
	}
	f.inbox.setFail(nil)
	retry := signedEvent(srv.URL, body)
	retry.Header.Set("X-Slack-Retry-Num", "1")
	if status, _ := post(t, retry); status != http.StatusOK {
		t.Fatalf("status %d on the retry; want 200", status)
	}
	if got := f.inbox.All(); len(got) != 1 || got[0].Text != "hi" {
		t.Errorf("delivered %+v; want the retried message", got)
	}
}

// TestEventsAPIRouterRefusalIsNotRetried: what the router refuses for
// good (Invalid, TooLarge) gets 200, since Slack's retry would be refused
// the same way; the refusal is logged.
func TestEventsAPIRouterRefusalIsNotRetried(t *testing.T) {
	for _, code := range []errs.Code{errs.Invalid, errs.TooLarge} {
		t.Run(string(code), func(t *testing.T) {
			f := newFixture(t, false)
			srv := f.events(t)
			f.inbox.setFail(errs.E("sessions.Deliver", code, "refused"))
			body := slackfake.EventCallback(team, "Ev1", dm(alice, "D1", "1.1", "", "hi"))
			if status, _ := post(t, signedEvent(srv.URL, body)); status != http.StatusOK {
				t.Errorf("status %d for a refused message; want 200", status)
			}
			if !strings.Contains(f.logs.String(), "the router refused a message; it is dropped") {
				t.Errorf("the refusal is not logged:\n%s", f.logs)
			}
		})
	}
}

// TestSlashCommandRouterRefusalIsTold: a command the router refuses for
// good is told as such, not as a failure to try again.
func TestSlashCommandRouterRefusalIsTold(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	f.inbox.setFail(errs.E("sessions.Deliver", errs.TooLarge, "too long"))
	form := slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/queue", Text: "x", TriggerID: "t1"}.Form()
	status, body := post(t, slackfake.SignedRequest(srv.URL+CommandsPath, slackfake.SigningSecret, time.Now(), formType, []byte(form.Encode())))
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); status != http.StatusOK || err != nil || got["text"] != commandRefused {
		t.Errorf("status %d body %q; want 200 with %q", status, body, commandRefused)
	}
}

func TestEventsAPIRefusedUserGetsNothing(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	for _, body := range [][]byte{
		slackfake.EventCallback(team, "Ev1", dm(mallory, "D9", "1.1", "", "let me in")),
		slackfake.EventCallback(team, "Ev2", mention(mallory, "C1", "1.2", "", "<@U0HERALDBOT> let me in")),
	} {
		// 200: Slack must not retry what herald refuses.
		if status, _ := post(t, signedEvent(srv.URL, body)); status != http.StatusOK {
			t.Fatalf("status %d; want 200", status)
		}
	}
	form := slackfake.SlashCommand{Team: team, Channel: "C1", User: mallory, UserName: "mallory", Command: "/review", TriggerID: "t1"}.Form()
	if status, _ := post(t, slackfake.SignedRequest(srv.URL+CommandsPath, slackfake.SigningSecret, time.Now(), formType, []byte(form.Encode()))); status != http.StatusOK {
		t.Fatalf("slash command status %d; want 200", status)
	}
	if got := f.inbox.All(); len(got) != 0 {
		t.Errorf("delivered %+v from a refused user", got)
	}
	if n := strings.Count(f.logs.String(), "user_id="+mallory); n != 3 {
		t.Errorf("logged the refused user %d times; want 3:\n%s", n, f.logs)
	}
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(line, "user_id="+mallory) && strings.Count(line, "platform=") != 1 {
			t.Errorf("a refusal names the platform other than once: %s", line)
		}
	}
}

func TestSlashCommandOverHTTP(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	form := slackfake.SlashCommand{Team: team, Channel: "C1", ChannelName: "general", User: alice, UserName: "alice",
		Command: "/review", Text: "the retry logic", TriggerID: "13345224609.738474920.8088930838d88f008e0"}.Form()
	start := time.Now()
	status, body := post(t, slackfake.SignedRequest(srv.URL+CommandsPath, slackfake.SigningSecret, time.Now(), formType, []byte(form.Encode())))
	if took := time.Since(start); status != http.StatusOK || body != "" || took >= 3*time.Second {
		t.Fatalf("status %d body %q after %v; want an empty 200 within 3 s", status, body, took)
	}
	got := f.inbox.Wait(t, 1)
	want := sessions.Inbound{Conv: "slack:T0HERALD:C1:user:U0ALICE", Sender: alice,
		MessageID: "13345224609.738474920.8088930838d88f008e0", Text: "/review the retry logic",
		Meta: map[string]string{sessions.MetaTarget: "slack:T0HERALD:C1",
			sessions.MetaChannelUser: "slack:T0HERALD:C1:user:U0ALICE", sessions.MetaLatest: "1"}}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Fatalf("delivered (-want +got):\n%s", diff)
	}
	p := reply(t, f, got[0], "Review started.")
	if p.Params.Get("channel") != "C1" || p.Params.Get("thread_ts") != "" {
		t.Errorf("answer posted to %q thread %q; want the channel C1", p.Params.Get("channel"), p.Params.Get("thread_ts"))
	}
}

// TestSlashCommandSlowDeliveryIsToldWithinTheDeadline: a delivery that
// does not finish in time is cut short and the user is told, rather than
// Slack showing a timeout.
func TestSlashCommandSlowDeliveryIsToldWithinTheDeadline(t *testing.T) {
	f := newFixture(t, false)
	f.a.commandDeadline = 50 * time.Millisecond
	srv := f.events(t)
	f.inbox.setBlock(true)
	form := slackfake.SlashCommand{Team: team, Channel: "C1", User: alice, Command: "/agents", TriggerID: "t1"}.Form()
	start := time.Now()
	status, body := post(t, slackfake.SignedRequest(srv.URL+CommandsPath, slackfake.SigningSecret, time.Now(), formType, []byte(form.Encode())))
	var got map[string]string
	if err := json.Unmarshal([]byte(body), &got); status != http.StatusOK || err != nil ||
		got["response_type"] != "ephemeral" || got["text"] != commandFailed || time.Since(start) >= 3*time.Second {
		t.Fatalf("status %d body %q; want 200 with the ephemeral failure, within 3 s", status, body)
	}
}

func TestSocketModeMountsNoRoutes(t *testing.T) {
	f := newFixture(t, true)
	srv := f.events(t)
	if status, _ := post(t, signedEvent(srv.URL, slackfake.URLVerification("c"))); status != http.StatusNotFound {
		t.Errorf("status %d; want 404 in Socket Mode", status)
	}
}
