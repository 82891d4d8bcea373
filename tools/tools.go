// Package tools is what the agent can do besides answer: each tool is a
// name, a description, a JSON schema for its arguments and a handler.
// Tools are registered in named toolsets; an agent runs with a Set built
// from toolset names, and a child agent can take its parent's Set minus
// the tools it must not have.
//
// Nothing a model sends can make a tool call fail the turn: bad JSON,
// arguments that break the schema, an unknown tool, a handler error or a
// handler panic all come back as a tool result the model reads and can
// correct.
package tools

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Tool is one thing the model can call.
type Tool struct {
	// Name is what the model calls; letters, digits, '_' and '-', at most
	// 64 characters (what the Chat Completions API accepts).
	Name string
	// Description tells the model when and how to use the tool.
	Description string
	// Schema is the JSON schema of the arguments, an object schema. Empty
	// means the tool takes no arguments.
	Schema json.RawMessage
	// Handler runs a call whose arguments passed the schema.
	Handler Handler
}

// Handler runs one tool call. args are the model's arguments, already
// checked against the tool's schema. An error goes back to the model as
// {"error": "..."}: write its message for the model to act on (what was
// wrong, what to do instead). A handler should return promptly when ctx
// ends: that is how a turn is interrupted.
type Handler func(ctx context.Context, turn *Turn, args json.RawMessage) (Result, error)

// Func adapts a handler that takes its arguments decoded into A.
func Func[A any](fn func(ctx context.Context, turn *Turn, args A) (Result, error)) Handler {
	return func(ctx context.Context, turn *Turn, raw json.RawMessage) (Result, error) {
		var args A
		if err := json.Unmarshal(raw, &args); err != nil {
			// The schema passed, so this is a schema looser than A: say
			// what did not fit rather than blame the model.
			return Result{}, errs.E("tools.Func", errs.Invalid, "arguments do not fit: %v", err)
		}
		return fn(ctx, turn, args)
	}
}

// Result is what a tool call gives back.
type Result struct {
	// Content is what the model reads as the tool's result, usually JSON.
	Content string
	// IsError marks Content as an error the model should correct.
	IsError bool
	// Images are pictures the result shows the model beside Content,
	// each a file herald keeps (chat.Image.Path): the history keeps
	// where they are, and each model request loads them as a person's
	// pictures are.
	Images []chat.Image
	// EndTurn ends the turn after this call (as sessions.TurnClarify): no
	// further model call is made, later calls of the same batch are
	// skipped, and Reply is the turn's reply. clarify asks its question so.
	EndTurn bool
	Reply   string
}

// JSON is a Result whose content is v encoded as JSON.
func JSON(v any) Result {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult("the tool's result could not be encoded: " + err.Error())
	}
	return Result{Content: string(b)}
}

// errorResult is the one shape of every error the model sees.
func errorResult(msg string) Result {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	return Result{Content: string(b), IsError: true}
}

// errorText is the message of err for the model (errs.Reason).
func errorText(err error) string { return errs.Reason(err) }

// callIDKey keys the id of the tool call a handler runs (CallID).
type callIDKey struct{}

func withCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallID is the id the model gave the tool call a handler runs under
// ctx; empty outside a call. A turn run again after a crash repeats the
// calls its model repeats, so a handler that names what it makes after
// the turn's entry and its call names it the same on both runs.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// Turn is what a handler knows of the turn it runs in. One Turn lives for
// one turn and is shared by its tool calls.
type Turn struct {
	Conv    string        // the conversation key
	User    string        // whose turn it is: the key of the user's notes; may be empty
	Origin  outbox.Target // where the turn's reply goes
	EntryID string        // the queued entry the turn runs
	// Workspace, when set, is where the workspace tools work for this
	// turn, in place of their configured directory: a sub-agent's own
	// worktree.
	Workspace string

	mu     sync.Mutex
	queued []outbox.Message
	writes []Write
}

// Write is a durable decision a tool makes (a delegation's dispatch, a
// note), written with the turn's commit or not at all: the agent hands
// the turn's writes to the commit as its sessions.Write values.
type Write interface {
	// WriteKind names the write's kind, "<domain>.<name>".
	WriteKind() string
}

// Queue adds m to the messages the turn commits with its reply. Tools
// never write to the outbox themselves: the turn commits its outbox
// messages, its history and the ack of its entry in one atomic step, so a
// turn that is retried after a crash does not send twice. m.Conv defaults
// to the turn's conversation.
func (t *Turn) Queue(m outbox.Message) {
	if m.Conv == "" {
		m.Conv = t.Conv
	}
	t.mu.Lock()
	t.queued = append(t.queued, m)
	t.mu.Unlock()
}

// Queued returns the messages queued so far, in order.
func (t *Turn) Queued() []outbox.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]outbox.Message(nil), t.queued...)
}

// Write adds w to the other domains' writes the turn commits with its
// reply (sessions.Finish.Writes): a tool that decides something durable
// (a delegation's dispatch) has it written with the turn or not at all.
func (t *Turn) Write(w Write) {
	t.mu.Lock()
	t.writes = append(t.writes, w)
	t.mu.Unlock()
}

// Writes returns the writes added so far, in order.
func (t *Turn) Writes() []Write {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Write(nil), t.writes...)
}

// Gate decides whether an action that may need a person's approval
// runs: a terminal command (each one, so that approvals.deny holds for
// every command), or a call of a tool the gate names (Registry.GateWith).
// The approvals capability is the gate.
type Gate interface {
	// Ask returns nil to run the action, or an error the model reads
	// (denied, refused, no answer in time). It may wait for a person,
	// holding the turn.
	Ask(ctx context.Context, turn *Turn, req ApprovalRequest) error
}

// ApprovalRequest is an action a Gate is asked about.
type ApprovalRequest struct {
	// Tool is the tool that would run: "terminal" for a command.
	Tool string
	// Action is what would run, as a person is shown it: the command, or
	// the tool's arguments.
	Action string
	// Reason says why it asks ("matches the dangerous-command pattern
	// …", "approvals.tools names it"); empty for a command that matched
	// nothing, which the gate only checks against approvals.deny.
	Reason string
	// Pattern is what a session or always grant of it allows: the
	// matched dangerous pattern, or the tool's name.
	Pattern string
}
