// Package signals is the cluster's bus: a short, shared log of requests
// to whichever process runs what they name (stop or steer a turn, a
// domain's own kinds such as delegation.stop, wake-ups), and the tailer
// through which each process reads it and hands each signal to its
// handlers. It knows nothing of the domains it carries.
package signals

import (
	"context"
	"strings"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// Kind says what a signal asks of the process running a turn: one of
// the turn's own kinds below, or a domain's own, "<domain>.<name>"
// (delegation.stop), which the bus passes on without knowing it. Both
// parts are one or more lower-case letters, digits or '_', and there is
// one dot: a domain names its kinds, it does not nest them ("a.b.c" is
// refused), so the domain of a kind is plain to read.
type Kind string

const (
	// Stop: stop the running turn (/stop).
	Stop Kind = "stop"
	// Interrupt: a new message arrived in interrupt mode; cancel the
	// running turn at its next safe point so the new entry runs next.
	Interrupt Kind = "interrupt"
	// Steer: EntryID (already queued) carries text for the running
	// turn to take after its next tool result. If no turn takes it, the
	// entry simply runs as a turn of its own: nothing is lost.
	Steer Kind = "steer"
)

// Domain returns the domain of a domain's kind ("delegation" for
// delegation.stop), or "" for the turn's own kinds and for a kind that
// is not well-formed. A handler keeps the signals of its domain by it.
func (k Kind) Domain() string { return KindDomain(string(k)) }

// KindDomain is the domain of a kind another domain names
// "<domain>.<name>" (a signal's, a commit's write), or "" for a kind
// that is not of that form.
func KindDomain(k string) string {
	domain, name, ok := strings.Cut(k, ".")
	if !ok || !isKindPart(domain) || !isKindPart(name) {
		return ""
	}
	return domain
}

// isKindPart reports whether p is one part of a domain's kind: one or
// more lower-case letters, digits or '_'.
func isKindPart(p string) bool {
	if p == "" {
		return false
	}
	for _, r := range p {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// Signal is a request to whoever runs conv's turn, or, for a domain's
// kind, to that domain's handler in whichever process runs what Target
// names. Signals go through the store so that they reach a turn running
// in another process. A domain's signal names its conversation too: a
// stop or steer is scoped to the caller's own session by it.
type Signal struct {
	Cursor  string `json:"cursor"` // assigned by the store
	Conv    string `json:"conv"`
	Kind    Kind   `json:"kind"`
	EntryID string `json:"entry_id,omitempty"` // Steer: the queued entry
	Text    string `json:"text,omitempty"`     // Steer: its text
	// MessageID is, for Steer, the platform's id of the queued entry's
	// message, so that the turn taking it can name the message it
	// answered ("" for a message without one).
	MessageID string `json:"message_id,omitempty"`
	// Target is what inside the conversation a domain's signal is for
	// (a sub-agent's id for delegation.stop); "" for the whole turn.
	Target string    `json:"target,omitempty"`
	At     time.Time `json:"at"` // by the store's clock
}

// Check refuses a signal a Store must not keep: Invalid for a bad
// conversation key or a kind that is neither the turn's own nor
// "<domain>.<name>" (see Kind), TooLarge when the parts a caller fills
// freely (its entry id, text, message id, target, and a domain's kind)
// are over maxBytes.
func (s Signal) Check(op string, maxBytes int) error {
	if err := chat.ValidateConv(op, s.Conv); err != nil {
		return err
	}
	n := len(s.EntryID) + len(s.Text) + len(s.MessageID) + len(s.Target)
	switch s.Kind {
	case Stop, Interrupt, Steer:
	default:
		if s.Kind.Domain() == "" {
			return errs.E(op, errs.Invalid, "unknown signal kind %q: want stop, interrupt, steer or <domain>.<name> of lower-case letters, digits and '_'", s.Kind)
		}
		// A domain chooses its kinds' names, so they are bounded too.
		n += len(s.Kind)
	}
	if n > maxBytes {
		return errs.E(op, errs.TooLarge, "signal is %d bytes, over the limit of %d", n, maxBytes)
	}
	return nil
}

// Store is a short, shared log of signals. Each gateway process tails it
// with one read per poll, whatever number of turns it runs. Every method
// may return errs.Closed after the backend's Close and errs.Unavailable
// when it cannot be reached.
type Store interface {
	// Signal appends s (Cursor and At are set by the store).
	// Errors: Invalid (empty conversation, unknown or malformed kind),
	// TooLarge.
	Signal(ctx context.Context, s Signal) error

	// SignalsAfter returns up to limit signals after the cursor after, oldest
	// first, and the cursor to pass next time. after "" means "from now":
	// no signals, only the current end. Old signals are forgotten (the log
	// keeps at least the last hour). Errors: Invalid (a cursor the store
	// did not make).
	SignalsAfter(ctx context.Context, after string, limit int) ([]Signal, string, error)
}
