package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/llm"
)

// childModel is the model of delegation.model: the one the children's
// calls name, which tells them from the conversations'.
const childModel = "bench-child"

// delegationModel is the gateway's model, in process. The
// conversations' calls are answered at once: a user message of the
// bench (textDispatch, textNoop) with the tool call it names, with
// args; anything else (a tool's result, a completion) with a short
// reply. The children's calls are answered with a summary after the
// delay, as a child that needs one model call does, or, when held, not
// before the child is stopped. rec is told of each call.
type delegationModel struct {
	args  string       // the tool call's arguments
	delay atomic.Int64 // a time.Duration: a child's call
	hold  atomic.Bool  // a child's call waits until the child is stopped
	rec   *turnTimes
}

var _ llm.Client = (*delegationModel)(nil)

const childSummary = "## What I did\nRead the package.\n## What I found\nEvery exported function has a test.\n## Files changed\nNone.\n## Problems\nNone."

func (m *delegationModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if req.Model == childModel {
		return m.child(ctx)
	}
	last := req.Messages[len(req.Messages)-1]
	conv := m.rec.convOf(req.User)
	tool := ""
	switch last.Role {
	case "user":
		m.rec.turnCalled(conv, last.Content, time.Now())
		switch last.Content {
		case textDispatch:
			tool = delegation.ToolName
		case textNoop:
			tool = noopTool
		}
	case "tool":
		m.rec.toolAnswered(conv, time.Now())
	}
	resp := &llm.Response{
		Message:      chat.Message{Role: "assistant", Content: "Noted: herald bench reply."},
		FinishReason: "stop",
	}
	if tool != "" {
		resp = &llm.Response{
			Message: chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{
				{ID: "call_bench", Name: tool, Arguments: m.args},
			}},
			FinishReason: "tool_calls",
		}
	}
	m.rec.answered(conv, tool != "", time.Now())
	return resp, nil
}

// child answers a child's call.
func (m *delegationModel) child(ctx context.Context) (*llm.Response, error) {
	m.rec.childCall(time.Now())
	if m.hold.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
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
