package testkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/testkit"
)

// These tests use the real Anthropic SDK as the client: the point of the
// fake is that the SDK reads what it answers.

// anthropicClient is an SDK client for ms that reads nothing from the
// environment and does not retry, so a scripted error is seen once.
func anthropicClient(ms *testkit.ModelServer, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(ms.AnthropicURL()),
		option.WithMaxRetries(0),
	}, opts...)...)
}

func userSays(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}

// block is what a test compares of a content block.
type block struct{ Type, Text, Name, Input string }

func blocks(t *testing.T, content []anthropic.ContentBlockUnion) []block {
	t.Helper()
	var out []block
	for _, c := range content {
		b := block{Type: c.Type, Text: c.Text, Name: c.Name}
		if c.Type == "tool_use" {
			if !strings.HasPrefix(c.ID, "toolu_") {
				t.Errorf("tool use id %q", c.ID)
			}
			b.Input = string(c.Input)
		}
		out = append(out, b)
	}
	return out
}

func TestAnthropicText(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("hello there"))
	client := anthropicClient(ms, option.WithAPIKey("k"))
	params := userSays("hi")
	params.System = []anthropic.TextBlockParam{{Text: "be brief"}}
	params.Metadata = anthropic.MetadataParam{UserID: anthropic.String("u-1")}

	msg, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]block{{Type: "text", Text: "hello there"}}, blocks(t, msg.Content)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	// Words counted as the Chat Completions side counts them: each
	// message's words plus one, the reply's words.
	if msg.ID != "msg_1" || msg.Model != "claude-test" || msg.StopReason != anthropic.StopReasonEndTurn ||
		msg.Usage.InputTokens != 5 || msg.Usage.OutputTokens != 2 {
		t.Errorf("message %s", msg.RawJSON())
	}

	// The script is empty: the zero step echoes.
	msg, err = client.Messages.New(context.Background(), userSays("again"))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "echo: again" {
		t.Errorf("echo %s", msg.RawJSON())
	}

	r := ms.WaitRequests(2)[0]
	want := []testkit.ModelMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if r.API != testkit.APIAnthropic || r.Model != "claude-test" || r.Stream || r.User != "u-1" || r.Conversation() != "u-1" ||
		!strings.Contains(string(r.Body), `"max_tokens":256`) || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("recorded %+v", r)
	}
}

func TestAnthropicToolUse(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(
		testkit.CallTools(testkit.ToolCall("lookup", `{"q":"héraldique","n":2}`), testkit.ToolCall("memory", `{}`)),
		testkit.Reply("found it"),
	)
	client := anthropicClient(ms, option.WithAPIKey("k"))
	params := userSays("look it up")
	params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "lookup",
		Description: anthropic.String("find a word"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}},
	}}}

	msg, err := client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 2 {
		t.Fatalf("message %s", msg.RawJSON())
	}
	use := msg.Content[0].AsToolUse()
	var input struct {
		Q string `json:"q"`
		N int    `json:"n"`
	}
	if err := json.Unmarshal(use.Input, &input); err != nil {
		t.Fatal(err)
	}
	if use.ID != "toolu_1_0" || use.Name != "lookup" || input.Q != "héraldique" || input.N != 2 {
		t.Errorf("tool use %s", use.RawJSON())
	}

	// The follow-up carries the assistant turn back and a result per call.
	params.Messages = append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(
		anthropic.NewToolResultBlock(use.ID, "42", false),
		anthropic.NewToolResultBlock(msg.Content[1].ID, "no memory", true),
	))
	msg, err = client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "found it" || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("reply %s", msg.RawJSON())
	}

	r := ms.WaitRequests(2)[1]
	want := []testkit.ModelMessage{
		{Role: "user", Content: "look it up"},
		{Role: "assistant", ToolCalls: []testkit.ModelToolCall{
			{ID: "toolu_1_0", Name: "lookup", Arguments: `{"q":"héraldique","n":2}`},
			{ID: "toolu_1_1", Name: "memory", Arguments: `{}`},
		}},
		{Role: "tool", ToolCallID: "toolu_1_0", Content: "42"},
		{Role: "tool", ToolCallID: "toolu_1_1", Content: "no memory", IsError: true},
	}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "lookup" || r.Tools[0].Description != "find a word" ||
		!strings.Contains(string(r.Tools[0].Parameters), `"properties":{"q":{"type":"string"}}`) {
		t.Errorf("tools %+v", r.Tools)
	}
}

// TestAnthropicStreams answers each step twice, once whole and once
// streamed, and expects the SDK's accumulated stream to equal the whole
// message.
func TestAnthropicStreams(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		step   testkit.Step
		pieces []string // the text deltas
	}{
		{desc: "words", step: testkit.Reply("one two three"), pieces: []string{"one ", "two ", "three"}},
		{desc: "chunks", step: testkit.Step{Text: "héllo", Chunks: []string{"hé", "llo"}}, pieces: []string{"hé", "llo"}},
		{desc: "echo", step: testkit.Echo(), pieces: []string{"echo: ", "count"}},
		{desc: "tool calls", step: testkit.CallTools(testkit.ToolCall("lookup", `{"word":"héraldique","n":[1,2]}`), testkit.ToolCall("memory", ""))},
		{desc: "text and a tool call", step: testkit.Step{Text: "let me look", ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("lookup", `{"q":1}`)}},
			pieces: []string{"let ", "me ", "look"}},
		{desc: "length", step: testkit.Step{Text: "cut", FinishReason: "length"}, pieces: []string{"cut"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.step, tc.step)
			client := anthropicClient(ms, option.WithAPIKey("k"))
			whole, err := client.Messages.New(context.Background(), userSays("count"))
			if err != nil {
				t.Fatal(err)
			}

			stream := client.Messages.NewStreaming(context.Background(), userSays("count"))
			defer stream.Close()
			var acc anthropic.Message
			var pieces []string
			for stream.Next() {
				ev := stream.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatal(err)
				}
				if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					pieces = append(pieces, ev.Delta.Text)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}

			if diff := cmp.Diff(blocks(t, whole.Content), blocks(t, acc.Content)); diff != "" {
				t.Errorf("streamed content (-whole +streamed):\n%s", diff)
			}
			if diff := cmp.Diff(tc.pieces, pieces); diff != "" {
				t.Errorf("text deltas (-want +got):\n%s", diff)
			}
			if acc.StopReason != whole.StopReason || acc.Usage.InputTokens != whole.Usage.InputTokens ||
				acc.Usage.OutputTokens != whole.Usage.OutputTokens || acc.Model != whole.Model {
				t.Errorf("streamed %s\nwhole %s", acc.RawJSON(), whole.RawJSON())
			}
			if r := ms.WaitRequests(2); r[0].Stream || !r[1].Stream {
				t.Errorf("recorded stream %v, %v", r[0].Stream, r[1].Stream)
			}
		})
	}
	t.Run("stop reasons", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Step{Text: "cut", FinishReason: "length"}, testkit.CallTools(testkit.ToolCall("x", `{}`)))
		client := anthropicClient(ms, option.WithAPIKey("k"))
		for _, want := range []anthropic.StopReason{anthropic.StopReasonMaxTokens, anthropic.StopReasonToolUse} {
			msg, err := client.Messages.New(context.Background(), userSays("x"))
			if err != nil {
				t.Fatal(err)
			}
			if msg.StopReason != want {
				t.Errorf("stop reason %q, want %q", msg.StopReason, want)
			}
		}
	})
	t.Run("dropped", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Step{Text: "a b c", Drop: true}, testkit.Dropped())
		client := anthropicClient(ms, option.WithAPIKey("k"))
		stream := client.Messages.NewStreaming(context.Background(), userSays("x"))
		defer stream.Close()
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if stream.Err() == nil || acc.StopReason != "" || len(acc.Content) != 1 || acc.Content[0].Text != "a b c" {
			t.Errorf("dropped stream: err %v, got %s", stream.Err(), acc.RawJSON())
		}
		var apiErr *anthropic.Error
		if _, err := client.Messages.New(context.Background(), userSays("x")); err == nil || errors.As(err, &apiErr) {
			t.Errorf("dropped request: err %v", err)
		}
	})
}

func TestAnthropicErrors(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		step       testkit.Step
		typ        string
		code       string
		retryAfter string
	}{
		{desc: "400", step: testkit.Fail(400, "bad"), typ: "invalid_request_error"},
		{desc: "401", step: testkit.Fail(401, "bad key"), typ: "authentication_error"},
		{desc: "402", step: testkit.Fail(402, "pay"), typ: "billing_error"},
		{desc: "403", step: testkit.Fail(403, "no"), typ: "permission_error"},
		{desc: "404", step: testkit.Fail(404, "no model"), typ: "not_found_error"},
		{desc: "429", step: testkit.RateLimited("3"), typ: "rate_limit_error", retryAfter: "3"},
		{desc: "500", step: testkit.Fail(500, "boom"), typ: "api_error"},
		{desc: "503", step: testkit.Fail(503, "down"), typ: "api_error"},
		{desc: "529", step: testkit.Fail(529, "Overloaded"), typ: "overloaded_error"},
		{desc: "type and code", step: testkit.Step{Status: 429, Error: "spent", ErrorType: "rate_limit_error", ErrorCode: "enforced_spend_limit_reached"},
			typ: "rate_limit_error", code: "enforced_spend_limit_reached"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.step, tc.step)
			client := anthropicClient(ms, option.WithAPIKey("k"))
			_, err := client.Messages.New(context.Background(), userSays("x"))
			stream := client.Messages.NewStreaming(context.Background(), userSays("x"))
			for stream.Next() {
				t.Errorf("event from an error: %s", stream.Current().RawJSON())
			}
			for _, err := range []error{err, stream.Err()} {
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v is not an *anthropic.Error", err)
				}
				if apiErr.StatusCode != tc.step.Status || string(apiErr.Type()) != tc.typ || apiErr.Message != tc.step.Error ||
					string(apiErr.ErrorCode()) != tc.code || apiErr.Response.Header.Get("Retry-After") != tc.retryAfter {
					t.Errorf("error %d %q %q %q retry-after %q: %v", apiErr.StatusCode, apiErr.Type(), apiErr.Message, apiErr.ErrorCode(),
						apiErr.Response.Header.Get("Retry-After"), apiErr)
				}
			}
		})
	}
	t.Run("raw", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Step{Status: 502, RawError: "<html>bad gateway</html>"})
		client := anthropicClient(ms, option.WithAPIKey("k"))
		_, err := client.Messages.New(context.Background(), userSays("x"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.RawJSON() != "<html>bad gateway</html>" {
			t.Errorf("error %v", err)
		}
	})
}

func TestAnthropicAPIKeyAndModels(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.RequireAPIKey("k1")
	ms.Models("claude-test")
	for _, tc := range []struct {
		desc   string
		opts   []option.RequestOption
		model  string
		status int // 0: answered
		typ    string
	}{
		{desc: "x-api-key", opts: []option.RequestOption{option.WithHeader("X-Api-Key", "k1")}, model: "claude-test"},
		{desc: "WithAPIKey", opts: []option.RequestOption{option.WithAPIKey("k1")}, model: "claude-test"},
		{desc: "wrong x-api-key", opts: []option.RequestOption{option.WithHeader("X-Api-Key", "k2")}, model: "claude-test", status: 401, typ: "authentication_error"},
		{desc: "wrong WithAPIKey", opts: []option.RequestOption{option.WithAPIKey("k2")}, model: "claude-test", status: 401, typ: "authentication_error"},
		{desc: "no key", model: "claude-test", status: 401, typ: "authentication_error"},
		{desc: "unknown model", opts: []option.RequestOption{option.WithHeader("X-Api-Key", "k1")}, model: "other", status: 404, typ: "not_found_error"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			params := userSays("x")
			params.Model = tc.model
			client := anthropicClient(ms, tc.opts...)
			_, err := client.Messages.New(context.Background(), params)
			var apiErr *anthropic.Error
			switch {
			case tc.status == 0 && err != nil:
				t.Errorf("error %v", err)
			case tc.status != 0 && !errors.As(err, &apiErr):
				t.Errorf("error %v, want an *anthropic.Error", err)
			case tc.status != 0 && (apiErr.StatusCode != tc.status || string(apiErr.Type()) != tc.typ):
				t.Errorf("error %d %q, want %d %q", apiErr.StatusCode, apiErr.Type(), tc.status, tc.typ)
			}
		})
	}
	if got := ms.Requests()[0].Header.Get("X-Api-Key"); got != "k1" {
		t.Errorf("recorded x-api-key %q", got)
	}
	// The OpenAI route still wants its Bearer header, not x-api-key.
	res, _, err := post(t, context.Background(), ms, `{"model":"claude-test","messages":[]}`, map[string]string{"X-Api-Key": "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 401 {
		t.Errorf("OpenAI route with x-api-key: status %d", res.StatusCode)
	}
}

// TestAnthropicSharesTheScript checks both APIs take their steps from one
// script, in order of arrival, and are told apart in the record.
func TestAnthropicSharesTheScript(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("first"), testkit.Reply("second"))
	_, body, err := post(t, context.Background(), ms, `{"model":"gpt","messages":[{"role":"user","content":"a"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := decode[completion](t, body); *c.Choices[0].Message.Content != "first" {
		t.Errorf("OpenAI reply %s", body)
	}
	client := anthropicClient(ms, option.WithAPIKey("k"))
	msg, err := client.Messages.New(context.Background(), userSays("b"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != "second" || msg.ID != "msg_2" {
		t.Errorf("Anthropic reply %s", msg.RawJSON())
	}
	var got []string
	for _, r := range ms.WaitRequests(2) {
		got = append(got, r.API+" "+r.LastUser())
	}
	if diff := cmp.Diff([]string{"openai a", "anthropic b"}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// postMessages sends a raw Messages request, for the forms of the wire
// format the SDK does not send (string content, a string system prompt).
func postMessages(t *testing.T, ms *testkit.ModelServer, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ms.AnthropicURL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

func TestAnthropicRecordsRawForms(t *testing.T) {
	ms := testkit.NewModelServer(t)
	body := `{
		"model": "m", "max_tokens": 10, "system": "be brief",
		"messages": [
			{"role": "user", "content": "hello"},
			{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "hm", "signature": "s"},
				{"type": "text", "text": "let me "}, {"type": "text", "text": "see"},
				{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": 1}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]},
				{"type": "text", "text": "and "}, {"type": "text", "text": "then?"}
			]}
		]
	}`
	res, b := postMessages(t, ms, body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	want := []testkit.ModelMessage{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "hello"},
		{Role: "assistant", Content: "let me see", ToolCalls: []testkit.ModelToolCall{{ID: "t1", Name: "lookup", Arguments: `{"q":1}`}}},
		{Role: "tool", ToolCallID: "t1", Content: "42"},
		{Role: "user", Content: "and then?"},
	}
	r := ms.WaitRequests(1)[0]
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if string(r.Body) != body || r.LastUser() != "and then?" {
		t.Errorf("body or last user %q", r.LastUser())
	}

	for _, tc := range []struct{ desc, body string }{
		{desc: "no max_tokens", body: `{"model":"m","messages":[{"role":"user","content":"x"}]}`},
		{desc: "a system role", body: `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`},
		{desc: "no content", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`},
		{desc: "not JSON", body: `{"model":`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, b := postMessages(t, ms, tc.body)
			e := decode[struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}](t, b)
			if res.StatusCode != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
				t.Errorf("status %d: %s", res.StatusCode, b)
			}
		})
	}
}
