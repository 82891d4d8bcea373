package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// openaiClient is the official client on h's local API, as a user's
// tools would use it, for conversation conv.
func (h *gw) openaiClient(conv string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL("http://"+h.g.Addr()+"/v1"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
		option.WithHeader("X-Herald-Conversation", conv),
	)
}

// readStream reads a streamed completion to its end: the content of each
// chunk that had some, in order, the chunks accumulated, and how the
// stream ended.
func readStream(stream *ssestream.Stream[openai.ChatCompletionChunk]) (pieces []string, acc openai.ChatCompletionAccumulator, err error) {
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			pieces = append(pieces, ch.Choices[0].Delta.Content)
		}
	}
	return pieces, acc, stream.Err()
}

func userSays(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "herald", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
}

// The local API answers with the turn's token usage and why it finished,
// streamed or not.
func TestGatewayCompletionUsageAndFinish(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.MaxIterations = 1
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("u")
	ctx := context.Background()

	// The model server counts words: "hello there" and "echo: hello there".
	res, err := c.Chat.Completions.New(ctx, userSays("hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if u := res.Usage; u.PromptTokens == 0 || u.CompletionTokens != 3 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v, want the turn's", u)
	}
	if fr := res.Choices[0].FinishReason; fr != "stop" {
		t.Errorf("finish_reason = %q, want stop", fr)
	}

	stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "herald", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("count me")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	_, acc, err := readStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Usage.CompletionTokens != 3 || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed usage %+v, finish %q; want the turn's, stop", acc.Usage, acc.Choices[0].FinishReason)
	}

	// A turn that used its model calls (model.max_iterations 1, and the
	// model asks for a tool) was cut at a length.
	model.Script(testkit.Step{ToolCalls: []testkit.ModelToolCall{{Name: "clarify_nothing", Arguments: "{}"}}})
	res, err = c.Chat.Completions.New(ctx, userSays("use a tool"))
	if err != nil {
		t.Fatal(err)
	}
	if fr := res.Choices[0].FinishReason; fr != "length" {
		t.Errorf("finish_reason of a turn out of model calls = %q, want length", fr)
	}
}

// A turn that ended on a model failure answers with an error status and
// OpenAI's error shape, saying why; the timeline keeps the notice.
func TestGatewayCompletionModelFailures(t *testing.T) {
	tests := []struct {
		desc   string
		step   testkit.Step
		status int
		code   string
	}{
		{"the model's server is down", testkit.Fail(http.StatusBadGateway, "upstream down"), http.StatusServiceUnavailable, "unavailable"},
		{"the key is refused", testkit.Fail(http.StatusUnauthorized, "bad key"), http.StatusBadGateway, "auth"},
		{"the model is not known", testkit.Fail(http.StatusNotFound, "no such model"), http.StatusBadGateway, "model_not_found"},
		{"rate limited", testkit.Step{Status: http.StatusTooManyRequests, Error: "slow down", RetryAfter: "3600"}, http.StatusTooManyRequests, "rate_limited"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Model.MaxRetries = 0
			h := startGateway(t, cfg, Options{})
			model.Script(tt.step)
			c := h.openaiClient("f")
			_, err := c.Chat.Completions.New(context.Background(), userSays("hello"))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("completion = %v, want an API error", err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Code != tt.code || apiErr.Message == "" {
				t.Errorf("error = %d %q %q, want %d %q with the reason", apiErr.StatusCode, apiErr.Code, apiErr.Message, tt.status, tt.code)
			}
			items := h.waitItem("f", apiErr.Message)
			if len(items) != 1 {
				t.Errorf("timeline items with the reason = %+v, want one", items)
			}
		})
	}
	t.Run("no model configured", func(t *testing.T) {
		model := testkit.NewModelServer(t)
		cfg := testConfig(t, model)
		cfg.Model.Name = ""
		h := startGateway(t, cfg, Options{})
		c := h.openaiClient("n")
		_, err := c.Chat.Completions.New(context.Background(), userSays("hello"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "not_configured" {
			t.Errorf("completion with no model = %v, want 503 not_configured", err)
		}
		if !strings.Contains(h.logs.String(), "no model is configured") || !strings.Contains(h.logs.String(), "HERALD_MODEL") {
			t.Error("no warning at start that no model is configured, saying how to set one")
		}
	})
}

// GET /v1/models lists the model the turns run on, in OpenAI's shape.
func TestGatewayListsItsModel(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})
	c := h.openaiClient("")
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "test-model" || page.Data[0].Object != "model" {
		t.Errorf("models = %+v, want test-model", page.Data)
	}
	m, err := c.Models.Get(context.Background(), "test-model")
	if err != nil || m.ID != "test-model" {
		t.Errorf("Get(test-model) = %+v, %v", m, err)
	}
	var apiErr *openai.Error
	if _, err := c.Models.Get(context.Background(), "gpt-nothing"); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Get of an unknown model = %v, want 404", err)
	}
}

// A system message in the request is used for that turn, after herald's
// own system prompt, and is not kept in the history.
func TestGatewayUsesTheRequestsSystemMessage(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.SystemPrompt = "You are herald."
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("sys")
	ctx := context.Background()
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "herald", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Answer in French."), openai.UserMessage("hello"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat.Completions.New(ctx, userSays("again")); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	var systems [2][]string
	for i, r := range reqs {
		for _, m := range r.Messages {
			if m.Role == "system" {
				systems[i] = append(systems[i], m.Content)
			}
		}
	}
	if len(systems[0]) != 2 || systems[0][0] != "You are herald." || systems[0][1] != "Answer in French." {
		t.Errorf("system messages of the first turn = %q, want herald's, then the request's", systems[0])
	}
	if len(systems[1]) != 1 {
		t.Errorf("system messages of the next turn = %q, want herald's only", systems[1])
	}
}

// A conversation's token totals are kept in the store, shown by /status
// with their cost, and counted by model.
func TestGatewayKeepsTheConversationsUsage(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.Prices = map[string]config.Price{"test-model": {Input: 1000, Output: 2000}}
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("use")
	var prompt, completion int64
	for _, text := range []string{"one two", "three four five"} {
		res, err := c.Chat.Completions.New(context.Background(), userSays(text))
		if err != nil {
			t.Fatal(err)
		}
		prompt, completion = prompt+res.Usage.PromptTokens, completion+res.Usage.CompletionTokens
	}
	cost := (float64(prompt)*1000 + float64(completion)*2000) / 1e6
	want := fmt.Sprintf("Tokens: test-model %d in, %d out ($%.4f). Cost: $%.4f (model.prices)", prompt, completion, cost, cost)
	testkit.Eventually(t, "the totals committed", func() bool {
		meta, err := h.g.Store().Sessions().Meta(context.Background(), "api:use")
		return err == nil && sessions.UsageStatus(meta, cfg.Model.Price) == want
	})
	h.post("use", "/status")
	h.waitItem("use", want)
	if n := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_model_tokens_total", "model=test-model", "kind=completion"); n != float64(completion) {
		t.Errorf("completion tokens counted = %v, want %d", n, completion)
	}
}

// With the model on Anthropic's Messages API (model.api_mode, or a base
// URL ending in /anthropic), a turn runs the same: tools offered and
// called, the reply back to the chat.
func TestGatewayRunsOnAnthropicsAPI(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.BaseURL, cfg.Model.APIMode = model.AnthropicURL(), config.APIAnthropicMessages
	cfg.Model.APIKey = "sk-ant-test"
	model.RequireAPIKey("sk-ant-test")
	model.Script(
		testkit.Step{ToolCalls: []testkit.ModelToolCall{{Name: "memory", Arguments: `{"action":"add","text":"likes tea"}`}}},
		testkit.Reply("noted: tea"),
	)
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("ant")
	res, err := c.Chat.Completions.New(context.Background(), userSays("remember I like tea"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0].Message.Content; got != "noted: tea" || res.Usage.CompletionTokens == 0 {
		t.Errorf("reply = %q, usage %+v", got, res.Usage)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || reqs[0].API != testkit.APIAnthropic || len(reqs[0].Tools) == 0 {
		t.Fatalf("model requests = %d (api %q, %d tools), want 2 on Anthropic's API with the tools", len(reqs), reqs[0].API, len(reqs[0].Tools))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || last.ToolCallID == "" {
		t.Errorf("the tool's result went back as %+v", last)
	}
}

// A turn on Anthropic's Messages API that uses a tool streams too: the
// model is asked to stream both calls, the client gets the reply piece
// by piece, and the tool's result goes back to the model.
func TestGatewayStreamsAToolTurnOnAnthropicsAPI(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.BaseURL, cfg.Model.APIMode = model.AnthropicURL(), config.APIAnthropicMessages
	cfg.Model.APIKey = "sk-ant-test"
	model.RequireAPIKey("sk-ant-test")
	model.Script(
		testkit.Step{ToolCalls: []testkit.ModelToolCall{{Name: "memory", Arguments: `{"action":"add","text":"likes tea"}`}}},
		testkit.Step{Text: "noted: tea", Chunks: []string{"noted", ": tea"}},
	)
	h := startGateway(t, cfg, Options{})
	c := h.openaiClient("antstream")
	stream := c.Chat.Completions.NewStreaming(context.Background(), userSays("remember I like tea"))
	pieces, acc, err := readStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"noted", ": tea"}; !slices.Equal(pieces, want) {
		t.Errorf("content chunks = %q, want %q", pieces, want)
	}
	if got := acc.Choices[0].Message.Content; got != "noted: tea" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed reply = %q (%s)", got, acc.Choices[0].FinishReason)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	for i, req := range reqs {
		if req.API != testkit.APIAnthropic || !req.Stream || len(req.Tools) == 0 {
			t.Errorf("request %d: api %q, stream %v, %d tools; want a streamed Messages API call with the tools", i, req.API, req.Stream, len(req.Tools))
		}
	}
	if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Role != "tool" || last.ToolCallID == "" {
		t.Errorf("the tool's result went back as %+v", last)
	}
}

// A streamed completion gets the reply piece by piece as the model
// writes it, each piece its own chunk, and the same reply as unstreamed.
func TestGatewayStreamsTheReplyAsTheModelWritesIt(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})
	model.Script(testkit.Step{Text: "one two three", Chunks: []string{"one ", "two ", "three"}})
	c := h.openaiClient("str")
	stream := c.Chat.Completions.NewStreaming(context.Background(), userSays("count to three"))
	pieces, acc, err := readStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"one ", "two ", "three"}; !slices.Equal(pieces, want) {
		t.Errorf("content chunks = %q, want %q", pieces, want)
	}
	if got := acc.Choices[0].Message.Content; got != "one two three" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("streamed reply = %q (%s)", got, acc.Choices[0].FinishReason)
	}
	if req := model.Requests()[0]; !req.Stream {
		t.Error("the model was not asked to stream")
	}
}

// A secret the model writes across streamed pieces reaches the client
// masked whole: no chunk holds a part of it, and what streamed is the
// reply as kept.
func TestGatewayStreamMasksASecretWrittenAcrossPieces(t *testing.T) {
	const secret = "sk-live-model-key-1111"
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.APIKey = secret
	h := startGateway(t, cfg, Options{})
	// The reply ends with what could start the secret: held back, it is
	// handed on when the turn ends.
	model.Script(testkit.Step{Text: "the key is " + secret + ", not sk",
		Chunks: []string{"the key is sk-", "live-model-", "key-1111, not sk"}})
	c := h.openaiClient("leak")
	stream := c.Chat.Completions.NewStreaming(context.Background(), userSays("what is the key?"))
	pieces, acc, err := readStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pieces {
		if strings.Contains(p, "sk-") || strings.Contains(p, "live-model") || strings.Contains(p, "1111") || strings.HasPrefix(p, "\n") {
			t.Errorf("a chunk holds part of the secret: %q (all: %q)", p, pieces)
		}
	}
	const want = "the key is " + redact.Mask + ", not sk"
	if got := strings.Join(pieces, ""); got != want {
		t.Errorf("the chunks make %q, want %q", got, want)
	}
	if got := acc.Choices[0].Message.Content; got != want {
		t.Errorf("streamed reply = %q, want %q", got, want)
	}
	if items := h.waitItem("leak", want); len(items) != 1 {
		t.Errorf("the reply kept = %+v, want it masked", items)
	}
}

// The text of a model call that then calls a tool streams too, a blank
// line before the next call's.
func TestGatewayStreamsEachModelCallsText(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})
	model.Script(
		testkit.Step{Text: "Let me note that.", ToolCalls: []testkit.ModelToolCall{{Name: "memory", Arguments: `{"action":"add","text":"tea"}`}}},
		testkit.Reply("Noted."),
	)
	c := h.openaiClient("str2")
	stream := c.Chat.Completions.NewStreaming(context.Background(), userSays("remember tea"))
	_, acc, err := readStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "Let me note that.\n\nNoted." {
		t.Errorf("streamed = %q", got)
	}
	if items := h.waitItem("str2", "Noted."); len(items) != 1 || items[0].Text != "Noted." {
		t.Errorf("the reply kept = %+v, want the last call's text", items)
	}
}

// A stream the model's server cut after some pieces gives the client
// those pieces, then the failure as the stream's last event; the
// timeline keeps the turn's notice, once.
func TestGatewayStreamCutByAModelError(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.MaxRetries = 0
	h := startGateway(t, cfg, Options{})
	model.Script(testkit.Step{Text: "half an answer", Chunks: []string{"half ", "an answer"}, Drop: true})
	c := h.openaiClient("cutstream")
	stream := c.Chat.Completions.NewStreaming(context.Background(), userSays("tell me"))
	pieces, _, err := readStream(stream)
	if want := []string{"half ", "an answer"}; !slices.Equal(pieces, want) {
		t.Errorf("content chunks = %q, want %q before the failure", pieces, want)
	}
	if err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("stream's end = %v, want the model's failure with its reason", err)
	}
	if items := h.waitItem("cutstream", "model"); len(items) != 1 {
		t.Errorf("timeline items naming the model's failure = %+v, want one notice", items)
	}
}

// A reply the model cut at its output bound finishes at a length.
func TestGatewayCompletionCutByTheModel(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})
	model.Script(testkit.Step{Text: "and then", FinishReason: "length"})
	c := h.openaiClient("cut")
	res, err := c.Chat.Completions.New(context.Background(), userSays("tell me everything"))
	if err != nil {
		t.Fatal(err)
	}
	if fr := res.Choices[0].FinishReason; fr != "length" {
		t.Errorf("finish_reason = %q, want length", fr)
	}
}

// model.request_overrides reach every request of the main model.
func TestGatewaySendsTheModelsRequestOverrides(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.RequestOverrides = map[string]any{"temperature": 0.2, "reasoning_effort": "low"}
	h := startGateway(t, cfg, Options{})
	h.chat("ov", "hello")
	body := string(model.Requests()[0].Body)
	if !strings.Contains(body, `"temperature":0.2`) || !strings.Contains(body, `"reasoning_effort":"low"`) {
		t.Errorf("request body = %s, want the overrides", body)
	}
}

// retryingClient is the official client on h's local API with its
// default retries, for conversation conv.
func (h *gw) retryingClient(conv string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL("http://"+h.g.Addr()+"/v1"),
		option.WithAPIKey("unused"),
		option.WithHeader("X-Herald-Conversation", conv),
	)
}

// apiError is err as the client read the API's error answer.
func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("completion = %v, want an API error", err)
	}
	return apiErr
}

// With one key and no fallback, a refused key (401, 402) is answered as
// what it is, naming the setting that holds the key, with no retry by
// the client (x-should-retry: false); the key is not set aside, so the
// next request, once the provider takes the key again, is answered. A
// rate limit on it still cools it, and the answer says for how long.
func TestGatewayOnlyKeyIsTriedAgain(t *testing.T) {
	const key = "sk-only-model-key-0001"
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.APIKey = key
	cfg.Model.MaxRetries = 0
	h := startGateway(t, cfg, Options{})
	c := h.retryingClient("k")
	ctx := context.Background()

	model.RequireAPIKey("sk-another-key-0002")
	_, err := c.Chat.Completions.New(ctx, userSays("hello"))
	apiErr := apiError(t, err)
	if apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "auth" || !strings.Contains(apiErr.Message, "check HERALD_MODEL_API_KEY / model.api_key") ||
		apiErr.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("with the key refused: %d %s %q (x-should-retry %q), want 502 auth naming the key's setting, not to be retried",
			apiErr.StatusCode, apiErr.Code, apiErr.Message, apiErr.Response.Header.Get("X-Should-Retry"))
	}
	if n := model.Count(); n != 1 {
		t.Errorf("%d model calls, want 1: neither herald nor the client retries a refused key", n)
	}
	model.RequireAPIKey(key)
	if res, err := c.Chat.Completions.New(ctx, userSays("again")); err != nil || res.Choices[0].Message.Content != "echo: again" {
		t.Fatalf("once the provider takes the key: %v, want the reply", err)
	}

	model.Script(testkit.Fail(http.StatusPaymentRequired, "Payment required"))
	_, err = c.Chat.Completions.New(ctx, userSays("bill me"))
	if apiErr := apiError(t, err); apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "payment" || !strings.Contains(apiErr.Message, "billing") {
		t.Errorf("with billing refused: %d %s %q, want 502 payment saying billing", apiErr.StatusCode, apiErr.Code, apiErr.Message)
	}
	if _, err := c.Chat.Completions.New(ctx, userSays("paid")); err != nil {
		t.Fatalf("once paid: %v, want the reply", err)
	}

	// A rate limit cools the key for its Retry-After: the answer says so,
	// and the client, which waits that long, is told when.
	model.Script(testkit.RateLimited("30"))
	once := h.openaiClient("k")
	_, err = once.Chat.Completions.New(ctx, userSays("too fast"))
	apiErr = apiError(t, err)
	if ra := apiErr.Response.Header.Get("Retry-After"); apiErr.StatusCode != http.StatusTooManyRequests || (ra != "30" && ra != "29") ||
		apiErr.Response.Header.Get("X-Should-Retry") != "" {
		t.Errorf("rate limited: %d, Retry-After %q, x-should-retry %q; want 429 after 30s, retryable", apiErr.StatusCode, ra, apiErr.Response.Header.Get("X-Should-Retry"))
	}
}

// The official client retries a 5xx twice by default, each retry the same
// request again: after a turn that failed on the model, the retry goes
// on with that turn, so once the client gives up the conversation's
// history holds the message once, and so does what the model reads on
// each try and on a later turn that is answered. On either store.
func TestGatewayClientRetriesKeepTheMessageOnce(t *testing.T) {
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Model.MaxRetries = 0
			if backend == config.BackendRedis {
				cfg.Store.Backend, cfg.Store.RedisURL = backend, testkit.StartRedis(t).URL()
			}
			h := startGateway(t, cfg, Options{})
			down := testkit.Fail(http.StatusBadGateway, "upstream down")
			model.Script(down, down, down)
			c := h.retryingClient("r")
			ctx := context.Background()

			_, err := c.Chat.Completions.New(ctx, userSays("hello"))
			if apiErr := apiError(t, err); apiErr.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("completion = %d, want 503 after the client's retries", apiErr.StatusCode)
			}
			if n := model.Count(); n != 3 {
				t.Fatalf("%d model calls, want 3: the request and the client's two retries", n)
			}
			history, err := h.g.Store().Sessions().History(ctx, "api:r")
			if err != nil {
				t.Fatal(err)
			}
			if len(history) != 1 || history[0].Role != "user" || history[0].Content != "hello" {
				t.Errorf("history after the retries = %+v, want the message once and nothing else", history)
			}

			for _, text := range []string{"hello", "and now?"} {
				res, err := c.Chat.Completions.New(ctx, userSays(text))
				if err != nil || res.Choices[0].Message.Content != "echo: "+text {
					t.Fatalf("%q once the model is back: %v", text, err)
				}
			}
			for _, req := range model.Requests() {
				if n := countSeen(req.Messages, "hello"); n != 1 {
					t.Errorf("model call %d read the message %d times, want once", req.Seq, n)
				}
			}
			history, err = h.g.Store().Sessions().History(ctx, "api:r")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range history {
				got = append(got, m.Role+": "+m.Content)
			}
			want := []string{"user: hello", "assistant: echo: hello", "user: and now?", "assistant: echo: and now?"}
			if !slices.Equal(got, want) {
				t.Errorf("history = %q, want %q", got, want)
			}
		})
	}
}

// countSeen is how many of msgs, as the model read them, are user
// messages saying text.
func countSeen(msgs []testkit.ModelMessage, text string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == "user" && m.Content == text {
			n++
		}
	}
	return n
}
