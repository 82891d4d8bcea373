package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// A model with several keys rotates off one the provider refuses; with
// every key cooling the API answers 429 saying until when; with a
// fallback configured, the fallback answers instead and /status says so.
func TestGatewayModelKeysAndFallback(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if r.APIKey() == "sk-first-key-0001" {
			return testkit.Fail(http.StatusPaymentRequired, "Payment required")
		}
		if strings.Contains(r.LastUser(), "limit") {
			return testkit.Step{Status: http.StatusTooManyRequests, Error: "usage limit reached", ResetsIn: 7200}
		}
		return testkit.Reply("from " + keyLabel(r.APIKey()))
	})
	cfg := testConfig(t, model)
	cfg.Model.Credentials = []config.Credential{{Key: "sk-first-key-0001"}, {Key: "sk-second-key-0002"}}
	h := startGateway(t, cfg, Options{})
	if got := h.chat("k", "hello"); got != "from second" {
		t.Errorf("reply %q, want the second key's", got)
	}
	code, msg := h.chatFailure("k", "over the limit")
	if code != http.StatusTooManyRequests || !strings.Contains(msg, "all 2 keys cooling until") {
		t.Errorf("with every key cooling: %d %q, want 429 saying until when", code, msg)
	}
	if strings.Contains(h.logs.String(), "sk-first-key-0001") {
		t.Error("a key reached the logs")
	}
	// Two keys cooled, one request moved to another key: the exhausted
	// pool moved none.
	pool := "pool=" + llm.PoolName(model.URL())
	for _, c := range []struct {
		name, reason string
		want         float64
	}{
		{"herald_model_key_cooldowns_total", "payment", 1},
		{"herald_model_key_cooldowns_total", "rate_limited", 1},
		{"herald_model_key_rotations_total", "payment", 1},
		{"herald_model_key_rotations_total", "rate_limited", 0},
	} {
		if got := testkit.MetricValue(t, h.g.metrics.Registry(), c.name, pool, "reason="+c.reason); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.reason, got, c.want)
		}
	}

	fallback := testkit.NewModelServer(t)
	fallback.Script(testkit.Reply("from the fallback"))
	cfg = testConfig(t, model)
	cfg.Model.Credentials = []config.Credential{{Key: "sk-first-key-0001"}}
	cfg.Model.Fallbacks = []config.Fallback{{BaseURL: fallback.URL(), Model: "fb-model"}}
	h = startGateway(t, cfg, Options{})
	if got := h.chat("f", "hello"); got != "from the fallback" {
		t.Errorf("reply %q, want the fallback's", got)
	}
	if got := fallback.Requests()[0].Model; got != "fb-model" {
		t.Errorf("the fallback was asked for %q", got)
	}
	h.post("f", "/status")
	h.waitItem("f", "Model: fallback fb-model@")
	if !strings.Contains(h.logs.String(), "falling back") {
		t.Error("the switch to the fallback was not logged")
	}
	from, to := "from="+llm.ProviderName("test-model", model.URL()), "to="+llm.ProviderName("fb-model", fallback.URL())
	if got := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_model_fallbacks_total", from, to, "reason=rate_limited"); got != 1 {
		t.Errorf("herald_model_fallbacks_total = %v, want 1 switch for the exhausted pool", got)
	}
}

// Sub-agents and /review that name only a model of their own run on the
// main server through the main pool: a key the turns found spent is not
// sent by them.
func TestGatewayAuxModelsShareTheMainPool(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if r.APIKey() == "sk-first-key-0001" {
			return testkit.Fail(http.StatusPaymentRequired, "Payment required")
		}
		return testkit.Reply("from " + keyLabel(r.APIKey()) + " as " + r.Model)
	})
	cfg := testConfig(t, model)
	cfg.Model.Credentials = []config.Credential{{Key: "sk-first-key-0001"}, {Key: "sk-second-key-0002"}}
	h := startGateway(t, cfg, Options{})
	if got := h.chat("k", "hello"); got != "from second as test-model" {
		t.Fatalf("reply %q", got)
	}
	child, err := h.g.auxClient(config.AuxModel{Model: "child-model"}, "delegation.api_key", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := child.Complete(context.Background(), llm.Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}})
	if err != nil || resp.Message.Content != "from second as child-model" {
		t.Fatalf("child: %v, %+v", err, resp)
	}
	if n := model.Count(); n != 3 {
		t.Errorf("%d model requests, want 3: the child never sent the spent key", n)
	}
}

// Settings that name only a model run on the main server and fall back
// like the main model: with the main key spent, a child is answered by
// model.fallbacks. Settings with a server of their own do not fall back.
func TestGatewayAuxModelsFallBackLikeTheMain(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Script(testkit.Fail(http.StatusPaymentRequired, "Payment required"))
	fallback := testkit.NewModelServer(t)
	fallback.Respond(func(r testkit.RecordedRequest) testkit.Step { return testkit.Reply("fallback as " + r.Model) })
	own := testkit.NewModelServer(t)
	own.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Fail(http.StatusServiceUnavailable, "down") })
	cfg := testConfig(t, model)
	cfg.Model.MaxRetries = 0
	cfg.Model.Credentials = []config.Credential{{Key: "sk-first-key-0001"}}
	cfg.Model.Fallbacks = []config.Fallback{{BaseURL: fallback.URL(), Model: "fb-model"}}
	h := startGateway(t, cfg, Options{})
	ask := func(ep config.AuxModel) (string, error) {
		t.Helper()
		c, err := h.g.auxClient(ep, "delegation.api_key", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Complete(context.Background(), llm.Request{Model: ep.Model, Messages: []chat.Message{{Role: "user", Content: "hi"}}})
		if err != nil {
			return "", err
		}
		return resp.Message.Content, nil
	}
	if got, err := ask(config.AuxModel{Model: "child-model"}); err != nil || got != "fallback as fb-model" {
		t.Errorf("a child naming a model: %q, %v; want the fallback's answer", got, err)
	}
	if n := model.Count(); n != 1 || model.Requests()[0].Model != "child-model" {
		t.Errorf("the main server had %d requests, want the child's one", n)
	}
	from, to := "from="+llm.ProviderName("child-model", model.URL()), "to="+llm.ProviderName("fb-model", fallback.URL())
	if got := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_model_fallbacks_total", from, to); got != 1 {
		t.Errorf("the child's switch counted %v times, want 1", got)
	}
	n := fallback.Count()
	if _, err := ask(config.AuxModel{BaseURL: own.URL(), Model: "own-model"}); llm.ClassOf(err) != llm.ClassUnavailable {
		t.Errorf("a child on a server of its own: %v, want its own failure", err)
	}
	if fallback.Count() != n {
		t.Error("a child on a server of its own fell back")
	}
}

// /status names the fallback that answered the conversation's own latest
// model call, as its turn's commit recorded it: not another
// conversation's, and not once the main model answers it again.
func TestGatewayStatusFallbackIsTheConversations(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if strings.Contains(r.LastUser(), "unknown") {
			return testkit.Fail(http.StatusNotFound, "The model `test-model` does not exist")
		}
		return testkit.Reply("from the main model")
	})
	fallback := testkit.NewModelServer(t)
	fallback.Script(testkit.Reply("from the fallback"))
	cfg := testConfig(t, model)
	cfg.Model.Fallbacks = []config.Fallback{{BaseURL: fallback.URL(), Model: "fb-model"}}
	h := startGateway(t, cfg, Options{})
	status := func(conv string) string {
		t.Helper()
		meta, err := h.g.db.Sessions().Meta(context.Background(), "api:"+conv)
		if err != nil {
			t.Fatal(err)
		}
		return agent.ModelStatus(meta)
	}
	if got := h.chat("f", "an unknown model"); got != "from the fallback" {
		t.Fatalf("reply %q, want the fallback's", got)
	}
	if got := h.chat("m", "hello"); got != "from the main model" {
		t.Fatalf("reply %q, want the main model's", got)
	}
	want := "Model: fallback fb-model@" + llm.PoolName(fallback.URL()) + " answered the latest request"
	if got := status("f"); !strings.Contains(got, want) || !strings.Contains(got, "model not found: test-model") {
		t.Errorf("/status of f = %q, want %q and why", got, want)
	}
	if got := status("m"); got != "" {
		t.Errorf("/status of m = %q, want no fallback line: its turn ran on the main model", got)
	}
	// The fallback's tokens are counted under its own model.
	meta, err := h.g.db.Sessions().Meta(context.Background(), "api:f")
	if err != nil {
		t.Fatal(err)
	}
	fbPrompt, _ := sessions.UsageKeys("fb-model")
	mainPrompt, _ := sessions.UsageKeys("test-model")
	if meta[fbPrompt] == "" || meta[mainPrompt] != "" {
		t.Errorf("f's usage: fb-model %q, test-model %q; want the fallback's alone", meta[fbPrompt], meta[mainPrompt])
	}
	if n := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_model_tokens_total", "model=fb-model", "kind=prompt"); n == 0 {
		t.Error("herald_model_tokens_total counts no prompt tokens of fb-model")
	}
	// The line is the conversation's, read on any instance: /status says it.
	h.post("f", "/status")
	h.waitItem("f", want)
	if got := h.chat("f", "hello again"); got != "from the main model" {
		t.Fatalf("reply %q, want the main model's", got)
	}
	if got := status("f"); got != "" {
		t.Errorf("/status of f after the main model answered = %q, want none", got)
	}
}

// keyLabel names a test key by its second word ("sk-second-key-0002":
// "second"): a reply cannot show the key itself, which the gateway masks.
func keyLabel(key string) string {
	parts := strings.Split(key, "-")
	if len(parts) < 2 {
		return key
	}
	return parts[1]
}

// givenModel is a model client given in Options: it answers every
// request with the model the request names.
type givenModel struct{}

func (givenModel) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: chat.Message{Role: "assistant", Content: "given, as " + req.Model}, FinishReason: "stop"}, nil
}

// A model client given in Options answers the turns and every setting
// with a model of its own, on its endpoint or another: the servers the
// config names are never asked.
func TestGatewayGivenModelAnswersEverySetting(t *testing.T) {
	model := testkit.NewModelServer(t)
	own := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Delegation.Model, cfg.Delegation.BaseURL = "child-model", own.URL()
	h := startGateway(t, cfg, Options{Model: givenModel{}})
	if got := h.chat("g", "hello"); got != "given, as test-model" {
		t.Errorf("reply %q, want the given client's", got)
	}
	for _, ep := range []config.AuxModel{{Model: "child-model"}, {Model: "child-model", BaseURL: own.URL(), APIKey: "sk-own"}} {
		child, err := h.g.auxClient(ep, "delegation.api_key", map[string]any{"temperature": 0}, h.g.models.client)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := child.Complete(context.Background(), llm.Request{Model: ep.Model, Messages: []chat.Message{{Role: "user", Content: "hi"}}})
		if err != nil || resp.Message.Content != "given, as child-model" {
			t.Errorf("%+v: %v, %+v; want the given client's answer", ep, err, resp)
		}
	}
	if n := model.Count() + own.Count(); n != 0 {
		t.Errorf("the configured servers got %d requests, want none", n)
	}
}
