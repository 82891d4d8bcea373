package sessions

import (
	"context"
	"time"
)

// TimelineItem is one outbound message of a conversation as the local
// API shows it: replies, notices and background completions, in the order
// they were delivered.
type TimelineItem struct {
	Cursor string    `json:"cursor"`         // assigned by the store; increases within a conversation
	ID     string    `json:"id"`             // the outbox message id; a second append with it is a no-op
	Conv   string    `json:"conv"`           // the conversation
	Kind   string    `json:"kind,omitempty"` // reply, notice, completion, …
	Text   string    `json:"text"`
	At     time.Time `json:"at"` // by the store's clock
}

// Timeline keeps what was delivered to conversations of the local API.
type Timeline interface {
	// AppendTimeline adds item to its conversation's timeline and returns
	// its cursor. An item whose ID is already there adds nothing and
	// returns the first one's cursor, so a resend after a crash between
	// the append and the outbox ack is not shown twice.
	// Errors: Invalid (empty conversation or ID), TooLarge.
	AppendTimeline(ctx context.Context, item TimelineItem) (cursor string, err error)

	// ReadTimeline returns up to limit items after the cursor after ("" is
	// the start), oldest first. Errors: Invalid (a cursor the store did not
	// make).
	ReadTimeline(ctx context.Context, conv, after string, limit int) ([]TimelineItem, error)
}

// StopRequest asks whoever runs conv's turn to stop it. It goes through
// the store so that /stop reaches a turn running in another process.
type StopRequest struct {
	Cursor string
	Conv   string
	At     time.Time
}

// Stops is a short, shared log of stop requests. Each gateway process
// tails it with one read per poll, whatever number of turns it runs.
type Stops interface {
	// RequestStop appends a stop request for conv.
	RequestStop(ctx context.Context, conv string) error

	// StopRequests returns the requests after the cursor after and the
	// cursor to pass next time. after "" means "from now": no requests,
	// only the current end. Old requests are forgotten (the log keeps at
	// least the last hour).
	StopRequests(ctx context.Context, after string) ([]StopRequest, string, error)
}

// Note is one small note the agent keeps about a user (the memory tool).
type Note struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

// Notes keeps per-user notes. They outlive /new: a fresh session keeps
// what the agent remembers about its user.
type Notes interface {
	// AddNote stores a note for user and returns it. Errors: Invalid
	// (empty user or text), TooLarge.
	AddNote(ctx context.Context, user, text string) (Note, error)

	// Notes returns user's notes, oldest first.
	Notes(ctx context.Context, user string) ([]Note, error)

	// DeleteNote removes one note. Errors: NotFound.
	DeleteNote(ctx context.Context, user, id string) error
}
