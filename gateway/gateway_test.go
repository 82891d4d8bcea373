package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// testConfig is a gateway config on a fresh home, a free loopback port
// and the scripted model server.
func testConfig(t *testing.T, model *testkit.ModelServer) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Store.SQLitePath = ""
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Model.BaseURL = model.URL()
	cfg.Model.Name = "test-model"
	cfg.Workers.Turns = 4
	cfg.Workers.Deliveries = 2
	return cfg
}

// gw is a started gateway under test and a client for its API.
type gw struct {
	t    *testing.T
	g    *Gateway
	logs *testkit.LogBuffer
	key  string // the API key, when the config has one
	// bodies are every response body the client read.
	mu     sync.Mutex
	bodies []string
}

func startGateway(t *testing.T, cfg config.Config, opts Options) *gw {
	t.Helper()
	h := &gw{t: t, logs: &testkit.LogBuffer{}, key: cfg.HTTP.APIKey}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(context.Background()); err != nil {
		_ = g.Shutdown(context.Background())
		t.Fatalf("Start: %v", err)
	}
	h.g = g
	t.Cleanup(func() { h.stop() })
	return h
}

func (h *gw) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		h.t.Errorf("Shutdown: %v", err)
	}
}

// do sends a request and returns the status and body.
func (h *gw) do(method, path, body string, header ...string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, "http://"+h.g.Addr()+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.bodies = append(h.bodies, string(b))
	h.mu.Unlock()
	return res.StatusCode, string(b)
}

// chat runs one turn through /v1/chat/completions and returns the reply.
func (h *gw) chat(conv, text string) string {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":    "herald",
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	code, out := h.do("POST", "/v1/chat/completions", string(body), "X-Herald-Conversation", conv)
	if code != http.StatusOK {
		h.t.Fatalf("chat %q: %d %s", text, code, out)
	}
	var res struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Choices) != 1 {
		h.t.Fatalf("chat %q: reply %s: %v", text, out, err)
	}
	return res.Choices[0].Message.Content
}

// chatFailure runs one turn that fails on the model through
// /v1/chat/completions and returns the error status and message.
func (h *gw) chatFailure(conv, text string) (int, string) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"model":    "herald",
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	code, out := h.do("POST", "/v1/chat/completions", string(body), "X-Herald-Conversation", conv)
	var res struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if code == http.StatusOK || json.Unmarshal([]byte(out), &res) != nil || res.Error.Message == "" {
		h.t.Fatalf("chat %q: %d %s, want an error saying why", text, code, out)
	}
	return code, res.Error.Message
}

func TestGatewayRunsTurnsThroughTheAPI(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})

	if code, body := h.do("GET", "/healthz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := h.do("GET", "/readyz", ""); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}

	model.Script(testkit.Reply("hello there"))
	if got := h.chat("c1", "hi"); got != "hello there" {
		t.Errorf("reply %q", got)
	}

	// A tool call: the model keeps a note, then answers.
	model.Script(
		testkit.CallTools(testkit.ToolCall("memory", `{"action":"add","text":"likes tea"}`)),
		testkit.Reply("noted"),
	)
	if got := h.chat("c1", "remember I like tea"); got != "noted" {
		t.Errorf("reply %q", got)
	}
	reqs := model.Requests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), `"role":"tool"`) {
		t.Errorf("the tool result did not reach the model: %s", last.Body)
	}
	// The history is the gateway's: the third turn's request carries the
	// first two.
	model.Script(testkit.Reply("third"))
	h.chat("c1", "and again")
	if body := string(model.Requests()[len(model.Requests())-1].Body); !strings.Contains(body, "hello there") || !strings.Contains(body, "likes tea") {
		t.Errorf("the history was not sent: %s", body)
	}

	// A reply can reach the client before its turn's worker counts the
	// turn finished and its sender counts the send: the counts are
	// waited for.
	wants := []string{
		"herald_turns_started_total 3",
		`herald_turns_finished_total{end="done"} 3`,
		`herald_delivery_attempts_total{platform="api",result="accepted"} 3`,
		`herald_model_request_duration_seconds_count{result="ok"} 4`,
		"herald_turn_slots 4",
	}
	testkit.Eventually(t, "the three turns' counts in /metrics: "+strings.Join(wants, ", "), func() bool {
		_, metrics := h.do("GET", "/metrics", "")
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				return false
			}
		}
		return true
	})
	// The gauges count the turn queues: a turn held at the model is one
	// entry being run.
	gate := testkit.NewGate()
	model.Script(testkit.Reply("held").Until(gate))
	asked := model.Count()
	h.post("c2", "wait")
	model.WaitRequests(asked + 1)
	h.g.gauges.Refresh(context.Background())
	if d := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_queue_depth"); d != 1 {
		t.Errorf("herald_queue_depth %v with a turn running, want 1: the gateway's gauges count no turn queue", d)
	}
	gate.Release()
	h.waitItem("c2", "held")
	if !strings.Contains(h.logs.String(), `"conv":"api:c1"`) {
		t.Errorf("no log line names the conversation: %s", h.logs)
	}
}

func TestGatewayKeepsSecretsOut(t *testing.T) {
	const (
		modelKey    = "sk-modelkey-9f8e7d6c5b4a"
		telegramTok = "7777777:AAtelegram-token-secret-xyz"
		apiKey      = "herald-api-key-0a1b2c3d4e"
		redisPass   = "redis-pass-5e6f7a8b"
	)
	secrets := []string{modelKey, telegramTok, apiKey, redisPass}

	model := testkit.NewModelServer(t)
	model.RequireAPIKey(modelKey)
	cfg := testConfig(t, model)
	cfg.Model.APIKey = modelKey
	cfg.HTTP.APIKey = apiKey
	cfg.Platforms.Telegram.Token = telegramTok
	cfg.Platforms.Telegram.AllowedUsers = []string{"42"}
	cfg.Store.RedisURL = "redis://default:" + redisPass + "@127.0.0.1:1/0" // configured, not used
	cfg.SendMessage.AllowedTargets = []string{"telegram:999"}

	// A telegram adapter whose failures carry the request URL, token
	// included, the way an HTTP client's errors do.
	telegram := &adaptertest.Adapter{Name: "telegram", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "Post \"https://api.telegram.org/bot" + telegramTok + "/sendMessage\": 403 Forbidden"}
	}}
	h := startGateway(t, cfg, Options{Adapters: []adapters.Adapter{telegram}})

	// Without the key the API refuses, and says nothing of the key.
	h.key = ""
	if code, _ := h.do("GET", "/v1/models", ""); code != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", code)
	}
	h.key = apiKey

	// A full turn with a tool call that sends to telegram.
	model.Script(
		testkit.CallTools(testkit.ToolCall("send_message", `{"target":"telegram:999","text":"report is ready"}`)),
		testkit.Reply("sent it"),
	)
	if got := h.chat("s1", "tell the team"); got != "sent it" {
		t.Errorf("reply %q", got)
	}
	testkit.Eventually(t, "the telegram message dead-lettered", func() bool {
		dead, err := h.g.Store().Outbox().DeadLetters(context.Background(), 10)
		return err == nil && len(dead) == 1
	})

	// The model refuses the key: once with a message quoting it, once by
	// the server's own key check.
	model.Script(testkit.Fail(http.StatusUnauthorized, "Incorrect API key provided: "+modelKey))
	_, failed := h.chatFailure("s1", "again")
	model.RequireAPIKey("another-key-entirely")
	_, failed2 := h.chatFailure("s1", "and again")
	for _, reply := range []string{failed, failed2} {
		if !strings.Contains(strings.ToLower(reply), "key") {
			t.Errorf("the reply to a refused key does not say so: %q", reply)
		}
	}

	// Everything herald wrote or said.
	ctx := context.Background()
	store := h.g.Store()
	var written []string
	history, err := store.Sessions().History(ctx, "api:s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range history {
		b, _ := json.Marshal(m)
		written = append(written, string(b))
	}
	timeline, err := store.Timeline().ReadTimeline(ctx, "api:s1", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range timeline {
		b, _ := json.Marshal(it)
		written = append(written, string(b))
	}
	dead, _ := store.Outbox().DeadLetters(ctx, 10)
	pending, _ := store.Outbox().Pending(ctx, 10)
	for _, m := range append(dead, pending...) {
		b, _ := json.Marshal(m)
		written = append(written, string(b))
	}
	h.do("GET", "/metrics", "")
	h.do("GET", "/readyz", "")
	h.do("GET", "/api/v1/conversations/s1/timeline", "")
	h.stop()

	places := map[string]string{
		"logs":           h.logs.String(),
		"store":          strings.Join(written, "\n"),
		"HTTP responses": strings.Join(h.bodies, "\n"),
	}
	for where, text := range places {
		if text == "" {
			t.Errorf("nothing captured from %s", where)
		}
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s contain the secret %q:\n%s", where, s, text)
			}
		}
	}
	// The masking is the second line of defence: apart from the adapter
	// failure made to quote the token, nothing tried to log a secret.
	for _, l := range strings.Split(places["logs"], "\n") {
		if strings.Contains(l, config.Mask) && !strings.Contains(l, "bot"+config.Mask+"/sendMessage") {
			t.Errorf("a log line had a secret masked out of it: %s", l)
		}
	}
	if len(dead) != 1 || !strings.Contains(dead[0].LastError, "bot****/sendMessage") {
		t.Errorf("dead letter reason not kept (masked): %+v", dead)
	}
	if !strings.Contains(places["logs"], `"class":"auth"`) {
		t.Errorf("the failed model call was not logged: %s", places["logs"])
	}
}

// With an API key, /metrics on the API's address asks for it, while the
// health checks do not; http.metrics_addr serves the metrics alone,
// without the key, for a scraper on a private network.
func TestGatewayMetricsAskForTheKey(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.HTTP.APIKey = "metrics-test-key-1234"
	cfg.HTTP.MetricsAddr = "127.0.0.1:0"
	h := startGateway(t, cfg, Options{})

	h.key = ""
	if code, body := h.do("GET", "/metrics", ""); code != http.StatusUnauthorized || !strings.Contains(body, `"authentication_error"`) {
		t.Errorf("/metrics without the key: %d %s, want 401 as a JSON error", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := h.do("GET", path, ""); code != http.StatusOK {
			t.Errorf("%s without the key: %d %s, want 200", path, code, body)
		}
	}
	h.key = cfg.HTTP.APIKey
	if code, body := h.do("GET", "/metrics", ""); code != http.StatusOK || !strings.Contains(body, "herald_turns_started_total") {
		t.Errorf("/metrics with the key: %d %.200s", code, body)
	}

	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get("http://" + h.g.MetricsAddr() + path)
		if err != nil {
			t.Fatalf("GET %s on http.metrics_addr: %v", path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if h.g.MetricsAddr() == "" || h.g.MetricsAddr() == h.g.Addr() {
		t.Fatalf("MetricsAddr = %q beside Addr %q, want an address of its own", h.g.MetricsAddr(), h.g.Addr())
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "herald_turns_started_total") {
		t.Errorf("/metrics on http.metrics_addr without a key: %d %.200s", code, body)
	}
	if code, _ := get("/v1/models"); code != http.StatusNotFound {
		t.Errorf("the API on http.metrics_addr: %d, want 404", code)
	}
}

// A metrics address that cannot be bound fails Start, naming the key.
func TestGatewayStartFailsOnABusyMetricsAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := testConfig(t, testkit.NewModelServer(t))
	cfg.HTTP.MetricsAddr = busy.Addr().String()
	g, err := New(cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(context.Background())
	if err := g.Start(context.Background()); !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "http.metrics_addr") {
		t.Errorf("Start = %v, want Unavailable naming http.metrics_addr", err)
	}
	if g.Addr() != "" {
		t.Errorf("Addr = %q after a failed Start, want the API's listener closed", g.Addr())
	}
}

func TestGatewayRefusesAPublicAddressWithoutKey(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.HTTP.Addr = "0.0.0.0:0"
	_, err := New(cfg, Options{Logger: quietLogger()})
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "http.api_key") {
		t.Errorf("New = %v, want Invalid naming http.api_key", err)
	}

	cfg.HTTP.APIKey = "k-public-1234"
	h := startGateway(t, cfg, Options{Logger: quietLogger()})
	if h.g.Addr() == "" {
		t.Error("no address")
	}
}

func TestGatewayReadiness(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	g, err := New(cfg, Options{Logger: quietLogger(), Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ready := func() int {
		rec := httptest.NewRecorder()
		g.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("before Start: %d, want 503", code)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := ready(); code != http.StatusOK {
		t.Errorf("started: %d, want 200", code)
	}

	// A slow turn holds Shutdown in its grace period; meanwhile the
	// gateway is not ready, and finishes the turn.
	gate := testkit.NewGate()
	model.Script(testkit.Reply("slow answer").Until(gate))
	h := &gw{t: t, g: g, logs: &testkit.LogBuffer{}}
	if code, _ := h.do("POST", "/api/v1/conversations/r1/messages", `{"text":"take your time"}`); code != http.StatusAccepted {
		t.Fatalf("post: %d", code)
	}
	model.WaitRequests(1)
	stopped := make(chan error, 1)
	go func() { stopped <- g.Shutdown(context.Background()) }()
	testkit.Eventually(t, "not ready while stopping", func() bool { return ready() == http.StatusServiceUnavailable })
	gate.Release()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return")
	}

	// The turn finished within the grace period and its reply was
	// delivered before the store closed.
	g2 := reopen(t, cfg)
	items, err := g2.Store().Timeline().ReadTimeline(context.Background(), "api:r1", "", 10)
	if err != nil || len(items) != 1 || items[0].Text != "slow answer" {
		t.Errorf("timeline after shutdown = %+v, %v", items, err)
	}
}

// reopen builds (without starting) a gateway on cfg's store, to read it.
func reopen(t *testing.T, cfg config.Config) *Gateway {
	t.Helper()
	g, err := New(cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Shutdown(context.Background()) })
	return g
}

// A posted message's reply names it in the timeline, on either store.
func TestGatewayTimelineSaysWhatAReplyAnswers(t *testing.T) {
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			if backend == config.BackendRedis {
				cfg.Store.Backend, cfg.Store.RedisURL = backend, testkit.StartRedis(t).URL()
			}
			h := startGateway(t, cfg, Options{})
			model.Script(testkit.Reply("got it"))
			code, body := h.do("POST", "/api/v1/conversations/rt/messages", `{"text":"hello"}`)
			var posted struct {
				MessageID string `json:"message_id"`
			}
			if err := json.Unmarshal([]byte(body), &posted); code != http.StatusAccepted || err != nil || posted.MessageID == "" {
				t.Fatalf("post: %d %s", code, body)
			}
			var page struct {
				Items []sessions.TimelineItem `json:"items"`
			}
			testkit.Eventually(t, "the reply in the timeline", func() bool {
				_, body := h.do("GET", "/api/v1/conversations/rt/timeline", "")
				return json.Unmarshal([]byte(body), &page) == nil && len(page.Items) == 1
			})
			if it := page.Items[0]; it.Text != "got it" || it.ReplyTo != posted.MessageID {
				t.Errorf("timeline item %+v, want the reply with reply_to %q", it, posted.MessageID)
			}
		})
	}
}

// model.max_retries bounds the attempts of a call that fails with a 5xx:
// with 0, the first failure ends the turn with a reason.
func TestGatewayRetriesTheModelAsConfigured(t *testing.T) {
	for _, retries := range []int{0, 1} {
		t.Run(fmt.Sprint(retries), func(t *testing.T) {
			model := testkit.NewModelServer(t)
			cfg := testConfig(t, model)
			cfg.Model.MaxRetries = retries
			h := startGateway(t, cfg, Options{})
			model.Script(testkit.Fail(http.StatusBadGateway, "upstream down"), testkit.Reply("answered"))
			if retries == 0 {
				if code, _ := h.chatFailure("mr", "hello"); code != http.StatusServiceUnavailable {
					t.Errorf("status with no retries = %d, want 503", code)
				}
			} else if got := h.chat("mr", "hello"); got != "answered" {
				t.Errorf("reply %q with %d retries", got, retries)
			}
			if n := model.Count(); n != retries+1 {
				t.Errorf("%d model requests, want %d", n, retries+1)
			}
		})
	}
}

// store.history_max_messages bounds what a conversation keeps: the
// oldest messages go as turns add theirs, and the model sees the rest.
func TestGatewayBoundsTheStoredHistory(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Store.HistoryMaxMessages = 4
	h := startGateway(t, cfg, Options{})
	for _, text := range []string{"one", "two", "three", "four"} {
		model.Script(testkit.Reply("re " + text))
		h.chat("hb", text)
	}
	history, err := h.g.Store().Sessions().History(context.Background(), "api:hb")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range history {
		got = append(got, m.Content)
	}
	if want := []string{"three", "re three", "four", "re four"}; !slices.Equal(got, want) {
		t.Errorf("stored history %q, want %q", got, want)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	if n := len(last.Messages); n != 5 || last.Messages[0].Content != "two" {
		t.Errorf("the last turn sent %+v, want the history kept after the third turn (two … re three) and its message", last.Messages)
	}
}

// model.system_prompt opens every request to the model.
func TestGatewaySendsTheSystemPrompt(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Model.SystemPrompt = "You answer in one line."
	h := startGateway(t, cfg, Options{})
	model.Script(testkit.Reply("one line"), testkit.Reply("another"))
	h.chat("p1", "hello")
	h.chat("p1", "again")
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if len(r.Messages) == 0 || r.Messages[0].Role != "system" || r.Messages[0].Content != cfg.Model.SystemPrompt {
			t.Errorf("request %d opens with %+v, want the system prompt", r.Seq, r.Messages)
		}
	}
}

func TestGatewayHandsBackTurnsPastTheGrace(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Store.LeaseTTL = time.Second
	cfg.Workers.ShutdownGrace = 100 * time.Millisecond
	cfg.Workers.DeliveryDrain = 2 * time.Second
	g, err := New(cfg, Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.StopTimeout(), 100*time.Millisecond+2*time.Second; got != want {
		t.Errorf("StopTimeout = %v, want workers.shutdown_grace and workers.delivery_drain, %v", got, want)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	model.Script(testkit.Hang(testkit.NewGate()))
	h := &gw{t: t, g: g, logs: &testkit.LogBuffer{}}
	if code, _ := h.do("POST", "/api/v1/conversations/h1/messages", `{"text":"never answered here"}`); code != http.StatusAccepted {
		t.Fatalf("post: %d", code)
	}
	model.WaitRequests(1)
	start := time.Now()
	if err := g.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Shutdown took %v with a 100ms grace", took)
	}

	// The entry was handed back: the next gateway on the store runs it.
	model.Script(testkit.Reply("answered after the restart"))
	h2 := startGateway(t, cfg, Options{Logger: quietLogger()})
	testkit.Eventually(t, "the reply after the restart", func() bool {
		items, err := h2.g.Store().Timeline().ReadTimeline(context.Background(), "api:h1", "", 10)
		return err == nil && len(items) == 1 && items[0].Text == "answered after the restart"
	})
}
