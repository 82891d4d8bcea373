package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/llm"
)

// parentModel is the conversations' model, in process and instant: a
// user message of the bench (textDispatch, textNoop) is answered with
// the tool call it names, with args; anything else (a tool's result, a
// completion) with a short reply.
type parentModel struct {
	args string // the tool call's arguments
}

var _ llm.Client = (*parentModel)(nil)

func (m *parentModel) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	tool := ""
	if last.Role == "user" {
		switch last.Content {
		case textDispatch:
			tool = delegation.ToolName
		case textNoop:
			tool = noopTool
		}
	}
	if tool == "" {
		return &llm.Response{
			Message:      chat.Message{Role: "assistant", Content: "Noted: herald bench reply."},
			FinishReason: "stop",
		}, nil
	}
	return &llm.Response{
		Message: chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{
			{ID: "call_bench", Name: tool, Arguments: m.args},
		}},
		FinishReason: "tool_calls",
	}, nil
}

// childModel is the children's model, in process: every call is
// answered with a summary after the delay, as a child that needs one
// model call does.
type childModel struct {
	delay atomic.Int64 // a time.Duration
	rec   *turnTimes   // told when each call begins
}

var _ llm.Client = (*childModel)(nil)

const childSummary = "## What I did\nRead the package.\n## What I found\nEvery exported function has a test.\n## Files changed\nNone.\n## Problems\nNone."

func (m *childModel) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	m.rec.childCall(time.Now())
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return &llm.Response{
		Message:      chat.Message{Role: "assistant", Content: childSummary},
		FinishReason: "stop",
	}, nil
}
