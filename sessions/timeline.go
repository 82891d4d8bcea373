package sessions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
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
	// ReplyTo is the id of the inbound message this one answers (the
	// message_id a post was given), empty for a message that answers
	// none: a notice, a background completion, a send_message.
	ReplyTo string `json:"reply_to,omitempty"`
	// Meta is the outbox message's (outbox.Message.Meta): what the turn
	// that sent a reply says of it (how it ended, its token usage).
	Meta map[string]string `json:"meta,omitempty"`
	// Files are the files the message sent (outbox.Message.Files), its
	// Text their caption.
	Files []TimelineFile `json:"files,omitempty"`
}

// TimelineFile is a file a timeline item sent: its name, type and size,
// and the path the local API serves its bytes at.
type TimelineFile struct {
	Name string `json:"name"`
	MIME string `json:"mime,omitempty"`
	Size int64  `json:"size"`
	URL  string `json:"url"`
}

// EncodeFiles is files as the stores keep them: JSON, "" when empty.
func EncodeFiles(files []TimelineFile) string {
	if len(files) == 0 {
		return ""
	}
	b, _ := json.Marshal(files) // strings and numbers always encode
	return string(b)
}

// DecodeFiles reads what EncodeFiles wrote.
func DecodeFiles(s string) ([]TimelineFile, error) {
	if s == "" {
		return nil, nil
	}
	var files []TimelineFile
	err := json.Unmarshal([]byte(s), &files)
	return files, err
}

// EncodeMeta is meta as the stores keep it: JSON, "" when empty.
func EncodeMeta(meta map[string]string) string {
	if len(meta) == 0 {
		return ""
	}
	b, _ := json.Marshal(meta) // a map of strings always encodes
	return string(b)
}

// DecodeMeta reads what EncodeMeta wrote.
func DecodeMeta(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var meta map[string]string
	err := json.Unmarshal([]byte(s), &meta)
	return meta, err
}

// Check refuses an item a Timeline must not keep: Invalid for a bad
// conversation key or an empty ID, TooLarge when what is stored of it
// (its id, kind, text, reply_to, meta and files) is over lim.MaxEntryBytes.
func (it TimelineItem) Check(op string, lim Limits) error {
	if err := chat.ValidateConv(op, it.Conv); err != nil {
		return err
	}
	if it.ID == "" {
		return errs.E(op, errs.Invalid, "empty timeline item id")
	}
	if n := len(it.ID) + len(it.Kind) + len(it.Text) + len(it.ReplyTo) + len(EncodeMeta(it.Meta)) + len(EncodeFiles(it.Files)); n > lim.MaxEntryBytes {
		return errs.E(op, errs.TooLarge, "timeline item is %d bytes, over the limit of %d", n, lim.MaxEntryBytes)
	}
	return nil
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

	// TimelineEnd returns the cursor of conv's newest item, or "" when it
	// has none: a read after it returns only the items added since.
	// Errors: Invalid (a bad conversation key).
	TimelineEnd(ctx context.Context, conv string) (cursor string, err error)
}
