package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/heraldgw/herald/chat"
)

// DefaultMaxTokens bounds an Anthropic reply when OpenAIOptions.MaxTokens
// sets no bound (the Messages API requires one).
const DefaultMaxTokens = 8192

// Anthropic is a Client for Anthropic's Messages API, through
// anthropic-sdk-go. It takes the OpenAI client's options (BaseURL is the
// API's root, e.g. https://api.anthropic.com; the key is sent as
// x-api-key and as a bearer token) and keeps its retries, timeouts and
// error classes.
type Anthropic struct {
	opts OpenAIOptions
	host string
	svc  anthropic.MessageService
}

var _ Client = (*Anthropic)(nil)

// NewAnthropic returns a client for opts.BaseURL. As with NewOpenAI, an
// empty BaseURL or Model makes Complete answer ClassNotConfigured.
// Errors: errs.Invalid for a BaseURL that is not an http(s) URL.
func NewAnthropic(opts OpenAIOptions) (*Anthropic, error) {
	const op = "llm.NewAnthropic"
	opts = opts.withDefaults()
	c := &Anthropic{opts: opts}
	if opts.BaseURL == "" {
		return c, nil
	}
	host, err := modelHost(op, opts.BaseURL)
	if err != nil {
		return nil, err
	}
	c.host = host
	// Built directly, not through anthropic.NewClient, which would also
	// read ANTHROPIC_* variables: herald's config decides.
	svcOpts := []option.RequestOption{
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithHTTPClient(opts.HTTPClient),
		option.WithMaxRetries(0), // retries are Complete's
	}
	if opts.APIKey != "" {
		// The SDK sends the key as a bearer token; the Messages API
		// documents x-api-key, which every server of it reads.
		svcOpts = append(svcOpts, option.WithHeader("x-api-key", opts.APIKey))
	}
	for _, k := range slices.Sorted(maps.Keys(opts.RequestOverrides)) {
		svcOpts = append(svcOpts, option.WithJSONSet(k, opts.RequestOverrides[k]))
	}
	c.svc = anthropic.NewMessageService(svcOpts...)
	return c, nil
}

// Complete makes the call with the OpenAI client's retries.
func (c *Anthropic) Complete(ctx context.Context, req Request) (*Response, error) {
	model := req.Model
	if model == "" {
		model = c.opts.Model
	}
	if model == "" || c.opts.BaseURL == "" {
		return nil, fail(&Error{Class: ClassNotConfigured, Model: model})
	}
	params, err := anthropicParams(model, c.opts.MaxTokens, req)
	if err != nil {
		return nil, fail(&Error{Class: ClassBadRequest, Model: model, Host: c.host, Err: scrubErr(err, c.opts.APIKey)})
	}
	return c.opts.retries().run(ctx, call{model: model, host: c.host, conv: req.User, attempt: func(key string) (*Response, bool, *Error) {
		return c.attempt(ctx, params, req.Stream, key)
	}})
}

func (c *Anthropic) attempt(ctx context.Context, params anthropic.MessageNewParams, stream func(string), key string) (*Response, bool, *Error) {
	actx, timer, done := attemptContext(ctx, c.opts.Timeout)
	defer done()
	var (
		httpRes  *http.Response
		msg      *anthropic.Message
		streamed bool
		err      error
	)
	opts := []option.RequestOption{option.WithResponseInto(&httpRes)}
	if c.opts.Pool != nil {
		opts = append(opts, option.WithAPIKey(key), option.WithHeader("x-api-key", key))
	}
	if stream == nil {
		msg, err = c.svc.New(actx, params, opts...)
	} else {
		msg, streamed, err = c.stream(actx, params, stream, timer, opts)
	}
	if err == nil {
		resp, rerr := anthropicReply(msg)
		if rerr == nil {
			return resp, false, nil
		}
		err = rerr
	}
	if e := classifyHTTP(ctx, actx, httpRes, key, c.opts.Timeout, c.opts.Clock.Now()); e != nil {
		return nil, streamed, e
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode >= 400 {
		// An error event inside a stream the server had started.
		return nil, streamed, &Error{Class: classifyStatus(apiErr.StatusCode, ""), Status: apiErr.StatusCode, Message: scrub(apiErr.Error(), key)}
	}
	return nil, streamed, unreachable(err, key)
}

// stream makes the call streamed, handing each piece of text to deliver,
// and returns the message the events add up to.
func (c *Anthropic) stream(ctx context.Context, params anthropic.MessageNewParams, deliver func(string), timer *time.Timer, opts []option.RequestOption) (*anthropic.Message, bool, error) {
	s := c.svc.NewStreaming(ctx, params, opts...)
	defer s.Close()
	var (
		msg      anthropic.Message
		streamed bool
	)
	for s.Next() {
		// As for OpenAI: a slow receiver is not the model being slow.
		if timer != nil {
			timer.Stop()
		}
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, streamed, err
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
			streamed = true
			deliver(ev.Delta.Text)
		}
		if timer != nil {
			timer.Reset(c.opts.Timeout)
		}
	}
	if err := s.Err(); err != nil {
		return nil, streamed, err
	}
	return &msg, streamed, nil
}

// anthropicParams is req as a Messages API request: system messages go
// to its system field; an assistant message's tool calls become tool_use
// blocks; each tool result a tool_result block of a user message, those
// in a row in one message, as the API wants them. A user message's
// images are image blocks after its text, a tool result's inside it.
func anthropicParams(model string, maxTokens int, req Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: int64(cmp.Or(maxTokens, DefaultMaxTokens))}
	var results []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(results) > 0 {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "tool" {
			m.Content = withLines(m.Content, unshownLines(m.Role, m.Images))
		}
		switch m.Role {
		case "system":
			p.System = append(p.System, anthropic.TextBlockParam{Text: m.Content})
		case "tool":
			results = append(results, anthropicToolResult(m))
		case "user":
			flush()
			p.Messages = append(p.Messages, anthropic.NewUserMessage(anthropicUserBlocks(m)...))
		case "assistant":
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				input := json.RawMessage(tc.Arguments)
				if strings.TrimSpace(tc.Arguments) == "" {
					input = json.RawMessage("{}")
				}
				if !json.Valid(input) {
					// A call the model wrote badly (cut at max_tokens, say)
					// was answered with an error the model reads; the
					// history keeps it, and the API takes only objects.
					input, _ = json.Marshal(map[string]string{"_raw": tc.Arguments})
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			if len(blocks) > 0 {
				p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
			}
		default:
			return p, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	flush()
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{}
		if len(t.Parameters) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(t.Parameters, &obj); err != nil {
				return p, fmt.Errorf("tool %s: its parameters are not a JSON object", t.Name)
			}
			schema.Properties = obj["properties"]
			if required, ok := obj["required"].([]any); ok {
				for _, r := range required {
					if s, ok := r.(string); ok {
						schema.Required = append(schema.Required, s)
					}
				}
			}
			delete(obj, "type")
			delete(obj, "properties")
			delete(obj, "required")
			if len(obj) > 0 {
				schema.ExtraFields = obj
			}
		}
		tool := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tool})
	}
	return p, nil
}

// anthropicUserBlocks are a user message's text, then its images.
func anthropicUserBlocks(m chat.Message) []anthropic.ContentBlockParamUnion {
	shown, lines := splitImages(m.Images)
	text := withLines(m.Content, lines)
	if len(shown) == 0 {
		return []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(text)}
	}
	var blocks []anthropic.ContentBlockParamUnion
	if text != "" {
		// The API refuses an empty text block.
		blocks = append(blocks, anthropic.NewTextBlock(text))
	}
	for _, img := range shown {
		blocks = append(blocks, anthropic.NewImageBlockBase64(img.mime, img.base64))
	}
	return blocks
}

// anthropicToolResult is a tool's result: its text, then its images,
// inside the tool_result block.
func anthropicToolResult(m chat.Message) anthropic.ContentBlockParamUnion {
	shown, lines := splitImages(m.Images)
	text := withLines(m.Content, lines)
	if len(shown) == 0 {
		return anthropic.NewToolResultBlock(m.ToolCallID, text, false)
	}
	var content []anthropic.ToolResultBlockParamContentUnion
	if text != "" {
		content = append(content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: text}})
	}
	for _, img := range shown {
		content = append(content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
			Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
				Data: img.base64, MediaType: anthropic.Base64ImageSourceMediaType(img.mime),
			}},
		}})
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID, Content: content}}
}

// anthropicReply is a Messages API reply as herald's: its text blocks
// joined, its tool_use blocks as tool calls, its stop reason in OpenAI's
// words.
func anthropicReply(m *anthropic.Message) (*Response, error) {
	if m == nil {
		return nil, errors.New("empty reply")
	}
	msg := chat.Message{Role: "assistant"}
	var text []string
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	msg.Content = strings.Join(text, "")
	finish := "stop"
	switch m.StopReason {
	case anthropic.StopReasonToolUse:
		finish = "tool_calls"
	case anthropic.StopReasonMaxTokens:
		finish = "length"
	}
	return &Response{Message: msg, FinishReason: finish, Usage: Usage{
		PromptTokens:     int(m.Usage.InputTokens + m.Usage.CacheReadInputTokens + m.Usage.CacheCreationInputTokens),
		CompletionTokens: int(m.Usage.OutputTokens),
	}}, nil
}
