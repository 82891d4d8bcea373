package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/testkit"
)

// Bounds of the waits. They are generous because a 2-core machine under
// -race can be slow; a healthy gateway answers in milliseconds.
const (
	waitReply    = 20 * time.Second // a reply, a command answer, a model request
	settleWindow = 500 * time.Millisecond
	pollEvery    = 20 * time.Millisecond
	stopTimeout  = 30 * time.Second
)

// modelName is the model the gateways are configured with; the scripted
// server accepts any.
const modelName = "e2e-model"

// tail returns the last n lines of s, for failure messages.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// baseConfig is a gateway config on a fresh home with its SQLite file, a
// free loopback port and the scripted model.
func baseConfig(t *testing.T, model *testkit.ModelServer) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Store.SQLitePath = ""
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Model.BaseURL = model.URL()
	cfg.Model.Name = modelName
	cfg.Workers.Turns = 4
	cfg.Workers.Deliveries = 2
	return cfg
}

// inProcess is a gateway running in the test process.
type inProcess struct {
	t    *testing.T
	g    *gateway.Gateway
	logs *testkit.LogBuffer
	once sync.Once
}

// startInProcess builds and starts a gateway on cfg; it is shut down when
// the test ends, and its log is shown when the test failed.
func startInProcess(t *testing.T, cfg config.Config) *inProcess {
	t.Helper()
	p := &inProcess{t: t, logs: &testkit.LogBuffer{}}
	log := slog.New(slog.NewJSONHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := gateway.New(cfg, gateway.Options{Logger: log, Grace: 5 * time.Second, Drain: 2 * time.Second})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	if err := g.Start(context.Background()); err != nil {
		_ = g.Shutdown(context.Background())
		t.Fatalf("gateway Start: %v", err)
	}
	p.g = g
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("gateway log (last lines):\n%s", tail(p.logs.String(), 60))
		}
	})
	return p
}

// stop shuts the gateway down gracefully, once.
func (p *inProcess) stop() {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := p.g.Shutdown(ctx); err != nil {
			p.t.Errorf("gateway Shutdown: %v", err)
		}
	})
}

func (p *inProcess) api() *apiClient { return newAPIClient("http://" + p.g.Addr()) }

// waitLog waits until the gateway logged a line holding want.
func (p *inProcess) waitLog(want string) {
	p.t.Helper()
	testkit.EventuallyWithin(p.t, waitReply, func() (bool, string) {
		return strings.Contains(p.logs.String(), want), "the gateway never logged " + want
	})
}

// openAIClient is the official OpenAI client pointed at a gateway, for
// the conversation conv, with the options extra (headers) besides.
func openAIClient(base, conv string, extra ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base + "/v1"),
		option.WithAPIKey("unused-locally"),
		option.WithMaxRetries(0),
		option.WithHeader("X-Herald-Conversation", conv),
	}, extra...)...)
}

// userTurn is a completion request whose last user message is text.
func userTurn(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "herald",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}

// chat runs one turn through /v1/chat/completions and returns the reply.
func chat(t *testing.T, c openai.Client, text string) string {
	t.Helper()
	r := complete(c, text)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.text
}

// completionResult is what one completion answered.
type completionResult struct {
	text string
	err  error
}

// complete is chat for a goroutine other than the test's: it returns
// the failure instead of ending the test.
func complete(c openai.Client, text string) completionResult {
	ctx, cancel := context.WithTimeout(context.Background(), waitReply)
	defer cancel()
	res, err := c.Chat.Completions.New(ctx, userTurn(text))
	switch {
	case err != nil:
		return completionResult{err: fmt.Errorf("chat completion for %q: %w", text, err)}
	case len(res.Choices) != 1:
		return completionResult{err: fmt.Errorf("chat completion for %q: %d choices, want 1", text, len(res.Choices))}
	}
	return completionResult{text: res.Choices[0].Message.Content}
}

// item is one entry of a conversation's timeline, as the API shows it.
type item struct {
	Cursor string `json:"cursor"`
	ID     string `json:"id"`
	Conv   string `json:"conv"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
}

func (it item) String() string { return it.Kind + " " + strconv.Quote(it.Text) }

// Timeline kinds the tests look for.
const (
	kindReply   = "reply"
	kindCommand = "command"
	kindNotice  = "notice"
	kindMessage = "message"
)

// apiClient talks to herald's own endpoints of one gateway.
type apiClient struct {
	base string
	http *http.Client
}

func newAPIClient(base string) *apiClient {
	// Many conversations post at once: enough idle connections that each
	// request does not open a new one.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 128
	return &apiClient{base: base, http: &http.Client{Timeout: 10 * time.Second, Transport: transport}}
}

// post queues text as a message of conversation conv. A non-empty key is
// sent as Idempotency-Key, so a retry of the same message adds nothing.
func (a *apiClient) post(conv, text, key string) (string, error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	req, err := http.NewRequest("POST", a.base+"/api/v1/conversations/"+url.PathEscape(conv)+"/messages", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := a.http.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("POST message to %s: %d %s", conv, res.StatusCode, bytes.TrimSpace(b))
	}
	var out struct {
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.MessageID == "" {
		return "", fmt.Errorf("POST message to %s: answer %s has no message_id", conv, b)
	}
	return out.MessageID, nil
}

// mustPost is post failing the test.
func (a *apiClient) mustPost(t *testing.T, conv, text string) string {
	t.Helper()
	id, err := a.post(conv, text, "")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// timeline reads the whole timeline of conv.
func (a *apiClient) timeline(conv string) ([]item, error) {
	var all []item
	after := ""
	for {
		u := a.base + "/api/v1/conversations/" + url.PathEscape(conv) + "/timeline?limit=1000"
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		res, err := a.http.Get(u)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return nil, err
		}
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET timeline of %s: %d %s", conv, res.StatusCode, bytes.TrimSpace(b))
		}
		var page struct {
			Items []item `json:"items"`
			Next  string `json:"next"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("GET timeline of %s: %v in %s", conv, err, b)
		}
		all = append(all, page.Items...)
		if len(page.Items) == 0 || page.Next == after {
			return all, nil
		}
		after = page.Next
	}
}

// waitTimeline waits until conv's timeline holds at least n items and
// returns it; it fails the test naming what was there.
func (a *apiClient) waitTimeline(t *testing.T, conv string, n int) []item {
	t.Helper()
	var items []item
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		var err error
		items, err = a.timeline(conv)
		if err != nil {
			return false, err.Error()
		}
		return len(items) >= n, fmt.Sprintf("timeline of %s has %d items, want %d: %v", conv, len(items), n, items)
	})
	return items
}

// ofKind returns the items of kind.
func ofKind(items []item, kind string) []item {
	var out []item
	for _, it := range items {
		if it.Kind == kind {
			out = append(out, it)
		}
	}
	return out
}
