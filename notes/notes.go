// Package notes keeps the small notes the agent keeps about each user
// (the memory tool). They outlive /new: a fresh session keeps what the
// agent remembers about its user. A turn writes them in its commit (Add,
// Remove, written in the same fenced step as the turn's ack), so a turn
// that lost its lease writes none.
package notes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// Note is one small note the agent keeps about a user.
type Note struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

// Check refuses a note a Store must not keep: Invalid for a bad user
// key or a blank text, TooLarge for a text over maxBytes.
func Check(op, user, text string, maxBytes int) error {
	if err := chat.ValidateUser(op, user); err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return errs.E(op, errs.Invalid, "empty note")
	}
	if len(text) > maxBytes {
		return errs.E(op, errs.TooLarge, "note is %d bytes, over the limit of %d", len(text), maxBytes)
	}
	return nil
}

// Store keeps per-user notes. AddNote and DeleteNote write at once, for
// what runs outside a turn; a turn writes Add and Remove in its commit
// instead. Every method may return errs.Closed after the backend's Close
// and errs.Unavailable when it cannot be reached.
type Store interface {
	// AddNote stores a note for user and returns it. Errors: Invalid
	// (empty user or text), TooLarge.
	AddNote(ctx context.Context, user, text string) (Note, error)

	// Notes returns user's notes, oldest first. Errors: Invalid (a bad
	// user key).
	Notes(ctx context.Context, user string) ([]Note, error)

	// DeleteNote removes one note. Errors: NotFound.
	DeleteNote(ctx context.Context, user, id string) error
}

// MaxIDBytes bounds a note id an Add names.
const MaxIDBytes = 64

// NewID returns a fresh note id, "n_<16 hex>", for an Add.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "n_" + hex.EncodeToString(b[:])
}

// Add adds a note for User in a turn's commit (a sessions.Write). ID is
// chosen by the writer (NewID), so the turn can name the note before it
// is written; a second Add of the same user and id adds nothing.
type Add struct {
	User, ID, Text string
}

// WriteKind is "notes.add".
func (Add) WriteKind() string { return "notes.add" }

// Check refuses an Add a store must not apply: as Check, and Invalid
// for an empty id or one over MaxIDBytes.
func (n Add) Check(op string, maxBytes int) error {
	if err := Check(op, n.User, n.Text, maxBytes); err != nil {
		return err
	}
	return checkID(op, n.ID)
}

// Remove removes User's note ID in a turn's commit (a sessions.Write).
// A note that is not there (removed since) is no error: the commit goes
// through.
type Remove struct {
	User, ID string
}

// WriteKind is "notes.remove".
func (Remove) WriteKind() string { return "notes.remove" }

// Check refuses a Remove a store must not apply: Invalid for a bad user
// key or a bad id.
func (n Remove) Check(op string) error {
	if err := chat.ValidateUser(op, n.User); err != nil {
		return err
	}
	return checkID(op, n.ID)
}

func checkID(op, id string) error {
	if strings.TrimSpace(id) == "" || len(id) > MaxIDBytes {
		return errs.E(op, errs.Invalid, "note id %q is empty or over %d bytes", id, MaxIDBytes)
	}
	return nil
}
