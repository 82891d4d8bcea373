package telegram_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
)

const user = 42

// sender is an adapter against a fake, not running: Send needs no Run.
func sender(t *testing.T) (*telegramfake.Server, *telegram.Adapter) {
	fake := telegramfake.New(t, "")
	return fake, newAdapter(t, options(fake))
}

func dm(id, text string) outbox.Message {
	return outbox.Message{ID: id, Target: outbox.Target{Platform: telegram.Platform, Chat: "42"}, Text: text, Kind: "reply"}
}

// longReply is a reply of about n characters with prose, emoji and code
// blocks, one of them longer than a Telegram message.
func longReply(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Step %d 🚀\n\nThis step is **safe** (see [the docs](https://example.com/d?a=1&b=%d)). It's <fast>!\n\n", i, i)
		if i%3 == 1 {
			b.WriteString("```python\n")
			for j := range 120 {
				fmt.Fprintf(&b, "print('step %d line %d')  # a < b && c\n", i, j)
			}
			b.WriteString("```\n\n")
		} else {
			b.WriteString("```go\nfunc step() error { return nil }\n```\n\n")
		}
	}
	return b.String()
}

func TestLongReplyArrivesInOrderedParts(t *testing.T) {
	fake, a := sender(t)
	text := longReply(10000)
	m := dm("o1", text)
	m.ReplyTo = "42:7"
	res := a.Send(context.Background(), m)
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %v %q", res.Outcome, res.Reason)
	}
	sent := fake.Sent(user)
	if len(sent) < 3 {
		t.Fatalf("%d parts for %d characters", len(sent), len(text))
	}
	var shown strings.Builder
	for i, s := range sent {
		if n := len(utf16.Encode([]rune(s.Text))); n > chatfmt.TelegramLimit {
			t.Errorf("part %d is %d UTF-16 units", i, n)
		}
		if open, closed := strings.Count(s.Text, "<pre>"), strings.Count(s.Text, "</pre>"); open != closed {
			t.Errorf("part %d opens %d code blocks and closes %d", i, open, closed)
		}
		if want := map[bool]int{true: 7, false: 0}[i == 0]; s.ReplyTo != want || s.ParseMode != "HTML" {
			t.Errorf("part %d: reply to %d in %q, want %d in HTML", i, s.ReplyTo, s.ParseMode, want)
		}
		shown.WriteString(s.Text)
	}
	if res.MessageID != fmt.Sprint(sent[0].ID) {
		t.Errorf("result id %q, want the first part's %d", res.MessageID, sent[0].ID)
	}
	// Every code line arrives once, in order, inside a code block.
	all := shown.String()
	at := 0
	for j := range 120 {
		line := fmt.Sprintf("print('step 1 line %d')", j)
		i := strings.Index(all[at:], line)
		if i < 0 {
			t.Fatalf("code line %d missing or out of order", j)
		}
		at += i + len(line)
	}
}

func TestRateLimitedThenSent(t *testing.T) {
	fake, a := sender(t)
	fake.Fail("sendMessage", 1, telegramfake.TooManyRequests(7))

	res := a.Send(context.Background(), dm("o1", "hello"))
	if res.Outcome != adapters.RateLimited || res.RetryAfter != 7*time.Second || !strings.Contains(res.Reason, "retry after 7") {
		t.Fatalf("Send: %+v, want rate limited for 7s", res)
	}
	if res := a.Send(context.Background(), dm("o1", "hello")); res.Outcome != adapters.Accepted {
		t.Fatalf("second Send: %+v", res)
	}
	if sent := fake.Sent(user); len(sent) != 1 || sent[0].Text != "hello" {
		t.Errorf("sent %+v, want hello once", sent)
	}
}

func TestSendOutcomes(t *testing.T) {
	tests := []struct {
		desc    string
		failure telegramfake.Failure
		want    adapters.Outcome
		reason  string
	}{
		{"blocked", telegramfake.Blocked, adapters.Permanent, "telegram: Forbidden: bot was blocked by the user"},
		{"kicked", telegramfake.Kicked, adapters.Permanent, "telegram: Forbidden: bot was kicked from the group chat"},
		{"chat not found", telegramfake.ChatNotFound, adapters.Permanent, "telegram: Bad Request: chat not found"},
		{"server error", telegramfake.ServerError, adapters.Transient, "500 Internal Server Error"},
		{"proxy error page", telegramfake.BadGateway, adapters.Transient, "502 Bad Gateway"},
		{"token refused", telegramfake.Failure{Status: 401, Description: "Unauthorized"}, adapters.Transient, "Unauthorized"},
		{"flood", telegramfake.TooManyRequests(3), adapters.RateLimited, "Too Many Requests: retry after 3"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			fake, a := sender(t)
			fake.Fail("sendMessage", 1, tc.failure)
			res := a.Send(context.Background(), dm("o1", "hello"))
			if res.Outcome != tc.want || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("Send: %v %q, want %v with %q", res.Outcome, res.Reason, tc.want, tc.reason)
			}
			if strings.Contains(res.Reason, fake.Token()) {
				t.Errorf("reason %q carries the token", res.Reason)
			}
		})
	}
}

func TestSendNetworkErrorIsTransient(t *testing.T) {
	fake := telegramfake.New(t, "")
	opts := options(fake)
	opts.Config.APIURL = "http://127.0.0.1:1" // nothing listens there
	res := newAdapter(t, opts).Send(context.Background(), dm("o1", "hello"))
	if res.Outcome != adapters.Transient || strings.Contains(res.Reason, fake.Token()) {
		t.Errorf("Send: %v %q, want transient without the token", res.Outcome, res.Reason)
	}
}

func TestSendRefusesBadTargets(t *testing.T) {
	_, a := sender(t)
	for _, tg := range []outbox.Target{
		{Platform: telegram.Platform, Chat: "general"},
		{Platform: telegram.Platform, Chat: "42", Thread: "abc"},
	} {
		if res := a.Send(context.Background(), outbox.Message{Target: tg, Text: "x"}); res.Outcome != adapters.Permanent {
			t.Errorf("Send to %v: %v, want permanent", tg, res.Outcome)
		}
	}
	if res := a.Send(context.Background(), dm("o1", " \n ")); res.Outcome != adapters.Permanent {
		t.Errorf("empty Send: %v, want permanent", res.Outcome)
	}
}

func TestFormattingRefusedIsResentPlain(t *testing.T) {
	fake, a := sender(t)
	fake.RejectFormatted(1)
	res := a.Send(context.Background(), dm("o1", "**bold** <tag> & [the docs](https://example.com/?a=1&b=2)"))
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	calls := fake.Calls("sendMessage")
	if len(calls) != 2 || calls[0].Status != 400 || calls[1].Params["parse_mode"] != "" {
		t.Fatalf("calls %v, want a refused HTML send then a plain one", methods(calls))
	}
	want := "bold <tag> & the docs (https://example.com/?a=1&b=2)"
	if sent := fake.Sent(user); len(sent) != 1 || sent[0].Text != want {
		t.Errorf("sent %+v, want %q", sent, want)
	}
}

func TestFormattingRefusedAndPlainFails(t *testing.T) {
	fake, a := sender(t)
	fake.RejectFormatted(1)
	fake.Fail("sendMessage", 1, telegramfake.Pass)
	fake.Fail("sendMessage", 1, telegramfake.Blocked)
	res := a.Send(context.Background(), dm("o1", "**hi**"))
	if res.Outcome != adapters.Permanent || !strings.Contains(res.Reason, "blocked") {
		t.Errorf("Send: %+v, want the plain send's refusal", res)
	}
}

func TestPartsSentBeforeAFailureAreNotSentAgain(t *testing.T) {
	fake, a := sender(t)
	m := dm("o1", longReply(10000))
	fake.Fail("sendMessage", 1, telegramfake.Pass)
	fake.Fail("sendMessage", 1, telegramfake.ServerError)

	var kept []outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = append(kept, p)
		return nil
	})
	res := a.Send(ctx, m)
	if res.Outcome != adapters.Transient || !strings.Contains(res.Reason, "part 2 of") {
		t.Fatalf("Send: %+v, want a transient failure of part 2", res)
	}
	first := fake.Sent(user)
	if len(first) != 1 {
		t.Fatalf("%d parts sent before the failure, want 1", len(first))
	}
	want := outbox.Parts{Done: 1, First: fmt.Sprint(first[0].ID)}
	if len(kept) != 1 || kept[0] != want {
		t.Fatalf("parts kept = %+v, want %+v", kept, want)
	}
	// The retry, by any process, reads them back from the outbox.
	m.Parts = kept[0]
	res = a.Send(context.Background(), m)
	if res.Outcome != adapters.Accepted || res.MessageID != fmt.Sprint(first[0].ID) {
		t.Fatalf("retry: %+v, want accepted with the first part's id %d", res, first[0].ID)
	}
	parts := chatfmt.RenderParts(m.Text, chatfmt.TelegramHTML, chatfmt.TelegramLimit)
	sent := fake.Sent(user)
	if len(sent) != len(parts) {
		t.Fatalf("%d messages sent, want the %d parts once each", len(sent), len(parts))
	}
	for i, s := range sent {
		if s.Text != parts[i] {
			t.Errorf("message %d is not part %d", i, i)
		}
	}
}

func TestNoPartGoesOnceTheLastOneCouldNotBeRecorded(t *testing.T) {
	fake, a := sender(t)
	m := dm("o1", longReply(10000))
	ctx := adapters.WithParts(context.Background(), func(outbox.Parts) error { return errors.New("store down") })
	res := a.Send(ctx, m)
	if res.Outcome != adapters.Transient || !strings.Contains(res.Reason, "store down") {
		t.Fatalf("Send: %+v, want a transient failure naming the store", res)
	}
	if sent := fake.Sent(user); len(sent) != 1 {
		t.Errorf("%d parts sent, want only the first, whose acceptance could not be recorded", len(sent))
	}
}

func TestSendToTopicAndReplyElsewhere(t *testing.T) {
	fake, a := sender(t)
	m := outbox.Message{ID: "o1", Target: outbox.Target{Platform: telegram.Platform, Chat: "-100200", Thread: "7"}, Text: "hi", ReplyTo: "-100999:5"}
	if res := a.Send(context.Background(), m); res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	sent := fake.Sent(-100200)
	if len(sent) != 1 || sent[0].Thread != 7 || sent[0].ReplyTo != 0 {
		t.Errorf("sent %+v, want in topic 7 without a reply to another chat's message", sent)
	}
}
