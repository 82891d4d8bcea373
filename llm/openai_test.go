package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
)

// testKey looks like a real key so that a leak of it is easy to spot.
const testKey = "sk-herald-test-S3CRET-0123456789abcdef"

// sleeper records the waits between attempts instead of waiting.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newClient returns a client for ms with a deterministic backoff
// (attempt × 1s) and recorded sleeps; edit adjusts the options.
func newClient(t *testing.T, ms *testkit.ModelServer, edit func(*llm.OpenAIOptions)) (*llm.OpenAI, *sleeper) {
	t.Helper()
	s := &sleeper{}
	opts := llm.OpenAIOptions{
		BaseURL: ms.URL(),
		APIKey:  testKey,
		Model:   "test-model",
		Timeout: 10 * time.Second,
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * time.Second },
		Sleep:   s.Sleep,
	}
	if edit != nil {
		edit(&opts)
	}
	c, err := llm.NewOpenAI(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func ask(text string) llm.Request {
	return llm.Request{Messages: []chat.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: text},
	}}
}

func TestPlainReply(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("hello there"))
	c, _ := newClient(t, ms, nil)

	resp, err := c.Complete(context.Background(), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chat.Message{Role: "assistant", Content: "hello there"}, resp.Message); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if resp.FinishReason != "stop" {
		t.Errorf("finish reason %q, want stop", resp.FinishReason)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Errorf("usage %+v, want both counts set", resp.Usage)
	}

	reqs := ms.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Model != "test-model" || got.Stream || len(got.Tools) != 0 {
		t.Errorf("request model=%q stream=%v tools=%d", got.Model, got.Stream, len(got.Tools))
	}
	want := []testkit.ModelMessage{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "hi"}}
	if diff := cmp.Diff(want, got.Messages); diff != "" {
		t.Errorf("messages the model saw (-want +got):\n%s", diff)
	}
	if auth := got.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization header %q, want the bearer key", auth)
	}
}

func TestModelOverrideAndUser(t *testing.T) {
	ms := testkit.NewModelServer(t)
	c, _ := newClient(t, ms, nil)
	req := ask("ping")
	req.Model, req.User = "other-model", "conv-7"
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "echo: ping" {
		t.Errorf("content %q, want the default echo", resp.Message.Content)
	}
	got := ms.Requests()[0]
	if got.Model != "other-model" || got.User != "conv-7" {
		t.Errorf("model=%q user=%q, want other-model and conv-7", got.Model, got.User)
	}
	if ms.MaxOverlap("conv-7") != 1 {
		t.Errorf("MaxOverlap(conv-7) = %d, want 1", ms.MaxOverlap("conv-7"))
	}
}

var lookupTool = llm.ToolSpec{
	Name:        "lookup",
	Description: "Look a word up in the dictionary.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`),
}

func TestToolCallRoundTrip(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streamed), func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(
				testkit.CallTools(testkit.ToolCall("lookup", `{"word":"herald"}`)),
				testkit.Reply("A herald is a messenger."),
			)
			c, _ := newClient(t, ms, nil)

			req := ask("what is a herald?")
			req.Tools = []llm.ToolSpec{lookupTool}
			var deltas []string
			if streamed {
				req.Stream = func(d string) { deltas = append(deltas, d) }
			}
			resp, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("finish=%q calls=%+v, want one tool call", resp.FinishReason, resp.Message.ToolCalls)
			}
			call := resp.Message.ToolCalls[0]
			if call.ID == "" || call.Name != "lookup" || call.Arguments != `{"word":"herald"}` {
				t.Fatalf("tool call %+v", call)
			}
			if len(deltas) != 0 {
				t.Errorf("deltas %q for a reply without content", deltas)
			}

			req.Messages = append(req.Messages, resp.Message, chat.Message{
				Role: "tool", ToolCallID: call.ID, Name: "lookup", Content: `{"meaning":"messenger"}`,
			})
			resp, err = c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "A herald is a messenger." {
				t.Errorf("final content %q", resp.Message.Content)
			}

			reqs := ms.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			wantTools := []testkit.ModelTool{{Name: "lookup", Description: lookupTool.Description, Parameters: lookupTool.Parameters}}
			if diff := cmp.Diff(wantTools, reqs[0].Tools, cmp.Comparer(jsonEqual)); diff != "" {
				t.Errorf("tools the model saw (-want +got):\n%s", diff)
			}
			want := []testkit.ModelMessage{
				{Role: "system", Content: "You are terse."},
				{Role: "user", Content: "what is a herald?"},
				{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: call.ID, Name: "lookup", Arguments: `{"word":"herald"}`}}},
				{Role: "tool", ToolCallID: call.ID, Content: `{"meaning":"messenger"}`},
			}
			if diff := cmp.Diff(want, reqs[1].Messages); diff != "" {
				t.Errorf("second request's messages (-want +got):\n%s", diff)
			}
		})
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(x, y)
}

func TestStreamingDeltas(t *testing.T) {
	ms := testkit.NewModelServer(t)
	pieces := []string{"Hel", "lo, ", "brave ", "new ", "world."}
	ms.Script(testkit.Step{Text: strings.Join(pieces, ""), Chunks: pieces})
	c, _ := newClient(t, ms, nil)

	req := ask("greet")
	var deltas []string
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pieces, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if resp.Message.Content != "Hello, brave new world." || resp.FinishReason != "stop" {
		t.Errorf("content=%q finish=%q", resp.Message.Content, resp.FinishReason)
	}
	if resp.Usage.PromptTokens == 0 {
		t.Errorf("usage %+v: the usage chunk was not read", resp.Usage)
	}
	if !ms.Requests()[0].Stream {
		t.Error("the request was not a streaming one")
	}
}

// A streamed answer that keeps arriving outlives the timeout: the timeout
// bounds the wait for each chunk, not the whole answer.
func TestStreamingTimeoutIsPerChunk(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Step{Text: "a b c d e f", ChunkDelay: 60 * time.Millisecond})
	c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) { o.Timeout = 250 * time.Millisecond })
	req := ask("slowly")
	n := 0
	req.Stream = func(string) { n++ }
	start := time.Now()
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("the stream took %s; the test needs it to outlast the timeout", el)
	}
	if resp.Message.Content != "a b c d e f" || n != 6 {
		t.Errorf("content=%q deltas=%d", resp.Message.Content, n)
	}
}

func TestRetriesServerErrorsThenSucceeds(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Fail(500, "boom"), testkit.Fail(503, "overloaded"), testkit.Dropped(), testkit.Reply("ok"))
	c, s := newClient(t, ms, nil)

	resp, err := c.Complete(context.Background(), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "ok" {
		t.Errorf("content %q", resp.Message.Content)
	}
	if n := ms.Count(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, s.Waits()); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Fail(500, "boom"), testkit.Fail(500, "boom"), testkit.Fail(502, "bad gateway"), testkit.Reply("never"))
	c, s := newClient(t, ms, func(o *llm.OpenAIOptions) { o.MaxRetries = 2 })

	_, err := c.Complete(context.Background(), ask("hi"))
	if llm.ClassOf(err) != llm.ClassUnavailable || !errs.Is(err, errs.Unavailable) {
		t.Fatalf("err %v: class %q code %q, want unavailable", err, llm.ClassOf(err), errs.CodeOf(err))
	}
	if n := ms.Count(); n != 3 {
		t.Errorf("%d requests, want 3 (one and two retries)", n)
	}
	if len(s.Waits()) != 2 {
		t.Errorf("waits %v, want 2", s.Waits())
	}
	if !strings.Contains(err.Error(), "after 3 attempts") || !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("error %q should name the attempts and the last status", err)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(ms.URL(), "/v1"), "http://")
	if um := llm.UserMessage(err); !strings.Contains(um, host) || !strings.Contains(um, "unavailable") {
		t.Errorf("user message %q should name the server %s", um, host)
	}
}

func TestDefaultMaxRetriesAndNone(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		maxRetries int
		want       int
	}{
		{desc: "default", maxRetries: 0, want: 1 + llm.DefaultMaxRetries},
		{desc: "none", maxRetries: -1, want: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Fail(500, "down") })
			c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) { o.MaxRetries = tc.maxRetries })
			if _, err := c.Complete(context.Background(), ask("hi")); llm.ClassOf(err) != llm.ClassUnavailable {
				t.Fatalf("err %v", err)
			}
			if n := ms.Count(); n != tc.want {
				t.Errorf("%d requests, want %d", n, tc.want)
			}
		})
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		desc  string
		first testkit.Step
		want  time.Duration
	}{
		{desc: "seconds", first: testkit.RateLimited("7"), want: 7 * time.Second},
		{desc: "fractional seconds", first: testkit.RateLimited("1.5"), want: 1500 * time.Millisecond},
		{desc: "http date", first: testkit.RateLimited(now.Add(30 * time.Second).Format(http.TimeFormat)), want: 30 * time.Second},
		{desc: "absent: backoff", first: testkit.RateLimited(""), want: time.Second},
		{desc: "on a 503", first: testkit.Step{Status: 503, RetryAfter: "4"}, want: 4 * time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.first, testkit.Reply("ok"))
			c, s := newClient(t, ms, func(o *llm.OpenAIOptions) { o.Clock = clock.NewFake(now) })
			resp, err := c.Complete(context.Background(), ask("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "ok" || ms.Count() != 2 {
				t.Errorf("content=%q requests=%d", resp.Message.Content, ms.Count())
			}
			if diff := cmp.Diff([]time.Duration{tc.want}, s.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRateLimitBounded(t *testing.T) {
	t.Run("wait longer than MaxRetryWait", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.RateLimited("3600"), testkit.Reply("never"))
		c, s := newClient(t, ms, nil)
		_, err := c.Complete(context.Background(), ask("hi"))
		if llm.ClassOf(err) != llm.ClassRateLimited || !errs.Is(err, errs.Unavailable) {
			t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
		}
		if ms.Count() != 1 || len(s.Waits()) != 0 {
			t.Errorf("requests=%d waits=%v, want one request and no wait", ms.Count(), s.Waits())
		}
		if um := llm.UserMessage(err); !strings.Contains(um, "try again in 1h0m0s") {
			t.Errorf("user message %q should say when to try again", um)
		}
	})
	t.Run("still limited after the retries", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.RateLimited("2") })
		c, s := newClient(t, ms, func(o *llm.OpenAIOptions) { o.MaxRetries = 1 })
		_, err := c.Complete(context.Background(), ask("hi"))
		if llm.ClassOf(err) != llm.ClassRateLimited {
			t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
		}
		if ms.Count() != 2 || len(s.Waits()) != 1 {
			t.Errorf("requests=%d waits=%v", ms.Count(), s.Waits())
		}
	})
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		step      testkit.Step
		class     llm.Class
		code      errs.Code
		userWants string
	}{
		{
			desc:      "401",
			step:      testkit.Fail(401, "Incorrect API key provided: sk-herald-te***********cdef."),
			class:     llm.ClassAuth,
			code:      errs.Invalid,
			userWants: "the model API key was rejected (check HERALD_MODEL_API_KEY / model.api_key)",
		},
		{
			desc:      "403 refusing the key",
			step:      testkit.Fail(403, "Forbidden"),
			class:     llm.ClassAuth,
			code:      errs.Invalid,
			userWants: "the model provider refused the API key (HTTP 403",
		},
		{
			desc:      "403 denying the model",
			step:      testkit.Fail(403, "You are not allowed to sample from this model"),
			class:     llm.ClassModelNotFound,
			code:      errs.NotFound,
			userWants: "the model provider denied access to model test-model: You are not allowed to sample from this model",
		},
		{
			desc:      "402",
			step:      testkit.Fail(402, "Payment required"),
			class:     llm.ClassPayment,
			code:      errs.Invalid,
			userWants: "billing",
		},
		{
			desc:      "429 quota spent",
			step:      testkit.Step{Status: 429, Error: "You exceeded your current quota.", ErrorCode: "insufficient_quota"},
			class:     llm.ClassPayment,
			code:      errs.Invalid,
			userWants: "billing",
		},
		{
			desc:      "404",
			step:      testkit.Fail(404, "The model `test-model` does not exist or you do not have access to it."),
			class:     llm.ClassModelNotFound,
			code:      errs.NotFound,
			userWants: "model not found: test-model (check HERALD_MODEL / model.name)",
		},
		{
			desc:      "404 from a wrong base URL",
			step:      testkit.Step{Status: 404, RawError: "404 page not found"},
			class:     llm.ClassModelNotFound,
			code:      errs.NotFound,
			userWants: "HERALD_MODEL_BASE_URL",
		},
		{
			desc:      "400",
			step:      testkit.Fail(400, "messages[1].role: unknown role"),
			class:     llm.ClassBadRequest,
			code:      errs.Invalid,
			userWants: "the model server rejected the request: messages[1].role: unknown role",
		},
		{
			desc:      "400 saying the context is too long",
			step:      testkit.Fail(400, "This model's maximum context length is 8192 tokens."),
			class:     llm.ClassContextOverflow,
			code:      errs.Invalid,
			userWants: "/new starts a fresh session",
		},
		{
			desc:      "413",
			step:      testkit.Fail(413, "request too large"),
			class:     llm.ClassContextOverflow,
			code:      errs.Invalid,
			userWants: "longer than the model takes",
		},
		{
			desc:      "422",
			step:      testkit.Fail(422, "tools[0]: invalid schema"),
			class:     llm.ClassBadRequest,
			code:      errs.Invalid,
			userWants: "tools[0]: invalid schema",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.step, testkit.Reply("never"))
			c, s := newClient(t, ms, nil)
			_, err := c.Complete(context.Background(), ask("hi"))
			if err == nil {
				t.Fatal("no error")
			}
			if got := llm.ClassOf(err); got != tc.class {
				t.Errorf("class %q, want %q (err %v)", got, tc.class, err)
			}
			if got := errs.CodeOf(err); got != tc.code {
				t.Errorf("code %q, want %q", got, tc.code)
			}
			if um := llm.UserMessage(err); !strings.Contains(um, tc.userWants) || strings.Contains(um, "\n") {
				t.Errorf("user message %q, want one line containing %q", um, tc.userWants)
			}
			if ms.Count() != 1 || len(s.Waits()) != 0 {
				t.Errorf("requests=%d waits=%v: a %s must not be retried", ms.Count(), s.Waits(), tc.desc)
			}
		})
	}
}

// The server's own model check answers the way OpenAI does; the user
// message names the model as configured.
func TestUnknownModel(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Models("real-model")
	c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) { o.Model = "fake-model" })
	_, err := c.Complete(context.Background(), ask("hi"))
	if um := llm.UserMessage(err); !strings.HasPrefix(um, "model not found: fake-model") {
		t.Errorf("user message %q", um)
	}
}

func TestWrongKeyRejected(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.RequireAPIKey("sk-the-right-one-000000")
	c, _ := newClient(t, ms, nil)
	_, err := c.Complete(context.Background(), ask("hi"))
	if llm.ClassOf(err) != llm.ClassAuth {
		t.Fatalf("err %v, want auth", err)
	}
}

func TestTimeout(t *testing.T) {
	t.Run("every attempt", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Reply("late").After(10 * time.Second) })
		c, s := newClient(t, ms, func(o *llm.OpenAIOptions) {
			o.Timeout = 100 * time.Millisecond
			o.MaxRetries = 1
		})
		start := time.Now()
		_, err := c.Complete(context.Background(), ask("hi"))
		if llm.ClassOf(err) != llm.ClassTimeout || !errs.Is(err, errs.Unavailable) {
			t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("took %s; the timeout did not cut the attempts", el)
		}
		if ms.Count() != 2 || len(s.Waits()) != 1 {
			t.Errorf("requests=%d waits=%v, want 2 and 1", ms.Count(), s.Waits())
		}
		if um := llm.UserMessage(err); um != "the model did not answer within 100ms; try again" {
			t.Errorf("user message %q", um)
		}
	})
	t.Run("then an answer", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Reply("late").After(10*time.Second), testkit.Reply("on time"))
		c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) { o.Timeout = 100 * time.Millisecond })
		resp, err := c.Complete(context.Background(), ask("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.Content != "on time" {
			t.Errorf("content %q", resp.Message.Content)
		}
	})
}

func TestCancel(t *testing.T) {
	t.Run("while the model thinks", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		gate := testkit.NewGate()
		ms.Script(testkit.Hang(gate))
		c, s := newClient(t, ms, nil)

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.Complete(ctx, ask("hi"))
			done <- err
		}()
		ms.WaitRequests(1)
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Complete did not return after cancel")
		}
		if llm.ClassOf(err) != llm.ClassCanceled || !errors.Is(err, context.Canceled) || !errs.Is(err, errs.Closed) {
			t.Fatalf("err %v: class %q code %q", err, llm.ClassOf(err), errs.CodeOf(err))
		}
		if ms.Count() != 1 || len(s.Waits()) != 0 {
			t.Errorf("requests=%d waits=%v: a cancelled call must not retry", ms.Count(), s.Waits())
		}
		testkit.Eventually(t, "the request to end", func() bool { return gate.Waiting() == 0 && ms.InFlight("") == 0 })
	})
	t.Run("during the backoff", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Script(testkit.Fail(500, "down"), testkit.Reply("never"))
		ctx, cancel := context.WithCancel(context.Background())
		c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) {
			o.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
		})
		_, err := c.Complete(ctx, ask("hi"))
		if llm.ClassOf(err) != llm.ClassCanceled || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
		if ms.Count() != 1 {
			t.Errorf("%d requests, want 1", ms.Count())
		}
	})
	t.Run("the default sleep honours the context", func(t *testing.T) {
		ms := testkit.NewModelServer(t)
		ms.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Fail(500, "down") })
		c, err := llm.NewOpenAI(llm.OpenAIOptions{
			BaseURL: ms.URL(), Model: "m",
			Backoff: func(int) time.Duration { return time.Hour },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = c.Complete(ctx, ask("hi"))
		if llm.ClassOf(err) != llm.ClassCanceled || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestStreamCutAfterContentIsNotRetried(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Step{Text: "partial answer", Drop: true}, testkit.Reply("never"))
	c, s := newClient(t, ms, nil)
	req := ask("hi")
	var got strings.Builder
	req.Stream = func(d string) { got.WriteString(d) }
	_, err := c.Complete(context.Background(), req)
	if llm.ClassOf(err) != llm.ClassUnavailable {
		t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
	}
	if got.String() != "partial answer" {
		t.Errorf("deltas %q", got.String())
	}
	if ms.Count() != 1 || len(s.Waits()) != 0 || ms.Pending() != 1 {
		t.Errorf("requests=%d waits=%v: content already went out, so no retry", ms.Count(), s.Waits())
	}
}

func TestStreamFailureBeforeContentIsRetried(t *testing.T) {
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Fail(500, "down"), testkit.Reply("fine"))
	c, _ := newClient(t, ms, nil)
	req := ask("hi")
	var deltas []string
	req.Stream = func(d string) { deltas = append(deltas, d) }
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "fine" || strings.Join(deltas, "") != "fine" || ms.Count() != 2 {
		t.Errorf("content=%q deltas=%q requests=%d", resp.Message.Content, deltas, ms.Count())
	}
}

func TestConnectionRefused(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/v1"
	dead.Close()
	s := &sleeper{}
	c, err := llm.NewOpenAI(llm.OpenAIOptions{
		BaseURL: url, APIKey: testKey, Model: "m", MaxRetries: 2,
		Backoff: func(int) time.Duration { return time.Millisecond }, Sleep: s.Sleep,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), ask("hi"))
	if llm.ClassOf(err) != llm.ClassUnavailable || len(s.Waits()) != 2 {
		t.Fatalf("err %v, waits %v", err, s.Waits())
	}
}

func TestNotConfigured(t *testing.T) {
	ms := testkit.NewModelServer(t)
	for _, tc := range []struct {
		desc string
		opts llm.OpenAIOptions
	}{
		{desc: "no model", opts: llm.OpenAIOptions{BaseURL: ms.URL(), APIKey: testKey}},
		{desc: "no base URL", opts: llm.OpenAIOptions{Model: "m", APIKey: testKey}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := llm.NewOpenAI(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Complete(context.Background(), ask("hi"))
			if llm.ClassOf(err) != llm.ClassNotConfigured || !errs.Is(err, errs.Invalid) {
				t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
			}
			um := llm.UserMessage(err)
			for _, want := range []string{"HERALD_MODEL ", "model.name", "HERALD_MODEL_BASE_URL"} {
				if !strings.Contains(um, want) {
					t.Errorf("user message %q does not mention %q", um, want)
				}
			}
		})
	}
	if ms.Count() != 0 {
		t.Errorf("%d requests sent without a model", ms.Count())
	}
}

func TestBadBaseURL(t *testing.T) {
	_, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: "ftp://user:" + testKey + "@example.com/v1", Model: "m"})
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("err %v, want invalid", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q holds the key", err)
	}
}

func TestRequestsThatCannotBeBuilt(t *testing.T) {
	for _, tc := range []struct {
		desc string
		req  llm.Request
	}{
		{desc: "unknown role", req: llm.Request{Messages: []chat.Message{{Role: "robot", Content: "x"}}}},
		{desc: "tool result without call id", req: llm.Request{Messages: []chat.Message{{Role: "tool", Content: "x"}}}},
		{desc: "schema not JSON", req: llm.Request{
			Messages: []chat.Message{{Role: "user", Content: "x"}},
			Tools:    []llm.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{not json`)}},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			c, _ := newClient(t, ms, nil)
			_, err := c.Complete(context.Background(), tc.req)
			if llm.ClassOf(err) != llm.ClassBadRequest || !errs.Is(err, errs.Invalid) {
				t.Fatalf("err %v: class %q", err, llm.ClassOf(err))
			}
			if ms.Count() != 0 {
				t.Errorf("%d requests sent for a request that cannot be built", ms.Count())
			}
		})
	}
}

// The key must not reach any error text, user message or log line, even
// when the server quotes it back.
func TestAPIKeyNeverInErrors(t *testing.T) {
	echoKey := "invalid header: Authorization: Bearer " + testKey
	for _, tc := range []struct {
		desc  string
		steps []testkit.Step
		edit  func(*llm.OpenAIOptions)
		req   func() (llm.Request, context.Context)
	}{
		{desc: "401 quoting the key", steps: []testkit.Step{testkit.Fail(401, "Incorrect API key provided: "+testKey)}},
		{desc: "400 quoting the key", steps: []testkit.Step{testkit.Fail(400, echoKey)}},
		{desc: "404 quoting the key", steps: []testkit.Step{testkit.Fail(404, echoKey)}},
		{desc: "500 quoting the key", steps: []testkit.Step{testkit.Fail(500, echoKey), testkit.Fail(500, echoKey)}},
		{desc: "429 quoting the key", steps: []testkit.Step{{Status: 429, Error: echoKey, RetryAfter: "99999"}}},
		{desc: "plain-text error body", steps: []testkit.Step{{Status: 400, RawError: echoKey}}},
		{desc: "dropped", steps: []testkit.Step{testkit.Dropped(), testkit.Dropped()}},
		{desc: "timeout", steps: []testkit.Step{testkit.Reply("x").After(time.Minute), testkit.Reply("x").After(time.Minute)},
			edit: func(o *llm.OpenAIOptions) { o.Timeout = 50 * time.Millisecond }},
		{desc: "canceled", req: func() (llm.Request, context.Context) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ask("hi"), ctx
		}},
		{desc: "not configured", edit: func(o *llm.OpenAIOptions) { o.Model = "" }},
		{desc: "bad schema", req: func() (llm.Request, context.Context) {
			r := ask("hi")
			r.Tools = []llm.ToolSpec{{Name: "t", Parameters: json.RawMessage(testKey)}}
			return r, context.Background()
		}},
		{desc: "stream cut", steps: []testkit.Step{{Text: "some text", Drop: true}}, req: func() (llm.Request, context.Context) {
			r := ask("hi")
			r.Stream = func(string) {}
			return r, context.Background()
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ms := testkit.NewModelServer(t)
			ms.Script(tc.steps...)
			c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) {
				o.MaxRetries = 1
				if tc.edit != nil {
					tc.edit(o)
				}
			})
			req, ctx := ask("hi"), context.Background()
			if tc.req != nil {
				req, ctx = tc.req()
			}
			_, err := c.Complete(ctx, req)
			if err == nil {
				t.Fatal("no error")
			}
			var logs bytes.Buffer
			slog.New(slog.NewJSONHandler(&logs, nil)).Error("model call failed", "err", err)
			for what, text := range map[string]string{
				"Error()":     err.Error(),
				"%+v":         fmt.Sprintf("%+v", err),
				"%#v":         fmt.Sprintf("%#v", err),
				"UserMessage": llm.UserMessage(err),
				"slog":        logs.String(),
			} {
				if strings.Contains(text, testKey) || strings.Contains(text, "S3CRET") {
					t.Errorf("%s holds the API key: %s", what, text)
				}
			}
			if um := llm.UserMessage(err); um == "" || strings.Contains(um, "\n") {
				t.Errorf("user message %q, want one line", um)
			}
		})
	}
}

func TestDefaultBackoff(t *testing.T) {
	for attempt := 1; attempt <= 10; attempt++ {
		limit := min(500*time.Millisecond<<(attempt-1), 8*time.Second)
		for range 50 {
			d := llm.DefaultBackoff(attempt)
			if d < limit/2 || d > limit {
				t.Fatalf("DefaultBackoff(%d) = %s, want within [%s, %s]", attempt, d, limit/2, limit)
			}
		}
	}
}

func TestUserMessageOfOtherErrors(t *testing.T) {
	if um := llm.UserMessage(nil); um != "" {
		t.Errorf("UserMessage(nil) = %q", um)
	}
	if um := llm.UserMessage(errors.New("disk on fire")); um == "" || strings.Contains(um, "disk") {
		t.Errorf("UserMessage of a foreign error = %q; want a generic line", um)
	}
	if c := llm.ClassOf(errors.New("x")); c != "" {
		t.Errorf("ClassOf a foreign error = %q", c)
	}
}

func TestRequestOverridesAreInEveryBody(t *testing.T) {
	ms := testkit.NewModelServer(t)
	c, _ := newClient(t, ms, func(o *llm.OpenAIOptions) {
		o.RequestOverrides = map[string]any{"temperature": 0.2, "reasoning_effort": "low"}
	})
	for range 2 {
		if _, err := c.Complete(context.Background(), ask("ping")); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range ms.Requests() {
		var body map[string]any
		if err := json.Unmarshal(req.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body["temperature"] != 0.2 || body["reasoning_effort"] != "low" || body["model"] != "test-model" {
			t.Errorf("body %s: want the overrides beside herald's own fields", req.Body)
		}
	}
}
