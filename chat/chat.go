// Package chat holds what a conversation is made of as the model and the
// stored history see it, messages and the tool calls in them, and the keys
// conversations and users go by. It imports nothing of herald's but its
// errors, so that every part that speaks to a model (llm, tools) can use
// it without the conversations' queue.
package chat

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
)

// ToolCall is one tool call the model made.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one item of a conversation's history.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant, tool
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	// Images are pictures the message shows the model beside its
	// Content (a user's photo; a tool's image result).
	Images []Image   `json:"images,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Image is a picture a message shows the model. The history keeps where
// the picture is (Path, a file herald keeps), never its bytes: Data is
// filled, scaled and encoded, for each model request, and not stored.
type Image struct {
	Name string `json:"name,omitempty"` // the file's name, as the person sent it
	MIME string `json:"mime,omitempty"` // Data's type: image/jpeg, image/png, image/gif or image/webp
	Path string `json:"path,omitempty"`
	Data []byte `json:"-"`
}

// ValidateConv checks a conversation key: not empty, valid UTF-8, no
// control characters.
func ValidateConv(op, conv string) error { return validateKey(op, "conversation key", conv) }

// ValidateUser checks a user key as ValidateConv checks a conversation
// key: not blank, valid UTF-8, no control characters.
func ValidateUser(op, user string) error { return validateKey(op, "user", user) }

// validateKey checks a key a store files things under, named what in
// its errors.
func validateKey(op, what, key string) error {
	if strings.TrimSpace(key) == "" {
		return errs.E(op, errs.Invalid, "empty %s", what)
	}
	if !utf8.ValidString(key) || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errs.E(op, errs.Invalid, "%s %q has control characters or bad UTF-8", what, key)
	}
	return nil
}
