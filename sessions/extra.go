package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
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
// (its id, kind, text, reply_to and meta) is over lim.MaxEntryBytes.
func (it TimelineItem) Check(op string, lim Limits) error {
	if err := chat.ValidateConv(op, it.Conv); err != nil {
		return err
	}
	if it.ID == "" {
		return errs.E(op, errs.Invalid, "empty timeline item id")
	}
	if n := len(it.ID) + len(it.Kind) + len(it.Text) + len(it.ReplyTo) + len(EncodeMeta(it.Meta)); n > lim.MaxEntryBytes {
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

// Note is one small note the agent keeps about a user (the memory tool).
type Note struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

// CheckNote refuses a note a Notes store must not keep: Invalid for a
// bad user key or a blank text, TooLarge for a text over
// lim.MaxEntryBytes.
func CheckNote(op, user, text string, lim Limits) error {
	if err := chat.ValidateUser(op, user); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return errs.E(op, errs.Invalid, "empty note")
	}
	if len(text) > lim.MaxEntryBytes {
		return errs.E(op, errs.TooLarge, "note is %d bytes, over the limit of %d", len(text), lim.MaxEntryBytes)
	}
	return nil
}

// Notes keeps per-user notes. They outlive /new: a fresh session keeps
// what the agent remembers about its user. A turn writes them in its
// commit (NoteAdd, NoteRemove), so a turn that lost its lease writes
// none; AddNote and DeleteNote write at once, for what runs outside a
// turn.
type Notes interface {
	// AddNote stores a note for user and returns it. Errors: Invalid
	// (empty user or text), TooLarge.
	AddNote(ctx context.Context, user, text string) (Note, error)

	// Notes returns user's notes, oldest first.
	Notes(ctx context.Context, user string) ([]Note, error)

	// DeleteNote removes one note. Errors: NotFound.
	DeleteNote(ctx context.Context, user, id string) error
}

// MaxNoteIDBytes bounds a note id a NoteAdd names.
const MaxNoteIDBytes = 64

// NewNoteID returns a fresh note id, "n_<16 hex>", for a NoteAdd.
func NewNoteID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "n_" + hex.EncodeToString(b[:])
}

// NoteAdd adds a note for User in a turn's commit (the memory tool).
// ID is chosen by the writer (NewNoteID), so the turn can name the note
// before it is written; a second NoteAdd of the same user and id adds
// nothing.
type NoteAdd struct {
	User, ID, Text string
}

// WriteKind is "sessions.note_add".
func (NoteAdd) WriteKind() string { return "sessions.note_add" }

// Check refuses a NoteAdd a store must not apply: as CheckNote, and
// Invalid for an empty id or one over MaxNoteIDBytes.
func (n NoteAdd) Check(op string, lim Limits) error {
	if err := CheckNote(op, n.User, n.Text, lim); err != nil {
		return err
	}
	return checkNoteID(op, n.ID)
}

// NoteRemove removes User's note ID in a turn's commit. A note that is
// not there (removed since) is no error: the commit goes through.
type NoteRemove struct {
	User, ID string
}

// WriteKind is "sessions.note_remove".
func (NoteRemove) WriteKind() string { return "sessions.note_remove" }

// Check refuses a NoteRemove a store must not apply: Invalid for a bad
// user key or a bad id.
func (n NoteRemove) Check(op string) error {
	if err := chat.ValidateUser(op, n.User); err != nil {
		return err
	}
	return checkNoteID(op, n.ID)
}

func checkNoteID(op, id string) error {
	if strings.TrimSpace(id) == "" || len(id) > MaxNoteIDBytes {
		return errs.E(op, errs.Invalid, "note id %q is empty or over %d bytes", id, MaxNoteIDBytes)
	}
	return nil
}
