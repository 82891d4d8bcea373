package testkit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/testkit"
)

// post sends a raw Chat Completions request, so these tests check the
// wire format itself rather than what one client library makes of it.
func post(t *testing.T, ctx context.Context, ms *testkit.ModelServer, body string, header map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ms.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, b, err
}

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestModelServerEchoesByDefault(t *testing.T) {
	ms := testkit.NewModelServer(t)
	res, body, err := post(t, context.Background(), ms,
		`{"model":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	c := decode[completion](t, body)
	if c.Object != "chat.completion" || c.Model != "m1" || c.ID != "chatcmpl-1" || len(c.Choices) != 1 {
		t.Fatalf("completion %s", body)
	}
	if got := c.Choices[0]; got.Message.Role != "assistant" || *got.Message.Content != "echo: hello" || got.FinishReason != "stop" {
		t.Errorf("choice %+v", got)
	}
	if c.Usage.PromptTokens == 0 || c.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v", c.Usage)
	}
}

func TestModelServerScriptThenResponder(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("scripted"), testkit.CallTools(testkit.ToolCall("memory", `{"note":"x"}`)))
	ms.Respond(func(r testkit.RecordedRequest) testkit.Step {
		return testkit.Reply("for " + r.Conversation() + ": " + r.LastUser())
	})
	var got []string
	for i, conv := range []string{"a", "b", "c", "d"} {
		_, body, err := post(t, context.Background(), ms,
			`{"model":"m","messages":[{"role":"user","content":"q`+conv+`"}]}`,
			map[string]string{testkit.ModelConversationHeader: conv})
		if err != nil {
			t.Fatal(err)
		}
		c := decode[completion](t, body)
		msg := c.Choices[0].Message
		switch {
		case i == 1:
			if msg.Content != nil || len(msg.ToolCalls) != 1 || c.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("tool call reply %s", body)
			}
			tc := msg.ToolCalls[0]
			got = append(got, tc.ID+" "+tc.Type+" "+tc.Function.Name+" "+tc.Function.Arguments)
		default:
			got = append(got, *msg.Content)
		}
	}
	want := []string{"scripted", `call_2_0 function memory {"note":"x"}`, "for c: qc", "for d: qd"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if ms.Pending() != 0 || ms.Count() != 4 {
		t.Errorf("pending=%d count=%d", ms.Pending(), ms.Count())
	}
}

func TestModelServerRecordsRequests(t *testing.T) {
	ms := testkit.NewModelServer(t)
	body := `{
		"model": "m", "user": "u-1",
		"messages": [
			{"role": "user", "name": "ann", "content": [{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}]},
			{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}}]},
			{"role": "tool", "tool_call_id": "c1", "content": "42"}
		],
		"tools": [{"type": "function", "function": {"name": "lookup", "description": "find", "parameters": {"type": "object"}}}]
	}`
	if _, _, err := post(t, context.Background(), ms, body, map[string]string{"Authorization": "Bearer k"}); err != nil {
		t.Fatal(err)
	}
	r := ms.WaitRequests(1)[0]
	want := []testkit.ModelMessage{
		{Role: "user", Name: "ann", Content: "part one, part two"},
		{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":1}`}}},
		{Role: "tool", ToolCallID: "c1", Content: "42"},
	}
	if diff := cmp.Diff(want, r.Messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "lookup" || r.Tools[0].Description != "find" || string(r.Tools[0].Parameters) != `{"type": "object"}` {
		t.Errorf("tools %+v", r.Tools)
	}
	if r.Seq != 1 || r.Model != "m" || r.User != "u-1" || r.Header.Get("Authorization") != "Bearer k" || !bytes.Equal(r.Body, []byte(body)) {
		t.Errorf("recorded %+v", r)
	}
	if r.LastUser() != "part one, part two" || r.Conversation() != "u-1" {
		t.Errorf("LastUser %q, Conversation %q", r.LastUser(), r.Conversation())
	}
}

// readEvents returns the data of every SSE event in body.
func readEvents(t *testing.T, body []byte) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		events = append(events, data)
	}
	return events
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

func TestModelServerStreams(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(
		testkit.Reply("one two three"),
		testkit.CallTools(testkit.ToolCall("lookup", `{"word":"héraldique"}`), testkit.ToolCall("memory", `{}`)),
	)
	t.Run("content", func(t *testing.T) {
		res, body, err := post(t, context.Background(), ms,
			`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"count"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		events := readEvents(t, body)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("last event %q, want [DONE]", events[len(events)-1])
		}
		var content []string
		var finish string
		var usage bool
		for _, e := range events[:len(events)-1] {
			c := decode[chunk](t, []byte(e))
			if c.Object != "chat.completion.chunk" || c.ID != "chatcmpl-1" {
				t.Fatalf("chunk %s", e)
			}
			for _, ch := range c.Choices {
				if ch.Delta.Content != "" {
					content = append(content, ch.Delta.Content)
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
			usage = usage || (c.Usage != nil && c.Usage.PromptTokens > 0)
		}
		if diff := cmp.Diff([]string{"one ", "two ", "three"}, content); diff != "" {
			t.Errorf("content pieces (-want +got):\n%s", diff)
		}
		if finish != "stop" || !usage {
			t.Errorf("finish %q usage %v", finish, usage)
		}
	})
	t.Run("tool calls", func(t *testing.T) {
		_, body, err := post(t, context.Background(), ms, `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := readEvents(t, body)
		type call struct{ ID, Name, Args string }
		calls := map[int]*call{}
		var finish string
		for _, e := range events[:len(events)-1] {
			c := decode[chunk](t, []byte(e))
			if c.Usage != nil {
				t.Errorf("usage chunk sent without include_usage: %s", e)
			}
			for _, ch := range c.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					if calls[tc.Index] == nil {
						calls[tc.Index] = &call{}
					}
					calls[tc.Index].ID += tc.ID
					calls[tc.Index].Name += tc.Function.Name
					calls[tc.Index].Args += tc.Function.Arguments
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		want := map[int]*call{
			0: {ID: "call_2_0", Name: "lookup", Args: `{"word":"héraldique"}`},
			1: {ID: "call_2_1", Name: "memory", Args: `{}`},
		}
		if diff := cmp.Diff(want, calls); diff != "" {
			t.Errorf("tool calls (-want +got):\n%s", diff)
		}
		if finish != "tool_calls" {
			t.Errorf("finish %q", finish)
		}
	})
}

func TestModelServerErrors(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		step       testkit.Step
		status     int
		code       string
		retryAfter string
	}{
		{desc: "401", step: testkit.Fail(401, "bad key"), status: 401, code: "invalid_api_key"},
		{desc: "402", step: testkit.Fail(402, "pay"), status: 402, code: "insufficient_quota"},
		{desc: "404", step: testkit.Fail(404, "no model"), status: 404, code: "model_not_found"},
		{desc: "400", step: testkit.Fail(400, "bad"), status: 400},
		{desc: "429", step: testkit.RateLimited("3"), status: 429, code: "rate_limit_exceeded", retryAfter: "3"},
		{desc: "500", step: testkit.Fail(500, "boom"), status: 500},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.step)
			res, body, err := post(t, context.Background(), ms, `{"model":"m","messages":[]}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.status || res.Header.Get("Retry-After") != tc.retryAfter {
				t.Errorf("status %d retry-after %q", res.StatusCode, res.Header.Get("Retry-After"))
			}
			e := decode[struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}](t, body)
			if e.Error.Message != tc.step.Error || e.Error.Type == "" {
				t.Errorf("error body %s", body)
			}
			var code string
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if code != tc.code {
				t.Errorf("code %q, want %q", code, tc.code)
			}
		})
	}
	t.Run("bad JSON", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		res, _, err := post(t, context.Background(), ms, `{"model":`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 400 || ms.Count() != 1 {
			t.Errorf("status %d count %d", res.StatusCode, ms.Count())
		}
	})
	t.Run("unknown route", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		res, err := http.Get(ms.URL() + "/models")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 404 || ms.Count() != 0 {
			t.Errorf("status %d count %d", res.StatusCode, ms.Count())
		}
	})
	t.Run("API key and models", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.RequireAPIKey("k1")
		ms.Models("m")
		for _, tc := range []struct {
			auth, model string
			want        int
		}{
			{"Bearer k2", "m", 401},
			{"Bearer k1", "other", 404},
			{"Bearer k1", "m", 200},
		} {
			res, _, err := post(t, context.Background(), ms, `{"model":"`+tc.model+`","messages":[]}`, map[string]string{"Authorization": tc.auth})
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.want {
				t.Errorf("%s %s: status %d, want %d", tc.auth, tc.model, res.StatusCode, tc.want)
			}
		}
	})
	t.Run("dropped", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Dropped())
		if _, _, err := post(t, context.Background(), ms, `{"model":"m","messages":[]}`, nil); err == nil {
			t.Error("a dropped request got an answer")
		}
	})
}

func TestModelServerOverlapPerConversation(t *testing.T) {
	ms := testkit.NewModelServer(t)
	gate := testkit.NewGate()
	ms.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Hang(gate) })

	var wg sync.WaitGroup
	for _, conv := range []string{"a", "a", "a", "b"} {
		wg.Go(func() {
			if _, _, err := post(t, context.Background(), ms, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
				map[string]string{testkit.ModelConversationHeader: conv}); err != nil {
				t.Error(err)
			}
		})
	}
	ms.WaitRequests(4)
	testkit.Eventually(t, "4 requests at the gate", func() bool { return gate.Waiting() == 4 })
	if ms.InFlight("a") != 3 || ms.InFlight("b") != 1 {
		t.Errorf("in flight a=%d b=%d, want 3 and 1", ms.InFlight("a"), ms.InFlight("b"))
	}
	gate.Release()
	wg.Wait()
	if ms.InFlight("a") != 0 {
		t.Errorf("in flight a=%d after release", ms.InFlight("a"))
	}
	if diff := cmp.Diff(map[string]int{"a": 3, "b": 1}, ms.MaxOverlaps()); diff != "" {
		t.Errorf("max overlaps (-want +got):\n%s", diff)
	}

	// Sequential requests never overlap, whatever the key.
	ms2 := testkit.NewModelServer(t)
	ms2.KeyBy(func(r testkit.RecordedRequest) string { return r.LastUser() })
	for range 3 {
		if _, _, err := post(t, context.Background(), ms2, `{"model":"m","messages":[{"role":"user","content":"k"}]}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if ms2.MaxOverlap("k") != 1 {
		t.Errorf("MaxOverlap(k) = %d, want 1", ms2.MaxOverlap("k"))
	}
}

// A request its client gave up on does not overlap the next one, even when
// the next one arrives before the server noticed.
func TestModelServerOverlapEndsWithTheClient(t *testing.T) {
	ms := testkit.NewModelServer(t)
	gate := testkit.NewGate()
	t.Cleanup(gate.Release)
	ms.Script(testkit.Hang(gate), testkit.Reply("next"))
	body := `{"model":"m","user":"u","messages":[]}`
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t, ctx, ms, body, nil)
		errc <- err
	}()
	ms.WaitRequests(1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled request got an answer")
	}
	if _, _, err := post(t, context.Background(), ms, body, nil); err != nil {
		t.Fatal(err)
	}
	if o := ms.MaxOverlap("u"); o != 1 {
		t.Errorf("MaxOverlap = %d after a cancelled request, want 1", o)
	}
}

func TestModelServerDelayHonoursCancel(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("late").After(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t, ctx, ms, `{"model":"m","user":"u","messages":[]}`, nil)
		errc <- err
	}()
	ms.WaitRequests(1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled request got an answer")
	}
	// The handler stops waiting too, rather than holding the hour.
	testkit.Eventually(t, "the handler to stop waiting", func() bool { return ms.InFlight("u") == 0 })
}
