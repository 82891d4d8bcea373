package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/sessions"
)

// A stream shows the question its turn waits on, with how to answer
// it through the API, a paragraph before the reply's text; how an
// approval was answered is not shown.
func TestCompletionStreamShowsAnApproval(t *testing.T) {
	f := newFixture(t, nil)
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		f.turns.Add(1)
		time.AfterFunc(30*time.Millisecond, func() {
			defer f.turns.Done()
			for _, m := range []struct{ kind, text, id string }{
				{approvals.KindDecided, "This approval expired: the turn that asked for the command `x` ended.", "ap_earlier"},
				{approvals.KindQuestion, "Approval needed: run this command?", "ap_1"},
				{approvals.KindDecided, "Allowed once by api: the command `x`.", "ap_1"},
				{"reply", "done", ""},
			} {
				out := replyTo(in, m.kind, m.text)
				if m.id != "" {
					out.ReplyTo, out.Meta = "", map[string]string{approvals.MetaApproval: m.id}
				}
				if r := f.api.Send(context.Background(), out); r.Outcome != adapters.Accepted {
					panic(r.Reason)
				}
			}
		})
		return nil
	})
	c := f.client(option.WithHeader("X-Herald-Conversation", "ap"))
	stream := c.Chat.Completions.NewStreaming(context.Background(), chat(openai.UserMessage("run x")))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "Approval needed: run this command?\n" +
		`Or POST /api/v1/approvals/ap_1 with {"decision": "once"} (or session, always, deny).` +
		"\n\ndone"
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want {
		t.Errorf("streamed %+v, want the content %q", acc.Choices, want)
	}
}
