package sessions

import (
	"context"
	"sync"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/outbox"
)

// TurnInput is what one turn runs on.
type TurnInput struct {
	Conv  string // the conversation key; empty means Entry.Conv
	Entry Entry  // the entry the turn answers; user and synthetic entries alike become a user message
	// Images are the pictures the entry's user message shows the model,
	// made from its attachments by the media capability, which then
	// leaves in Entry.Attachments only what it did not take (the agent
	// names those in a line each).
	Images  []chat.Image
	History []chat.Message // the conversation's history before this turn, oldest first
	Origin  outbox.Target
	// User keys the user's notes (the memory tool). Empty means the
	// entry's User, else its sender qualified by Origin's platform
	// ("telegram:42"), so ids on two platforms never share notes.
	User string
	// Steer, when set, feeds text into the running turn: each message is
	// appended as a user message after the next batch of tool results.
	// Messages still in the queue when Run returns were not seen by the
	// model; the caller queues them as the next turn.
	Steer *SteerQueue
	// Controls is what the turn's claim found of the conversation's
	// session controllers' states (Turn.Uncontrolled): none, so the
	// controllers' runner reads none after it; some; or, when the claim
	// did not look, unknown.
	Controls Controls
	// Workspace, when set, is the directory the turn's workspace tools
	// work in, in place of the configured one (a sub-agent's worktree).
	Workspace string
	// Observe, when set, is told of each message the turn adds to its
	// history as it is added (a sub-agent's live transcript). It is
	// called on the turn's goroutine and must return quickly.
	Observe func(chat.Message)
	// Progress, when set, is told what the turn does as it goes (a tool
	// is about to run), so the chat can show it. It is called on the
	// turn's goroutine and must return quickly.
	Progress func(Progress)
	// Delta, when set, is told each piece of text the model streams, as
	// it arrives: the text of every model call of the turn, those that
	// then call tools included, a blank line between calls. The reply in
	// the outbox stays the truth. Called on the turn's goroutine; it
	// must return quickly.
	Delta func(text string)
}

// Controls is what a turn's claim found of its conversation's session
// controllers' states (package controllers).
type Controls int8

const (
	ControlsUnknown Controls = iota // the claim did not look
	ControlsNone                    // the conversation has none
	ControlsSome                    // it has at least one
)

// Progress is one step of a running turn, as shown to the chat.
type Progress struct {
	Tool string // the tool about to run
}

// TurnEnd says how a turn ended.
type TurnEnd string

const (
	// TurnDone: the model replied without calling tools.
	TurnDone TurnEnd = "done"
	// TurnClarify: the model asked the user a question; it is the reply.
	TurnClarify TurnEnd = "clarify"
	// TurnBudget: the turn used its model calls; the reply says so.
	TurnBudget TurnEnd = "budget"
	// TurnModelError: a model call failed; the reply is one line saying
	// why and what to do.
	TurnModelError TurnEnd = "model_error"
	// TurnInterrupted: the turn's context ended (interrupt, /stop,
	// shutdown). There is no reply: the caller decides what to say.
	TurnInterrupted TurnEnd = "interrupted"
)

// What a turn's reply says of the turn, in its outbox.Message.Meta (and
// so in the timeline): how it ended (a TurnEnd), the tokens its model
// calls used, and on TurnModelError the failure's class (llm.Class). The
// local API answers with them.
const (
	ReplyMetaEnd              = "herald.end"
	ReplyMetaPromptTokens     = "herald.prompt_tokens"
	ReplyMetaCompletionTokens = "herald.completion_tokens"
	ReplyMetaErrorClass       = "herald.error_class"
	// ReplyMetaRetryAt is, on TurnModelError, when the failure says a
	// new try may succeed (a rate limit's wait, the keys cooling until a
	// time), RFC 3339 by the turn's clock; absent when it says nothing.
	ReplyMetaRetryAt = "herald.retry_at"
	// ReplyMetaCut is "length" when the model stopped the reply at its
	// output bound (its last call's finish reason).
	ReplyMetaCut = "herald.cut"
	// ReplyMetaStreamed is the platform's id of the message that showed
	// the reply as it was written (TurnStream), so that whichever
	// process delivers the reply can make that message the reply.
	ReplyMetaStreamed = "herald.streamed"
)

// TurnOutput is what a turn produced, ready for Store.Finish.
type TurnOutput struct {
	// History is what the turn adds to the conversation's history: the
	// user message, the assistant's tool calls with every result, steered
	// messages and the final reply. An assistant message with tool calls
	// is always followed by a result for each call.
	History []chat.Message
	// Outbox is what the turn sends: messages queued by tools, in order,
	// then the reply to Origin (Kind "reply", ReplyTo the entry's platform
	// message id), when there is one.
	Outbox []outbox.Message
	// Writes are other domains' writes the turn's tools made (a
	// delegation's dispatch), committed with the turn (Finish.Writes).
	Writes     []Write
	End        TurnEnd
	ModelCalls int
	// InputTokens and OutputTokens sum the usage the model server
	// reported for the turn's calls (0 when it reported none), on Model.
	InputTokens, OutputTokens int
	Model                     string
	// Usage, when set, is the same tokens by the model that answered
	// each call (a fallback's under its own name), Conv left empty: the
	// worker records these in place of the sums on Model.
	Usage []Usage
	// Meta is written to the conversation's metadata with the turn's
	// commit (Finish.Meta): an empty value deletes the key.
	Meta map[string]string
	// Err is the model error behind TurnModelError, for logs and metrics;
	// the user already has its one-line reading in the reply.
	Err error
}

// TurnRunner runs turns. Run returns an error only when ctx ended; the
// output then holds what was done so far (End TurnInterrupted), which the
// caller commits so the history stays whole. Run leaves *in as it was
// given: a runner that hands the next one a changed input hands it a
// copy. The output is never nil, with an error too, and is the
// caller's to change: a runner that decorates another changes the one it
// was given. Input and output go by pointer so that a chain of runners,
// on the turn's goroutine while it waits on the model, does not hold a
// copy of either in every frame.
type TurnRunner interface {
	Run(ctx context.Context, in *TurnInput) (*TurnOutput, error)
}

// SteerQueue holds the text steered into a running turn until its runner
// takes it, oldest first. It holds nothing until something is steered:
// a turn that nobody steers pays for no buffer. The zero value is an
// empty, open queue; a nil queue is empty and takes nothing.
type SteerQueue struct {
	mu     sync.Mutex
	texts  []string
	closed bool
}

// Offer adds text unless the queue is closed or already holds max texts
// not taken, and reports whether it did.
func (q *SteerQueue) Offer(text string, max int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.texts) >= max {
		return false
	}
	q.texts = append(q.texts, text)
	return true
}

// Take returns the oldest text not taken yet, or false when there is none.
func (q *SteerQueue) Take() (string, bool) {
	if q == nil {
		return "", false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.texts) == 0 {
		return "", false
	}
	text := q.texts[0]
	q.texts[0] = ""
	q.texts = q.texts[1:]
	if len(q.texts) == 0 {
		q.texts = nil
	}
	return text, true
}

// Len is how many texts wait to be taken.
func (q *SteerQueue) Len() int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.texts)
}

// Close stops the queue taking texts and returns those never taken,
// oldest first.
func (q *SteerQueue) Close() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	left := q.texts
	q.texts = nil
	return left
}
