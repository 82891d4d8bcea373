package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// ModelConversationHeader is the header the model server's default
// conversation key reads; a test (or the gateway under test) sets it so
// overlapping requests can be counted per conversation.
const ModelConversationHeader = "X-Herald-Conversation"

// modelWaitTimeout bounds how long WaitRequests waits before failing the
// test, so a stuck gateway fails fast instead of hanging the suite.
const modelWaitTimeout = 10 * time.Second

// modelCreated is the "created" timestamp of every reply: a fixed value
// keeps the server's output byte-for-byte reproducible.
const modelCreated = 1_700_000_000

// ModelServer is a scripted model server for tests. It speaks the
// OpenAI-compatible Chat Completions API (POST /v1/chat/completions, base
// URL URL()) and Anthropic's Messages API (POST /v1/messages, base URL
// AnthropicURL(); see anthropic.go), one script for both. Each request
// gets the next Step of the script; when the script is empty the
// Responder (if any) picks the step; otherwise the reply echoes the last
// user message as "echo: <text>". Every request is recorded, in the Chat
// Completions shape whichever API it came by.
type ModelServer struct {
	t   testing.TB
	srv *httptest.Server

	done chan struct{} // closed when the test ends; releases every waiting handler

	mu         sync.Mutex
	script     []Step
	responder  Responder
	keyOf      func(RecordedRequest) string
	apiKey     string              // required API key; empty accepts any
	models     map[string]struct{} // known models; empty accepts any
	seq        int
	requests   []RecordedRequest
	arrived    chan struct{} // closed and replaced on every request
	inFlight   map[string]int
	open       map[string][]net.Conn // the connections of the requests in flight, by key
	maxOverlap map[string]int
}

// Responder picks the step for a request when the script is empty, so a
// test can script per-conversation behaviour. Requests are answered
// concurrently, so it may be called from several goroutines at once.
type Responder func(req RecordedRequest) Step

// The APIs a RecordedRequest can have come by.
const (
	APIOpenAI    = "openai"    // Chat Completions
	APIAnthropic = "anthropic" // Messages
)

// RecordedRequest is one request as the model saw it.
type RecordedRequest struct {
	Seq      int    // 1-based order of arrival
	API      string // APIOpenAI or APIAnthropic
	Model    string
	Messages []ModelMessage
	Tools    []ModelTool
	Stream   bool
	User     string // the request's "user" field; on the Messages API, metadata.user_id
	Header   http.Header
	Body     []byte // the raw request body
}

// ModelMessage is one message of a recorded request.
type ModelMessage struct {
	Role    string
	Content string // text parts joined when the content was an array
	// Images are the message's images as sent, in order: an image_url
	// part's URL; an Anthropic image block as the data URL of its
	// base64 source, or its url source's URL.
	Images     []string
	Name       string
	ToolCallID string
	ToolCalls  []ModelToolCall
	IsError    bool // a Messages API tool_result's is_error
}

// ModelToolCall is a tool call, in a recorded request or in a scripted reply.
type ModelToolCall struct {
	ID        string // empty in a Step: the server makes one up
	Name      string
	Arguments string // JSON
}

// ModelTool is a tool offered to the model in a recorded request.
type ModelTool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// LastUser returns the content of the request's last user message.
func (r RecordedRequest) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// APIKey is the key the request was sent with: the bearer token, or
// the Messages API's x-api-key.
func (r RecordedRequest) APIKey() string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Conversation is the default overlap key: the ModelConversationHeader,
// else the "user" field.
func (r RecordedRequest) Conversation() string {
	if c := r.Header.Get(ModelConversationHeader); c != "" {
		return c
	}
	return r.User
}

// Step is what the server does with one request. The zero Step echoes.
// Delay and Wait happen first (a cancelled request stops waiting), then
// Drop, Status or the reply.
type Step struct {
	Text         string          // reply content
	ToolCalls    []ModelToolCall // reply tool calls
	FinishReason string          // default "stop", or "tool_calls" with tool calls; the Messages API's stop_reason follows it
	Chunks       []string        // streamed content pieces; default one per word
	ChunkDelay   time.Duration   // streaming: the pause before each content piece
	// Midway, when set, holds a streamed reply after its first content
	// piece until the gate is released (Chat Completions streams only).
	Midway *Gate

	Delay time.Duration // wait this long before answering
	Wait  *Gate         // wait until the gate is released

	Status     int    // answer with this HTTP error status
	Error      string // the error body's message
	ErrorType  string // the error body's type; a default per status
	ErrorCode  string // the error body's code; a default per status (Messages API: error.details.error_code, no default)
	RetryAfter string // Retry-After header value, sent with Status
	RawError   string // when set, the error body verbatim as text/plain, as proxies send
	// Headers are sent with Status (a provider's rate limit reset
	// headers, say).
	Headers http.Header
	// ResetsIn, when set, puts resets_in_seconds in the error's body, as
	// providers name when a spent usage limit comes back.
	ResetsIn int

	// Drop closes the connection instead of answering; when streaming, it
	// does so after the content chunks, before the finish.
	Drop bool
}

// Reply answers with text.
func Reply(text string) Step { return Step{Text: text} }

// Echo answers "echo: <last user message>", as an empty script does.
func Echo() Step { return Step{} }

// CallTools answers with tool calls.
func CallTools(calls ...ModelToolCall) Step { return Step{ToolCalls: calls} }

// ToolCall is a tool call with JSON arguments, for CallTools.
func ToolCall(name, arguments string) ModelToolCall {
	return ModelToolCall{Name: name, Arguments: arguments}
}

// Fail answers with an HTTP error status and the API's error body.
func Fail(status int, message string) Step { return Step{Status: status, Error: message} }

// RateLimited answers 429 with a Retry-After header (omitted when empty).
func RateLimited(retryAfter string) Step {
	return Step{Status: http.StatusTooManyRequests, Error: "Rate limit reached", RetryAfter: retryAfter}
}

// Dropped closes the connection without an answer.
func Dropped() Step { return Step{Drop: true} }

// Hang waits until g is released, then echoes.
func Hang(g *Gate) Step { return Step{Wait: g} }

// After returns s delayed by d.
func (s Step) After(d time.Duration) Step { s.Delay = d; return s }

// Until returns s held until g is released.
func (s Step) Until(g *Gate) Step { s.Wait = g; return s }

// Gate holds requests until released.
type Gate struct {
	once sync.Once
	ch   chan struct{}

	mu      sync.Mutex
	waiting int
}

// NewGate returns a gate that holds requests until Release.
func NewGate() *Gate { return &Gate{ch: make(chan struct{})} }

// Release lets every held request (and any later one) through.
func (g *Gate) Release() { g.once.Do(func() { close(g.ch) }) }

// Waiting reports how many requests the gate holds now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

func (g *Gate) hold(delta int) {
	g.mu.Lock()
	g.waiting += delta
	g.mu.Unlock()
}

// NewModelServer starts a model server that stops when t ends.
func NewModelServer(t testing.TB) *ModelServer {
	t.Helper()
	m := &ModelServer{
		t:          t,
		done:       make(chan struct{}),
		keyOf:      RecordedRequest.Conversation,
		arrived:    make(chan struct{}),
		inFlight:   map[string]int{},
		open:       map[string][]net.Conn{},
		maxOverlap: map[string]int{},
	}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(m.serve))
	m.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	m.srv.Start()
	t.Cleanup(func() {
		close(m.done)
		m.srv.Close()
	})
	return m
}

// URL is the base URL an OpenAI client is configured with; it ends in /v1.
func (m *ModelServer) URL() string { return m.srv.URL + "/v1" }

// AnthropicURL is the base URL an Anthropic client is configured with:
// the same server, without the /v1 the client adds itself.
func (m *ModelServer) AnthropicURL() string { return m.srv.URL }

// Script appends steps, consumed one per request in order.
func (m *ModelServer) Script(steps ...Step) {
	m.mu.Lock()
	m.script = append(m.script, steps...)
	m.mu.Unlock()
}

// Pending reports how many scripted steps are left.
func (m *ModelServer) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script)
}

// Respond sets the Responder used once the script is empty.
func (m *ModelServer) Respond(r Responder) {
	m.mu.Lock()
	m.responder = r
	m.mu.Unlock()
}

// KeyBy sets how requests are grouped for InFlight and MaxOverlap; the
// default is RecordedRequest.Conversation.
func (m *ModelServer) KeyBy(key func(RecordedRequest) string) {
	m.mu.Lock()
	m.keyOf = key
	m.mu.Unlock()
}

// RequireAPIKey makes the server answer 401 unless the request carries
// "Authorization: Bearer <key>" or, on the Messages API, "x-api-key: <key>"
// (the Bearer form is accepted there too: anthropic-sdk-go's WithAPIKey
// sends it).
func (m *ModelServer) RequireAPIKey(key string) {
	m.mu.Lock()
	m.apiKey = key
	m.mu.Unlock()
}

// Models limits the models the server knows; any other answers 404
// (model_not_found, or not_found_error on the Messages API). With none set
// every model is known.
func (m *ModelServer) Models(names ...string) {
	m.mu.Lock()
	m.models = map[string]struct{}{}
	for _, n := range names {
		m.models[n] = struct{}{}
	}
	m.mu.Unlock()
}

// Requests returns every request so far, in order of arrival.
func (m *ModelServer) Requests() []RecordedRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Count reports how many requests arrived.
func (m *ModelServer) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// WaitRequests waits until at least n requests arrived and returns them;
// after a while it fails the test the server was made for, so call it
// from that test's goroutine.
func (m *ModelServer) WaitRequests(n int) []RecordedRequest {
	m.t.Helper()
	deadline := time.NewTimer(modelWaitTimeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		if len(m.requests) >= n {
			reqs := slices.Clone(m.requests)
			m.mu.Unlock()
			return reqs
		}
		arrived, got := m.arrived, len(m.requests)
		m.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			m.t.Fatalf("testkit: model server got %d requests, want %d within %s", got, n, modelWaitTimeout)
			return nil
		}
	}
}

// InFlight reports how many requests with key are being answered now.
func (m *ModelServer) InFlight(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inFlight[key]
}

// MaxOverlap reports the most requests with key that were in flight at once.
// A request whose client had closed its connection by the time another one
// arrived does not count: the client let go of it, though its handler may
// not have noticed yet.
func (m *ModelServer) MaxOverlap(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxOverlap[key]
}

// MaxOverlaps returns MaxOverlap for every key seen.
func (m *ModelServer) MaxOverlaps() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.maxOverlap)
}

// wireAPI is one API the server speaks: how a request reads and how an
// answer is written. Everything between (script, gates, recording,
// counting) is the server's, the same for every API.
type wireAPI interface {
	parse(body []byte) (RecordedRequest, error)
	hasKey(h http.Header, key string) bool
	badKey() string                   // the 401 message
	unknownModel(model string) string // the 404 message
	writeError(w http.ResponseWriter, step Step)
	writeReply(w http.ResponseWriter, rec RecordedRequest, step Step)
	writeStream(m *ModelServer, w http.ResponseWriter, r *http.Request, rec RecordedRequest, step Step)
}

// wireAPIs are the routes the server answers, by path.
var wireAPIs = map[string]wireAPI{
	"/v1/chat/completions": openAIAPI{},
	"/v1/messages":         anthropicAPI{},
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	api, ok := wireAPIs[r.URL.Path]
	if r.Method != http.MethodPost || !ok {
		writeModelError(w, Step{Status: http.StatusNotFound, Error: "unknown route " + r.Method + " " + r.URL.Path})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	rec, parseErr := api.parse(body)
	rec.Header = r.Header.Clone()
	rec.Body = body

	m.mu.Lock()
	m.seq++
	rec.Seq = m.seq
	m.requests = append(m.requests, rec)
	close(m.arrived)
	m.arrived = make(chan struct{})
	key := m.keyOf(rec)
	conn, _ := r.Context().Value(connKey{}).(net.Conn)
	m.inFlight[key]++
	m.maxOverlap[key] = max(m.maxOverlap[key], 1+stillOpen(m.open[key]))
	m.open[key] = append(m.open[key], conn)
	apiKey, models := m.apiKey, m.models
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight[key]--
		if i := slices.Index(m.open[key], conn); i >= 0 {
			m.open[key] = slices.Delete(m.open[key], i, i+1)
		}
		m.mu.Unlock()
	}()

	switch {
	case parseErr != nil:
		api.writeError(w, Step{Status: http.StatusBadRequest, Error: "invalid request body: " + parseErr.Error()})
		return
	case apiKey != "" && !api.hasKey(r.Header, apiKey):
		api.writeError(w, Step{Status: http.StatusUnauthorized, Error: api.badKey()})
		return
	case len(models) > 0:
		if _, ok := models[rec.Model]; !ok {
			api.writeError(w, Step{Status: http.StatusNotFound, Error: api.unknownModel(rec.Model)})
			return
		}
	}

	step := m.next(rec)
	if !m.wait(r, step) {
		return
	}
	switch {
	case step.Drop && !rec.Stream:
		panic(http.ErrAbortHandler) // the client sees the connection close
	case step.Status != 0:
		api.writeError(w, step)
	case rec.Stream:
		api.writeStream(m, w, r, rec, step)
	default:
		api.writeReply(w, rec, step)
	}
}

// openAIAPI is the Chat Completions API.
type openAIAPI struct{}

func (openAIAPI) parse(body []byte) (RecordedRequest, error) { return parseModelRequest(body) }

func (openAIAPI) hasKey(h http.Header, key string) bool {
	return h.Get("Authorization") == "Bearer "+key
}

func (openAIAPI) badKey() string { return "Incorrect API key provided." }

func (openAIAPI) unknownModel(model string) string {
	return fmt.Sprintf("The model `%s` does not exist.", model)
}

func (openAIAPI) writeError(w http.ResponseWriter, step Step) { writeModelError(w, step) }

func (openAIAPI) writeReply(w http.ResponseWriter, rec RecordedRequest, step Step) {
	writeModelJSON(w, http.StatusOK, completionBody(rec, step))
}

func (openAIAPI) writeStream(m *ModelServer, w http.ResponseWriter, r *http.Request, rec RecordedRequest, step Step) {
	m.writeStream(w, r, rec, step, streamWantsUsage(rec.Body))
}

// next takes the request's step: the script's head, else the Responder's
// choice, else an echo.
func (m *ModelServer) next(rec RecordedRequest) Step {
	m.mu.Lock()
	if len(m.script) > 0 {
		s := m.script[0]
		m.script = m.script[1:]
		m.mu.Unlock()
		return s
	}
	responder := m.responder
	m.mu.Unlock()
	if responder != nil {
		return responder(rec)
	}
	return Echo()
}

// wait serves the step's delay and gate. It reports false when the request
// was cancelled or the test ended while waiting.
func (m *ModelServer) wait(r *http.Request, step Step) bool {
	if !m.pause(r, step.Delay) {
		return false
	}
	if step.Wait != nil {
		step.Wait.hold(1)
		defer step.Wait.hold(-1)
		select {
		case <-step.Wait.ch:
		case <-r.Context().Done():
			return false
		case <-m.done:
			return false
		}
	}
	return true
}

// pause waits d. It reports false when the request was cancelled or the
// test ended first.
func (m *ModelServer) pause(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-m.done:
		return false
	}
}

// wire shapes of the request, as far as the server reads it.
type (
	wireRequest struct {
		Model    string        `json:"model"`
		Messages []wireMessage `json:"messages"`
		Tools    []wireTool    `json:"tools"`
		Stream   bool          `json:"stream"`
		User     string        `json:"user"`
	}
	wireMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []wireToolCall  `json:"tool_calls"`
	}
	wireToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	wireTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

func parseModelRequest(body []byte) (RecordedRequest, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return RecordedRequest{API: APIOpenAI}, err
	}
	rec := RecordedRequest{API: APIOpenAI, Model: wr.Model, Stream: wr.Stream, User: wr.User}
	for _, wm := range wr.Messages {
		content, images, err := messageContent(wm.Content)
		if err != nil {
			return rec, fmt.Errorf("message %d: %w", len(rec.Messages), err)
		}
		msg := ModelMessage{Role: wm.Role, Content: content, Images: images, Name: wm.Name, ToolCallID: wm.ToolCallID}
		for _, tc := range wm.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ModelToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		rec.Messages = append(rec.Messages, msg)
	}
	for _, wt := range wr.Tools {
		rec.Tools = append(rec.Tools, ModelTool{Name: wt.Function.Name, Description: wt.Function.Description, Parameters: wt.Function.Parameters})
	}
	return rec, nil
}

// messageText reads a message's content: a string, null, or an array of
// parts whose text parts are joined.
func messageText(raw json.RawMessage) (string, error) {
	text, _, err := messageContent(raw)
	return text, err
}

// messageContent reads a message's content as messageText does, and the
// images among its parts: Chat Completions' image_url parts and the
// Messages API's image blocks (a tool_result's content holds those).
func messageContent(raw json.RawMessage) (string, []string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
		Source anthropicImageSource `json:"source"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("content is neither a string nor an array of parts")
	}
	var (
		b      strings.Builder
		images []string
	)
	for _, p := range parts {
		b.WriteString(p.Text)
		switch p.Type {
		case "image_url":
			images = append(images, p.ImageURL.URL)
		case "image":
			images = append(images, p.Source.url())
		}
	}
	return b.String(), images, nil
}

func streamWantsUsage(body []byte) bool {
	var opts struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &opts)
	return opts.StreamOptions.IncludeUsage
}

// reply resolves a step into the content, tool calls and finish reason
// the server sends for rec.
func reply(rec RecordedRequest, step Step) (string, []ModelToolCall, string) {
	text, calls := step.Text, slices.Clone(step.ToolCalls)
	if text == "" && len(calls) == 0 {
		text = "echo: " + rec.LastUser()
	}
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_%d_%d", rec.Seq, i)
		}
	}
	finish := step.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	return text, calls, finish
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usage counts words: deterministic, and enough for tests that check
// usage is carried through.
func usage(rec RecordedRequest, text string, calls []ModelToolCall) wireUsage {
	var u wireUsage
	for _, m := range rec.Messages {
		u.PromptTokens += len(strings.Fields(m.Content)) + 1
	}
	u.CompletionTokens = len(strings.Fields(text))
	for _, c := range calls {
		u.CompletionTokens += 1 + len(strings.Fields(c.Arguments))
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func wireCalls(calls []ModelToolCall) []map[string]any {
	out := make([]map[string]any, 0, len(calls))
	for _, c := range calls {
		out = append(out, map[string]any{
			"id":       c.ID,
			"type":     "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
		})
	}
	return out
}

func completionBody(rec RecordedRequest, step Step) map[string]any {
	text, calls, finish := reply(rec, step)
	msg := map[string]any{"role": "assistant", "content": text, "refusal": nil}
	if step.Text == "" && len(calls) > 0 {
		msg["content"] = nil
	}
	if len(calls) > 0 {
		msg["tool_calls"] = wireCalls(calls)
	}
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", rec.Seq),
		"object":  "chat.completion",
		"created": modelCreated,
		"model":   rec.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": usage(rec, text, calls),
	}
}

// writeStream sends the reply as Chat Completions chunks: a role chunk,
// the content pieces, each tool call's name then its arguments in pieces,
// the finish, the usage when asked for, and [DONE].
func (m *ModelServer) writeStream(w http.ResponseWriter, r *http.Request, rec RecordedRequest, step Step, withUsage bool) {
	text, calls, finish := reply(rec, step)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-%d", rec.Seq)
	send := func(choices []any, extra map[string]any) bool {
		chunk := map[string]any{
			"id":      id,
			"object":  "chat.completion.chunk",
			"created": modelCreated,
			"model":   rec.Model,
			"choices": choices,
		}
		maps.Copy(chunk, extra)
		b, _ := json.Marshal(chunk)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	delta := func(d map[string]any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": nil}}
	}

	if !send(delta(map[string]any{"role": "assistant", "content": ""}), nil) {
		return
	}
	if step.Text != "" || len(calls) == 0 {
		pieces := step.Chunks
		if len(pieces) == 0 {
			pieces = splitWords(text)
		}
		for i, p := range pieces {
			if i == 1 && step.Midway != nil && !m.wait(r, Step{Wait: step.Midway}) {
				return
			}
			if !m.pause(r, step.ChunkDelay) {
				return
			}
			if !send(delta(map[string]any{"content": p}), nil) {
				return
			}
		}
	}
	for i, c := range calls {
		head := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []any{head}}), nil) {
			return
		}
		for _, p := range splitRunes(c.Arguments, 8) {
			part := map[string]any{"index": i, "function": map[string]any{"arguments": p}}
			if !send(delta(map[string]any{"tool_calls": []any{part}}), nil) {
				return
			}
		}
	}
	if step.Drop {
		panic(http.ErrAbortHandler) // cut the stream before it finishes
	}
	finished := []any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": finish}}
	if !send(finished, nil) {
		return
	}
	if withUsage && !send([]any{}, map[string]any{"usage": usage(rec, text, calls)}) {
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// splitWords cuts s after each space, so the pieces join back to s.
func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// splitRunes cuts s into pieces of at most n runes.
func splitRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end, count := 0, 0
		for end < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
			count++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// errorDefaults are the error type and code an OpenAI server sends per
// status, used when a Step leaves them empty.
var errorDefaults = map[int][2]string{
	http.StatusBadRequest:          {"invalid_request_error", ""},
	http.StatusUnauthorized:        {"invalid_request_error", "invalid_api_key"},
	http.StatusPaymentRequired:     {"insufficient_quota", "insufficient_quota"},
	http.StatusNotFound:            {"invalid_request_error", "model_not_found"},
	http.StatusTooManyRequests:     {"requests", "rate_limit_exceeded"},
	http.StatusInternalServerError: {"server_error", ""},
}

func writeModelError(w http.ResponseWriter, step Step) {
	def := errorDefaults[step.Status]
	typ, code := step.ErrorType, step.ErrorCode
	if typ == "" {
		typ = def[0]
	}
	if code == "" {
		code = def[1]
	}
	var codeField any
	if code != "" {
		codeField = code
	}
	if writeRawError(w, step) {
		return
	}
	e := map[string]any{"message": errorMessage(step), "type": typ, "param": nil, "code": codeField}
	if step.ResetsIn > 0 {
		e["resets_in_seconds"] = step.ResetsIn
	}
	writeModelJSON(w, step.Status, map[string]any{"error": e})
}

// writeRawError sets the step's Retry-After header and, when the step has
// a RawError, writes it as the whole answer; it reports whether it did.
// Both APIs' errors start here.
func writeRawError(w http.ResponseWriter, step Step) bool {
	if step.RetryAfter != "" {
		w.Header().Set("Retry-After", step.RetryAfter)
	}
	for k, vs := range step.Headers {
		w.Header()[k] = vs
	}
	if step.RawError == "" {
		return false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(step.Status)
	_, _ = io.WriteString(w, step.RawError)
	return true
}

// errorMessage is the step's Error, else the status text.
func errorMessage(step Step) string {
	if step.Error != "" {
		return step.Error
	}
	return http.StatusText(step.Status)
}

func writeModelJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
