// Package llm talks to the model: one Chat Completions call with tool
// calling per Complete, retried where a retry can help, and failing with
// an error whose Class says what went wrong and what the user can do.
package llm

import (
	"context"
	"encoding/json"

	"github.com/heraldgw/herald/chat"
)

// Client makes model calls.
type Client interface {
	// Complete sends the conversation and returns the model's reply: an
	// assistant message with content, tool calls, or both.
	//
	// Errors carry a Class (read it with ClassOf) and an errs code:
	// errs.Invalid for ClassNotConfigured, ClassAuth, ClassPayment and
	// ClassBadRequest; errs.NotFound for ClassModelNotFound;
	// errs.Unavailable for ClassRateLimited, ClassTimeout and
	// ClassUnavailable (after the retries ran out); errs.Closed for
	// ClassCanceled. UserMessage turns any of them into one line for the
	// user.
	Complete(ctx context.Context, req Request) (*Response, error)
}

// Request is one model call.
type Request struct {
	// Model overrides the client's configured model when set.
	Model    string
	Messages []chat.Message
	Tools    []ToolSpec

	// User, when set, is sent as the request's "user" field: an opaque
	// end-user id that providers use for abuse tracking and that lets a
	// test model server tell conversations apart. Pass a stable id, not a
	// person's name.
	User string

	// Stream, when set, makes the call stream and receives each piece of
	// content as it arrives, in order. It is called on the goroutine that
	// called Complete. A call that streamed content is not retried, so the
	// receiver never sees a piece twice.
	Stream func(delta string)
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON schema of the arguments; empty means no arguments
}

// Response is the model's reply.
type Response struct {
	Message      chat.Message // role "assistant"
	FinishReason string       // "stop", "tool_calls", "length", …
	Usage        Usage
	// Answered is which provider answered, when a Chain made the call;
	// zero otherwise.
	Answered ChainState
}

// Usage is the token count the server reported; zero when it reported none.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}
