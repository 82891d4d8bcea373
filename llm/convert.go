package llm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/heraldgw/herald/chat"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

// buildParams turns a Request into the SDK's parameters. Its errors are
// the caller's (an unknown role, a schema that is not JSON): no request
// is sent for them.
func buildParams(model string, req Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	// Chat Completions takes no images in a tool message: a run of tool
	// results is followed by one user message that shows their images,
	// each tool's after a line naming it.
	var toolImages []openai.ChatCompletionContentPartUnionParam
	for i, m := range req.Messages {
		if m.Role != "tool" && len(toolImages) > 0 {
			p.Messages = append(p.Messages, openai.UserMessage(toolImages))
			toolImages = nil
		}
		if m.Role == "tool" && len(m.Images) > 0 {
			shown, lines := splitImages(m.Images)
			m.Content, m.Images = withLines(m.Content, lines), nil
			if len(shown) > 0 {
				toolImages = append(toolImages, openai.TextContentPart(toolImagesIntro(m)))
				toolImages = append(toolImages, imageParts(shown)...)
			}
		}
		msg, err := messageParam(m)
		if err != nil {
			return p, fmt.Errorf("message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, msg)
	}
	if len(toolImages) > 0 {
		p.Messages = append(p.Messages, openai.UserMessage(toolImages))
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, tool)
	}
	if req.User != "" {
		p.User = param.NewOpt(req.User)
	}
	return p, nil
}

func messageParam(m chat.Message) (openai.ChatCompletionMessageParamUnion, error) {
	var name param.Opt[string]
	if m.Name != "" {
		name = param.NewOpt(m.Name)
	}
	if m.Role != "user" {
		m.Content = withLines(m.Content, unshownLines(m.Role, m.Images))
	}
	content := param.NewOpt(m.Content)
	switch m.Role {
	case "system":
		return openai.ChatCompletionMessageParamUnion{OfSystem: &openai.ChatCompletionSystemMessageParam{
			Content: openai.ChatCompletionSystemMessageParamContentUnion{OfString: content}, Name: name,
		}}, nil
	case "developer":
		return openai.ChatCompletionMessageParamUnion{OfDeveloper: &openai.ChatCompletionDeveloperMessageParam{
			Content: openai.ChatCompletionDeveloperMessageParamContentUnion{OfString: content}, Name: name,
		}}, nil
	case "user":
		u := &openai.ChatCompletionUserMessageParam{Name: name}
		shown, lines := splitImages(m.Images)
		text := withLines(m.Content, lines)
		if len(shown) == 0 {
			u.Content.OfString = param.NewOpt(text)
			return openai.ChatCompletionMessageParamUnion{OfUser: u}, nil
		}
		// Text first, then the images, as a person's message reads.
		var parts []openai.ChatCompletionContentPartUnionParam
		if text != "" {
			parts = append(parts, openai.TextContentPart(text))
		}
		u.Content.OfArrayOfContentParts = append(parts, imageParts(shown)...)
		return openai.ChatCompletionMessageParamUnion{OfUser: u}, nil
	case "assistant":
		a := &openai.ChatCompletionAssistantMessageParam{Name: name}
		// An assistant turn that only called tools has no content; sending
		// "" instead of leaving it out is refused by some servers.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content = openai.ChatCompletionAssistantMessageParamContentUnion{OfString: content}
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      tc.Name,
						Arguments: tc.Arguments,
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: a}, nil
	case "tool":
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message without a tool_call_id")
		}
		return openai.ChatCompletionMessageParamUnion{OfTool: &openai.ChatCompletionToolMessageParam{
			Content: openai.ChatCompletionToolMessageParamContentUnion{OfString: content}, ToolCallID: m.ToolCallID,
		}}, nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

// imageParts are the images as image_url parts with data URLs.
func imageParts(shown []shownImage) []openai.ChatCompletionContentPartUnionParam {
	parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(shown))
	for _, s := range shown {
		parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: s.dataURL()}))
	}
	return parts
}

func toolParam(t ToolSpec) (openai.ChatCompletionToolUnionParam, error) {
	if t.Name == "" {
		return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool without a name")
	}
	def := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		def.Description = param.NewOpt(t.Description)
	}
	if len(t.Parameters) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
		def.Parameters = shared.FunctionParameters(schema)
	}
	return openai.ChatCompletionFunctionTool(def), nil
}

// replyFrom reads the first choice of a non-streamed completion.
func replyFrom(c *openai.ChatCompletion) (*Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return nil, fmt.Errorf("the reply has no choices")
	}
	ch := c.Choices[0]
	msg := chat.Message{Role: "assistant", Content: ch.Message.Content}
	if msg.Content == "" && ch.Message.Refusal != "" {
		msg.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		call := chat.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if tc.Type == "custom" {
			call.Name, call.Arguments = tc.Custom.Name, tc.Custom.Input
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	return &Response{
		Message:      msg,
		FinishReason: ch.FinishReason,
		Usage:        Usage{PromptTokens: int(c.Usage.PromptTokens), CompletionTokens: int(c.Usage.CompletionTokens)},
	}, nil
}

// maxStreamToolCalls bounds the tool-call index a stream may use, so a
// broken server cannot make the accumulator allocate without limit.
const maxStreamToolCalls = 128

// streamAccumulator builds the reply from streamed chunks. Only choice 0
// is read: herald never asks for more than one.
type streamAccumulator struct {
	content  strings.Builder
	refusal  strings.Builder
	calls    []chat.ToolCall
	finish   string
	usage    Usage
	streamed bool // a content delta went to the caller
}

// add folds one chunk in and returns its content delta.
func (a *streamAccumulator) add(ch openai.ChatCompletionChunk) (string, error) {
	if ch.Usage.PromptTokens > 0 || ch.Usage.CompletionTokens > 0 {
		a.usage = Usage{PromptTokens: int(ch.Usage.PromptTokens), CompletionTokens: int(ch.Usage.CompletionTokens)}
	}
	var delta string
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		delta += c.Delta.Content
		a.content.WriteString(c.Delta.Content)
		a.refusal.WriteString(c.Delta.Refusal)
		for _, tc := range c.Delta.ToolCalls {
			i := int(tc.Index)
			if i < 0 || i >= maxStreamToolCalls {
				return "", fmt.Errorf("stream sent tool call index %d", tc.Index)
			}
			for len(a.calls) <= i {
				a.calls = append(a.calls, chat.ToolCall{})
			}
			call := &a.calls[i]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if call.Name == "" {
				call.Name = tc.Function.Name
			}
			call.Arguments += tc.Function.Arguments
		}
		if c.FinishReason != "" {
			a.finish = c.FinishReason
		}
	}
	return delta, nil
}

// response is the accumulated reply; an error when the stream ended
// before the server said it finished.
func (a *streamAccumulator) response() (*Response, error) {
	if a.finish == "" {
		return nil, fmt.Errorf("the stream ended before the reply finished")
	}
	msg := chat.Message{Role: "assistant", Content: a.content.String()}
	if msg.Content == "" {
		msg.Content = a.refusal.String()
	}
	for _, c := range a.calls {
		if c.Name == "" && c.ID == "" && c.Arguments == "" {
			continue // an index the server skipped
		}
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	return &Response{Message: msg, FinishReason: a.finish, Usage: a.usage}, nil
}
