package llm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
)

// newAnthropic returns an Anthropic client for ms's Messages API, with
// newClient's backoff and recorded sleeps.
func newAnthropic(t *testing.T, ms *testkit.ModelServer, edit func(*llm.OpenAIOptions)) (*llm.Anthropic, *sleeper) {
	t.Helper()
	s := &sleeper{}
	opts := llm.OpenAIOptions{
		BaseURL: ms.AnthropicURL(),
		APIKey:  testKey,
		Model:   "claude-test",
		Timeout: 10 * time.Second,
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * time.Second },
		Sleep:   s.Sleep,
	}
	if edit != nil {
		edit(&opts)
	}
	c, err := llm.NewAnthropic(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func TestAnthropicReply(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.RequireAPIKey(testKey)
	ms.Script(testkit.Reply("hello there"))
	c, _ := newAnthropic(t, ms, nil)
	resp, err := c.Complete(context.Background(), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "hello there" || resp.FinishReason != "stop" || resp.Message.Role != "assistant" {
		t.Errorf("reply = %+v", resp)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens != 2 {
		t.Errorf("usage = %+v, want the server's counts", resp.Usage)
	}
	req := ms.Requests()[0]
	if req.API != testkit.APIAnthropic || req.Model != "claude-test" || req.Header.Get("X-Api-Key") != testKey {
		t.Errorf("request = api %q model %q x-api-key %q", req.API, req.Model, req.Header.Get("X-Api-Key"))
	}
	want := []testkit.ModelMessage{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "hi"}}
	if d := cmp.Diff(want, req.Messages); d != "" {
		t.Errorf("messages sent (-want +got):\n%s", d)
	}
}

// A tool call comes back as herald's, and its result goes back as a
// tool_result of the call.
func TestAnthropicToolUse(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(
		testkit.Step{ToolCalls: []testkit.ModelToolCall{{Name: "lookup", Arguments: `{"q":"weather"}`}}},
		testkit.Reply("sunny"),
	)
	c, _ := newAnthropic(t, ms, nil)
	tools := []llm.ToolSpec{{Name: "lookup", Description: "Look a thing up.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)}}
	req := ask("weather?")
	req.Tools = tools
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("reply = %+v, want one tool call", resp)
	}
	call := resp.Message.ToolCalls[0]
	var args map[string]string
	if call.Name != "lookup" || call.ID == "" || json.Unmarshal([]byte(call.Arguments), &args) != nil || args["q"] != "weather" {
		t.Errorf("tool call = %+v", call)
	}
	sent := ms.Requests()[0]
	if len(sent.Tools) != 1 || sent.Tools[0].Name != "lookup" {
		t.Errorf("tools sent = %+v", sent.Tools)
	}
	if !strings.Contains(string(sent.Body), `"additionalProperties":false`) || !strings.Contains(string(sent.Body), `"required":["q"]`) {
		t.Errorf("the tool's schema was not sent whole: %s", sent.Body)
	}

	req.Messages = append(req.Messages, resp.Message, chat.Message{Role: "tool", ToolCallID: call.ID, Name: "lookup", Content: "sunny, 21°C"})
	resp, err = c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "sunny" {
		t.Errorf("reply after the tool = %+v", resp)
	}
	got := ms.Requests()[1].Messages
	last := got[len(got)-1]
	if last.Role != "tool" || last.ToolCallID != call.ID || last.Content != "sunny, 21°C" {
		t.Errorf("tool result sent as %+v", last)
	}
	if a := got[len(got)-2]; a.Role != "assistant" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != call.ID {
		t.Errorf("the assistant's tool call sent back as %+v", a)
	}
}

func TestAnthropicStreams(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Step{Text: "one two three", Chunks: []string{"one ", "two ", "three"}})
	c, _ := newAnthropic(t, ms, nil)
	req := ask("count")
	var deltas []string
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"one ", "two ", "three"}, deltas); d != "" {
		t.Errorf("deltas (-want +got):\n%s", d)
	}
	if resp.Message.Content != "one two three" || resp.Usage.CompletionTokens == 0 {
		t.Errorf("streamed reply = %+v", resp)
	}
}

func TestAnthropicFailures(t *testing.T) {
	tests := []struct {
		desc    string
		steps   []testkit.Step
		class   llm.Class
		retries int
	}{
		{"a refused key", []testkit.Step{testkit.Fail(http.StatusUnauthorized, "invalid x-api-key")}, llm.ClassAuth, 0},
		{"an unknown model", []testkit.Step{testkit.Fail(http.StatusNotFound, "model: nope")}, llm.ClassModelNotFound, 0},
		{"overloaded, then fine", []testkit.Step{testkit.Fail(529, "Overloaded"), testkit.Reply("ok")}, "", 1},
		{"rate limited past the wait", []testkit.Step{{Status: http.StatusTooManyRequests, Error: "slow down", RetryAfter: "3600"}}, llm.ClassRateLimited, 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tt.steps...)
			c, s := newAnthropic(t, ms, nil)
			resp, err := c.Complete(context.Background(), ask("hi"))
			if tt.class == "" {
				if err != nil || resp.Message.Content != "ok" {
					t.Fatalf("Complete = %+v, %v", resp, err)
				}
			} else if llm.ClassOf(err) != tt.class {
				t.Fatalf("Complete = %v, want class %s", err, tt.class)
			}
			if n := len(s.Waits()); n != tt.retries {
				t.Errorf("retries = %d, want %d", n, tt.retries)
			}
		})
	}
	t.Run("not configured", func(t *testing.T) {
		c, err := llm.NewAnthropic(llm.OpenAIOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Complete(context.Background(), ask("hi")); llm.ClassOf(err) != llm.ClassNotConfigured {
			t.Errorf("Complete with no model = %v", err)
		}
	})
}

// A tool call the model wrote badly stays in the history; it is sent as
// an object holding the text, not refused.
func TestAnthropicSendsABadToolCallBack(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("fixed it"))
	c, _ := newAnthropic(t, ms, func(o *llm.OpenAIOptions) { o.MaxTokens = 1024 })
	req := ask("write it")
	req.Messages = append(req.Messages,
		chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "toolu_1", Name: "write_file", Arguments: `{"path": "a.txt", "content": "cut`}}},
		chat.Message{Role: "tool", ToolCallID: "toolu_1", Content: "error: the arguments are not JSON; send a JSON object"},
	)
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := string(ms.Requests()[0].Body)
	if !strings.Contains(body, `"_raw":"{\"path\": \"a.txt\", \"content\": \"cut"`) || !strings.Contains(body, `"max_tokens":1024`) {
		t.Errorf("request body = %s", body)
	}
}
