package slack

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/outbox"
)

// thread is the target of the send tests: a thread in channel C1.
var thread = outbox.Target{Platform: Platform, Chat: team, Thread: "C1:1700000300.000100"}

// longReply is about 10,000 characters: numbered paragraphs with a code
// block in the middle, so the order of the parts can be read back.
func longReply() string {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "Paragraph %03d says something **worth** reading about the change, at some length to fill the line.\n\n", i)
		if i == 30 {
			b.WriteString("```go\n")
			for j := range 40 {
				fmt.Fprintf(&b, "fmt.Println(\"line %03d of the code\")\n", j)
			}
			b.WriteString("```\n\n")
		}
	}
	return b.String()
}

func TestSendSplitsALongReplyInOrder(t *testing.T) {
	f := newFixture(t, false)
	text := longReply()
	res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Text: text})
	posts := f.fake.Calls("chat.postMessage")
	if res.Outcome != adapters.Accepted || len(posts) < 3 || res.MessageID != posts[0].TS {
		t.Fatalf("Send = %+v with %d posts; want accepted, 3 or more parts, the first part's ts", res, len(posts))
	}
	var joined strings.Builder
	for i, p := range posts {
		body := p.Params.Get("text")
		if n := utf8.RuneCountInString(body); n > chatfmt.SlackLimit {
			t.Errorf("part %d has %d runes; want at most %d", i, n, chatfmt.SlackLimit)
		}
		if p.Params.Get("channel") != "C1" || p.Params.Get("thread_ts") != "1700000300.000100" {
			t.Errorf("part %d went to %q thread %q", i, p.Params.Get("channel"), p.Params.Get("thread_ts"))
		}
		if strings.Count(body, "```")%2 != 0 {
			t.Errorf("part %d leaves a code block open:\n%s", i, body)
		}
		joined.WriteString(body)
	}
	last := -1
	for i := range 60 {
		at := strings.Index(joined.String(), fmt.Sprintf("Paragraph %03d", i))
		if at <= last {
			t.Fatalf("paragraph %d is missing or out of order", i)
		}
		last = at
	}
}

func TestSendClassifiesSlacksAnswer(t *testing.T) {
	tests := []struct {
		desc       string
		failure    slackfake.Failure
		outcome    adapters.Outcome
		retryAfter time.Duration
		reason     string
	}{
		{"rate limited with Retry-After", slackfake.Failure{Status: 429, RetryAfter: 7}, adapters.RateLimited, 7 * time.Second, "ratelimited"},
		{"ratelimited in the body", slackfake.Failure{Error: "ratelimited"}, adapters.RateLimited, 0, "ratelimited"},
		{"5xx", slackfake.Failure{Status: 503}, adapters.Transient, 0, "slack server error: 503 Service Unavailable"},
		{"Slack's internal error", slackfake.Failure{Error: "internal_error"}, adapters.Transient, 0, "internal_error"},
		{"channel not found", slackfake.Failure{Error: "channel_not_found"}, adapters.Permanent, 0, "channel_not_found"},
		{"not in the channel", slackfake.Failure{Error: "not_in_channel"}, adapters.Permanent, 0, "not_in_channel"},
		{"archived", slackfake.Failure{Error: "is_archived"}, adapters.Permanent, 0, "is_archived"},
		{"too long", slackfake.Failure{Error: "msg_too_long"}, adapters.Permanent, 0, "msg_too_long"},
		// A bad token is the operator's to fix; the message waits for it
		// (adapters.Transient).
		{"token refused", slackfake.Failure{Error: "invalid_auth"}, adapters.Transient, 0, "invalid_auth: Slack refused the bot token"},
		{"token revoked", slackfake.Failure{Error: "token_revoked"}, adapters.Transient, 0, "token_revoked: Slack refused the bot token"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false)
			f.fake.Fail("chat.postMessage", tc.failure)
			res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Text: "hello"})
			if res.Outcome != tc.outcome || res.RetryAfter != tc.retryAfter || res.Reason != tc.reason {
				t.Errorf("Send = %+v; want %v after %v because %q", res, tc.outcome, tc.retryAfter, tc.reason)
			}
		})
	}
}

func TestSendNetworkErrorIsTransient(t *testing.T) {
	gone := httptest.NewServer(nil)
	gone.Close()
	a, err := New(Options{Config: config.Slack{BotToken: "xoxb-x", SigningSecret: "s", APIURL: gone.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if res := a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Text: "hello"}); res.Outcome != adapters.Transient {
		t.Errorf("Send = %+v; want transient", res)
	}
}

func TestSendBadTargetIsPermanent(t *testing.T) {
	f := newFixture(t, false)
	res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: outbox.Target{Platform: Platform, Chat: team}, Text: "hello"})
	if res.Outcome != adapters.Permanent || !strings.Contains(res.Reason, "slack:<team>:<channel>") {
		t.Errorf("Send = %+v; want permanent naming the target form", res)
	}
	if n := len(f.fake.Calls("")); n != 0 {
		t.Errorf("%d calls to Slack for a bad target", n)
	}
}

// TestSendRetryResumesAfterTheSentParts: a retry of a message whose first
// parts Slack took posts only the rest, and answers with the first ts.
func TestSendRetryResumesAfterTheSentParts(t *testing.T) {
	f := newFixture(t, false)
	text := longReply()
	want := chatfmt.RenderParts(text, chatfmt.SlackMrkdwn, chatfmt.SlackLimit)
	if len(want) < 3 {
		t.Fatalf("the reply renders to %d parts; the test needs 3 or more", len(want))
	}
	msg := outbox.Message{ID: "m1", Target: thread, Text: text}
	// The first part goes, the second meets a 500.
	f.fake.Fail("chat.postMessage", slackfake.Failure{}, slackfake.Failure{Status: 500})
	var kept []outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = append(kept, p)
		return nil
	})
	if res := f.a.Send(ctx, msg); res.Outcome != adapters.Transient {
		t.Fatalf("first attempt: %+v; want transient", res)
	}
	if len(kept) != 1 || kept[0].Done != 1 || kept[0].First == "" {
		t.Fatalf("parts kept = %+v; want the first part's", kept)
	}
	// The retry, by any process, reads them back from the outbox.
	msg.Parts = kept[0]
	res := f.a.Send(context.Background(), msg)
	if res.Outcome != adapters.Accepted {
		t.Fatalf("retry: %+v; want accepted", res)
	}
	var got []string
	var firstTS string
	for _, c := range f.fake.Calls("chat.postMessage") {
		if c.TS == "" {
			continue // the failed call
		}
		if firstTS == "" {
			firstTS = c.TS
		}
		got = append(got, c.Params.Get("text"))
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("posted %d parts over two attempts; want each of the %d parts once, in order", len(got), len(want))
	}
	if res.MessageID != firstTS {
		t.Errorf("retry answered ts %q; want the first part's %q", res.MessageID, firstTS)
	}
}

func TestSendResendsPlainWhenSlackRefusesTheFormatting(t *testing.T) {
	f := newFixture(t, false)
	f.fake.Fail("chat.postMessage", slackfake.Failure{Error: "invalid_blocks"})
	res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Text: "**bold** and `code` & <tags>"})
	posts := f.fake.Calls("chat.postMessage")
	if res.Outcome != adapters.Accepted || len(posts) != 2 {
		t.Fatalf("Send = %+v after %d posts; want accepted after 2", res, len(posts))
	}
	if got := posts[0].Params.Get("text"); got != "*bold* and `code` &amp; &lt;tags&gt;" || posts[0].Params.Get("mrkdwn") != "" {
		t.Errorf("first post %q (mrkdwn %q); want the mrkdwn rendering", got, posts[0].Params.Get("mrkdwn"))
	}
	if got := posts[1].Params.Get("text"); got != "bold and code &amp; &lt;tags&gt;" || posts[1].Params.Get("mrkdwn") != "false" {
		t.Errorf("resent %q (mrkdwn %q); want plain text, escaped, with mrkdwn=false", got, posts[1].Params.Get("mrkdwn"))
	}
}

func TestPresence(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	if err := f.a.Typing(ctx, thread); err != nil || len(f.fake.Calls("")) != 0 {
		t.Fatalf("Typing = %v with %d calls; want a no-op", err, len(f.fake.Calls("")))
	}
	id, err := f.a.Status(ctx, thread, "", "Running `go test`…")
	if err != nil || id == "" {
		t.Fatalf("Status (new) = %q, %v", id, err)
	}
	posted := f.fake.Calls("chat.postMessage")
	if len(posted) != 1 || posted[0].Params.Get("thread_ts") != "1700000300.000100" || posted[0].TS != id {
		t.Fatalf("status posted as %+v; want one post in the thread with ts %q", posted, id)
	}
	again, err := f.a.Status(ctx, thread, id, "Reading files…")
	updates := f.fake.Calls("chat.update")
	if err != nil || again != id || len(updates) != 1 || updates[0].Params.Get("ts") != id ||
		updates[0].Params.Get("channel") != "C1" || updates[0].Params.Get("text") != "Reading files…" {
		t.Fatalf("Status (edit) = %q, %v with updates %+v; want chat.update of %q", again, err, updates, id)
	}
	if err := f.a.ClearStatus(ctx, thread, id); err != nil {
		t.Fatalf("ClearStatus: %v", err)
	}
	deletes := f.fake.Calls("chat.delete")
	if len(deletes) != 1 || deletes[0].Params.Get("ts") != id || deletes[0].Params.Get("channel") != "C1" {
		t.Fatalf("deletes %+v; want chat.delete of %q in C1", deletes, id)
	}
	f.fake.Fail("chat.delete", slackfake.Failure{Error: "message_not_found"})
	if err := f.a.ClearStatus(ctx, thread, id); err != nil {
		t.Errorf("ClearStatus of a line already gone = %v; want nil", err)
	}
}
