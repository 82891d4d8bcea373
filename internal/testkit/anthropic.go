package testkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// anthropicAPI is Anthropic's Messages API (POST /v1/messages), as far as
// a chat gateway uses it: text and tool use, streamed or not. A request
// is recorded in the Chat Completions shape, so the same helpers read it;
// a Step is answered as a Message.
type anthropicAPI struct{}

// anthropicOverloaded is the status Anthropic answers when it is overloaded.
const anthropicOverloaded = 529

// wire shapes of a Messages request, as far as the server reads it.
type (
	anthropicRequest struct {
		Model     string             `json:"model"`
		MaxTokens int                `json:"max_tokens"`
		System    json.RawMessage    `json:"system"` // a string or text blocks
		Messages  []anthropicMessage `json:"messages"`
		Tools     []anthropicTool    `json:"tools"`
		Stream    bool               `json:"stream"`
		Metadata  struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
	}
	anthropicMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or blocks
	}
	// anthropicBlock is any content block; each type reads its own fields.
	anthropicBlock struct {
		Type      string               `json:"type"`
		Text      string               `json:"text"`        // text
		ID        string               `json:"id"`          // tool_use
		Name      string               `json:"name"`        // tool_use
		Input     json.RawMessage      `json:"input"`       // tool_use
		ToolUseID string               `json:"tool_use_id"` // tool_result
		Content   json.RawMessage      `json:"content"`     // tool_result: a string or blocks
		IsError   bool                 `json:"is_error"`    // tool_result
		Source    anthropicImageSource `json:"source"`      // image
	}
	// anthropicImageSource is an image block's source: base64 data or
	// a URL.
	anthropicImageSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	anthropicTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// parse records a Messages request in the Chat Completions shape: the
// system prompt as a leading system message; a user message's text and
// image blocks as one user message and each tool_result as a tool
// message, in block order; an assistant message's text and tool_use
// blocks as one assistant message with tool calls. Blocks of other types
// (thinking) are not recorded.
func (anthropicAPI) parse(body []byte) (RecordedRequest, error) {
	var ar anthropicRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return RecordedRequest{API: APIAnthropic}, err
	}
	rec := RecordedRequest{API: APIAnthropic, Model: ar.Model, Stream: ar.Stream, User: ar.Metadata.UserID}
	// The API refuses these; so does the fake, so a client that leaves
	// them out fails here rather than in production.
	if ar.MaxTokens <= 0 {
		return rec, errors.New("max_tokens: Field required")
	}
	system, err := messageText(ar.System)
	if err != nil {
		return rec, fmt.Errorf("system: %w", err)
	}
	if system != "" {
		rec.Messages = append(rec.Messages, ModelMessage{Role: "system", Content: system})
	}
	for i, am := range ar.Messages {
		blocks, err := anthropicBlocks(am.Content)
		if err != nil {
			return rec, fmt.Errorf("messages.%d.content: %w", i, err)
		}
		var msgs []ModelMessage
		switch am.Role {
		case "user":
			msgs, err = anthropicUserMessages(blocks)
		case "assistant":
			var msg ModelMessage
			msg, err = anthropicAssistantMessage(blocks)
			msgs = []ModelMessage{msg}
		default:
			err = fmt.Errorf("role: Input should be 'user' or 'assistant', not %q", am.Role)
		}
		if err != nil {
			return rec, fmt.Errorf("messages.%d: %w", i, err)
		}
		rec.Messages = append(rec.Messages, msgs...)
	}
	for _, at := range ar.Tools {
		rec.Tools = append(rec.Tools, ModelTool{Name: at.Name, Description: at.Description, Parameters: at.InputSchema})
	}
	return rec, nil
}

// anthropicBlocks reads a message's content: a string is one text block.
func anthropicBlocks(raw json.RawMessage) ([]anthropicBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("field required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, errors.New("content is neither a string nor an array of blocks")
	}
	return blocks, nil
}

// anthropicUserMessages turns a user message into a user message per run
// of text and image blocks and a tool message per tool_result.
func anthropicUserMessages(blocks []anthropicBlock) ([]ModelMessage, error) {
	var out []ModelMessage
	var text *ModelMessage
	for _, b := range blocks {
		switch b.Type {
		case "text", "image":
			if text == nil {
				out = append(out, ModelMessage{Role: "user"})
				text = &out[len(out)-1]
			}
			text.Content += b.Text
			if b.Type == "image" {
				text.Images = append(text.Images, b.Source.url())
			}
		case "tool_result":
			content, images, err := messageContent(b.Content)
			if err != nil {
				return nil, fmt.Errorf("tool_result %s: %w", b.ToolUseID, err)
			}
			out = append(out, ModelMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: content, Images: images, IsError: b.IsError})
			text = nil
		}
	}
	return out, nil
}

// url is the image as a recorded request names it: a base64 source as
// its data URL, a url source as its URL.
func (s anthropicImageSource) url() string {
	if s.Type == "base64" {
		return "data:" + s.MediaType + ";base64," + s.Data
	}
	return s.URL
}

// anthropicAssistantMessage turns an assistant message into one message
// with its text joined and its tool_use blocks as tool calls, whose
// arguments are the input JSON, compacted.
func anthropicAssistantMessage(blocks []anthropicBlock) (ModelMessage, error) {
	msg := ModelMessage{Role: "assistant"}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			msg.Content += b.Text
		case "tool_use":
			var args bytes.Buffer
			if len(b.Input) > 0 {
				if err := json.Compact(&args, b.Input); err != nil {
					return msg, fmt.Errorf("tool_use %s: input: %w", b.ID, err)
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, ModelToolCall{ID: b.ID, Name: b.Name, Arguments: args.String()})
		}
	}
	return msg, nil
}

func (anthropicAPI) hasKey(h http.Header, key string) bool {
	return h.Get("X-Api-Key") == key || h.Get("Authorization") == "Bearer "+key
}

func (anthropicAPI) badKey() string { return "invalid x-api-key" }

func (anthropicAPI) unknownModel(model string) string { return "model: " + model }

// anthropicErrorTypes are the error types Anthropic sends per status,
// used when a Step leaves ErrorType empty; another 4xx is an
// invalid_request_error and another 5xx an api_error.
var anthropicErrorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusPaymentRequired:       "billing_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusGatewayTimeout:        "timeout_error",
	anthropicOverloaded:              "overloaded_error",
}

// writeError answers {"type":"error","error":{"type","message"}}; a
// Step's ErrorCode goes in error.details.error_code, where the SDK's
// Error.ErrorCode reads it.
func (anthropicAPI) writeError(w http.ResponseWriter, step Step) {
	typ := step.ErrorType
	if typ == "" {
		typ = anthropicErrorTypes[step.Status]
	}
	if typ == "" {
		typ = "invalid_request_error"
		if step.Status >= 500 {
			typ = "api_error"
		}
	}
	msg := errorMessage(step)
	if msg == "" && step.Status == anthropicOverloaded {
		msg = "Overloaded"
	}
	if writeRawError(w, step) {
		return
	}
	e := map[string]any{"type": typ, "message": msg}
	if step.ErrorCode != "" {
		e["details"] = map[string]any{"error_code": step.ErrorCode}
	}
	if step.ResetsIn > 0 {
		e["resets_in_seconds"] = step.ResetsIn
	}
	writeModelJSON(w, step.Status, map[string]any{"type": "error", "error": e})
}

// anthropicReply resolves a step for rec as reply does, with tool use ids
// in Anthropic's form, and the stop reason the finish reason maps to.
func anthropicReply(rec RecordedRequest, step Step) (string, []ModelToolCall, string) {
	step.ToolCalls = slices.Clone(step.ToolCalls)
	for i := range step.ToolCalls {
		if step.ToolCalls[i].ID == "" {
			step.ToolCalls[i].ID = fmt.Sprintf("toolu_%d_%d", rec.Seq, i)
		}
	}
	text, calls, finish := reply(rec, step)
	return text, calls, anthropicStopReason(finish)
}

// anthropicStopReason maps a Chat Completions finish reason to a stop
// reason; any other value (say "pause_turn") is sent as it is.
func anthropicStopReason(finish string) string {
	switch finish {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return finish
}

// anthropicInput is a tool call's arguments as a tool_use block's input
// object. Arguments that are not JSON (a test scripting a broken model)
// are sent as a JSON string, which a client fails to read as an object,
// as it would fail on a broken input.
func anthropicInput(arguments string) json.RawMessage {
	switch {
	case arguments == "":
		return json.RawMessage(`{}`)
	case json.Valid([]byte(arguments)):
		return json.RawMessage(arguments)
	}
	b, _ := json.Marshal(arguments)
	return b
}

func anthropicUsage(u wireUsage) map[string]any {
	return map[string]any{
		"input_tokens":                u.PromptTokens,
		"output_tokens":               u.CompletionTokens,
		"cache_creation_input_tokens": 0,
		"cache_read_input_tokens":     0,
	}
}

func anthropicTextBlock(text string) map[string]any {
	return map[string]any{"type": "text", "text": text}
}

func anthropicToolUseBlock(c ModelToolCall, input json.RawMessage) map[string]any {
	return map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input}
}

func (anthropicAPI) writeReply(w http.ResponseWriter, rec RecordedRequest, step Step) {
	text, calls, stop := anthropicReply(rec, step)
	content := []any{}
	if step.Text != "" || len(calls) == 0 {
		content = append(content, anthropicTextBlock(text))
	}
	for _, c := range calls {
		content = append(content, anthropicToolUseBlock(c, anthropicInput(c.Arguments)))
	}
	writeModelJSON(w, http.StatusOK, map[string]any{
		"id":            anthropicMessageID(rec),
		"type":          "message",
		"role":          "assistant",
		"model":         rec.Model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage":         anthropicUsage(usage(rec, text, calls)),
	})
}

func anthropicMessageID(rec RecordedRequest) string { return fmt.Sprintf("msg_%d", rec.Seq) }

// writeStream sends the reply as Anthropic's events: message_start (no
// content yet, the input tokens), a ping, then per content block
// content_block_start, its deltas (text_delta per chunk or word, after
// ChunkDelay; input_json_delta in pieces of the arguments) and
// content_block_stop, then message_delta (stop reason, output tokens) and
// message_stop. Drop cuts the stream after the last block's deltas.
func (anthropicAPI) writeStream(m *ModelServer, w http.ResponseWriter, r *http.Request, rec RecordedRequest, step Step) {
	text, calls, stop := anthropicReply(rec, step)
	u := usage(rec, text, calls)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) bool {
		data["type"] = event
		b, _ := json.Marshal(data)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}

	start := map[string]any{
		"id":            anthropicMessageID(rec),
		"type":          "message",
		"role":          "assistant",
		"model":         rec.Model,
		"content":       []any{},
		"stop_reason":   nil,
		"stop_sequence": nil,
		"usage":         anthropicUsage(wireUsage{PromptTokens: u.PromptTokens}),
	}
	if !send("message_start", map[string]any{"message": start}) || !send("ping", map[string]any{}) {
		return
	}

	// A block is its start, its deltas and, unless the stream is cut
	// after the last one, its stop.
	type block struct {
		start  map[string]any
		deltas []map[string]any
		paced  bool // ChunkDelay before each delta
	}
	var blocks []block
	if step.Text != "" || len(calls) == 0 {
		pieces := step.Chunks
		if len(pieces) == 0 {
			pieces = splitWords(text)
		}
		b := block{start: anthropicTextBlock(""), paced: true}
		for _, p := range pieces {
			b.deltas = append(b.deltas, map[string]any{"type": "text_delta", "text": p})
		}
		blocks = append(blocks, b)
	}
	for _, c := range calls {
		b := block{start: anthropicToolUseBlock(c, json.RawMessage(`{}`))}
		for _, p := range splitRunes(c.Arguments, 8) {
			b.deltas = append(b.deltas, map[string]any{"type": "input_json_delta", "partial_json": p})
		}
		blocks = append(blocks, b)
	}
	for i, b := range blocks {
		if !send("content_block_start", map[string]any{"index": i, "content_block": b.start}) {
			return
		}
		for _, d := range b.deltas {
			if b.paced && !m.pause(r, step.ChunkDelay) {
				return
			}
			if !send("content_block_delta", map[string]any{"index": i, "delta": d}) {
				return
			}
		}
		if step.Drop && i == len(blocks)-1 {
			panic(http.ErrAbortHandler) // cut the stream before it finishes
		}
		if !send("content_block_stop", map[string]any{"index": i}) {
			return
		}
	}
	delta := map[string]any{"stop_reason": stop, "stop_sequence": nil}
	if !send("message_delta", map[string]any{"delta": delta, "usage": map[string]any{"output_tokens": u.CompletionTokens}}) {
		return
	}
	send("message_stop", map[string]any{})
}
