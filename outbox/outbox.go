// Package outbox holds herald's outbound messages: replies, notices,
// background completions and scheduled reports waiting to be sent to a
// platform. An entry leaves the outbox only when the platform accepted it
// (Ack) or when it is dead-lettered with a reason a person can read.
package outbox

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Target is where a message goes: a platform, a chat on it and optionally
// a thread. Its text form is "platform:chat[:thread]".
type Target struct {
	Platform string
	Chat     string
	Thread   string `json:",omitempty"`
}

// ParseTarget reads "platform:chat[:thread]". The chat may not contain a
// colon; the thread is everything after the second colon.
func ParseTarget(s string) (Target, error) {
	const op = "outbox.ParseTarget"
	platform, rest, ok := strings.Cut(s, ":")
	if !ok || platform == "" || rest == "" {
		return Target{}, errs.E(op, errs.Invalid, "target %q is not platform:chat[:thread]", s)
	}
	chat, thread, _ := strings.Cut(rest, ":")
	if chat == "" {
		return Target{}, errs.E(op, errs.Invalid, "target %q has an empty chat", s)
	}
	return Target{Platform: platform, Chat: chat, Thread: thread}, nil
}

func (t Target) String() string {
	s := t.Platform + ":" + t.Chat
	if t.Thread != "" {
		s += ":" + t.Thread
	}
	return s
}

// Validate reports an Invalid error for a target without platform or chat.
func (t Target) Validate() error {
	if t.Platform == "" || t.Chat == "" {
		return errs.E("outbox.Target", errs.Invalid, "target %q needs a platform and a chat", t.String())
	}
	return nil
}

// Message is one outbound message. Its encoding (Encode) leaves out the
// fields that are empty, as a new message's store-kept fields (ID,
// Attempts, NextAttempt, CreatedAt, LastError) are: the stores keep those
// beside the encoded message and set them when they read it back.
type Message struct {
	ID      string `json:",omitempty"` // assigned by the store
	Target  Target // where it goes
	Conv    string `json:",omitempty"` // the conversation it belongs to, if any
	Text    string // the body, in herald's markdown; the adapter renders and splits it
	ReplyTo string `json:",omitempty"` // platform message id to reply to, if any
	Kind    string `json:",omitempty"` // "reply", "notice", "completion", "cron", …
	// Ref names what the message reports on for the domain that sent it
	// (a cron run's id), so the domain can be told how its delivery went.
	Ref            string    `json:",omitempty"`
	IdempotencyKey string    `json:",omitempty"` // a second Enqueue with the same key is a no-op
	Attempts       int       `json:",omitempty"` // failed send attempts so far
	NextAttempt    time.Time `json:",omitzero"`  // not claimed before this time
	CreatedAt      time.Time `json:",omitzero"`
	LastError      string    `json:",omitempty"` // the reason of the last failure, or of the dead-letter
	// Meta are facts about the message for whoever reads it back (the
	// local API reads a reply's turn end and token usage from it); the
	// platforms ignore them. Counted in the message's size.
	Meta map[string]string `json:",omitempty"`
	// Files are what the message sends besides its Text, which is then
	// their caption: each goes as a photo when Photo is set, else as a
	// document.
	Files []File `json:",omitempty"`
	// Parts is how far an earlier attempt at a message sent in parts got,
	// kept by the store (KeepParts) and set when it reads the message back:
	// the adapter sends only the parts after them.
	Parts Parts `json:",omitzero"`
	// Buttons are choices shown under the message, in order (an
	// approval's four): Telegram's inline keyboard, Slack's Block Kit
	// buttons, Discord's components. A press comes back as an inbound
	// message from the person who pressed, whose text is the button's
	// Data and whose sessions.MetaPressed is this message's platform id;
	// the adapter acknowledges the press once it was delivered.
	Buttons []Button `json:",omitempty"`
	// Edits, when set, is the platform's id of a message in Target that
	// this one replaces: its text becomes Text and its buttons go (an
	// answered approval). A platform that cannot edit it sends Text as
	// a new message.
	Edits string `json:",omitempty"`
}

// MetaSentID is the Meta key under which a message a domain is told
// was accepted (delivery's Settled) carries the platform's id of its
// (first) message: an approval's question learns what to edit so.
const MetaSentID = "herald.sent_id"

// Button is one choice under a message. Data is at most 64 bytes
// (Telegram's limit on a callback's data), and is what a press delivers
// as the text of an inbound message.
type Button struct {
	Text string
	Data string
}

// File is a file a message sends. Its bytes are kept in the store
// (media.Store) under Blob until the message was accepted; the delivery
// worker reads them into Data for the adapter's Send. Data is never
// encoded with the message.
type File struct {
	Name  string
	MIME  string `json:",omitempty"`
	Size  int64
	Blob  string
	Photo bool   `json:",omitempty"` // an image sent as a picture, not as a document
	Data  []byte `json:"-"`
}

// Parts is how far a message sent in parts got: the parts its platform
// accepted, in order, from the first. An adapter renders a message into
// the same parts every time, so the count says which are left.
type Parts struct {
	Done  int    `json:"done"`            // parts the platform accepted
	First string `json:"first,omitempty"` // the platform's id of the first part
	// Mode is the adapter's own word on how the parts left are to go (a
	// platform that refused the formatting: "plain"; an interaction whose
	// follow-ups were refused: "channel"); empty for the usual way.
	Mode string `json:"mode,omitempty"`
	// Unstreamed: the platform refused to edit the reply shown in progress
	// into the first part, which was posted anew; the message shown is
	// deleted once every part went, by whichever attempt sends the last.
	Unstreamed bool `json:"unstreamed,omitempty"`
}

// MaxPartsBytes bounds an encoded Parts: a count, an id and a word.
const MaxPartsBytes = 1024

// EncodeParts validates p and returns it encoded, ready to store; empty
// for the zero Parts. Backends call it so that both accept the same.
func EncodeParts(op string, p Parts) ([]byte, error) {
	if p == (Parts{}) {
		return nil, nil
	}
	if p.Done < 0 {
		return nil, errs.E(op, errs.Invalid, "a message cannot have %d parts sent", p.Done)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if len(b) > MaxPartsBytes {
		return nil, errs.E(op, errs.TooLarge, "parts record is %d bytes, over the limit of %d", len(b), MaxPartsBytes)
	}
	return b, nil
}

// DecodeParts reads what EncodeParts wrote; empty is the zero Parts.
func DecodeParts(op string, b []byte) (Parts, error) {
	var p Parts
	if len(b) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, errs.Wrap(op, errs.Internal, err)
	}
	return p, nil
}

// Claimed is a message held by one delivery worker until Expires. Ack,
// Release, Postpone and Dead check Token: a claim that expired and was taken
// by another worker can no longer change the message.
type Claimed struct {
	Message
	Token   int64
	Expires time.Time
	// Resend is set when the message's earlier claim ended with nothing
	// written: its holder ran out of time or died, and may have sent it.
	// Sending it again may show it twice; the delivery worker counts it.
	Resend bool
}

// DefaultClaimTTL is how long Claim holds messages when given no ttl.
const DefaultClaimTTL = 30 * time.Second

// Store keeps the outbox. Every method may return errs.Closed after Close
// and errs.Unavailable when the backend cannot be reached.
type Store interface {
	// Enqueue adds m and returns its id. With an IdempotencyKey seen before
	// (within the store's dedupe window) it adds nothing and returns the
	// first message's id with dup set. Errors: Invalid (bad target),
	// TooLarge.
	Enqueue(ctx context.Context, m Message) (id string, dup bool, err error)

	// Claim takes up to max messages that are due and whose platform is in
	// platforms, oldest due first, and holds them for ttl (DefaultClaimTTL
	// when ttl is zero or less). Messages for
	// other platforms (a route with no adapter right now) stay pending and
	// spend no attempt. A claim that is not acked in time is due again.
	//
	// Messages to one target leave in the order they were enqueued: a
	// message is claimed only while every earlier one to its target that
	// is not dead is held by worker (claimed before, or by this call, in
	// order), so none is sent while an earlier one waits, is held by
	// another worker, or by one that died. A dead letter holds nothing up.
	// (A backend that shards its outbox keeps this order within a shard;
	// Redis's keeps a target's messages of one conversation in one, see
	// docs/delivery.md.)
	// Before it claims, Claim ends the claims of every other worker whose
	// Beat ran out (by the store's clock): that worker is gone, and its
	// messages are due at once rather than when their claims run out.
	Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]Claimed, error)

	// Beat tells the store that worker is alive for ttl more; a worker
	// that beats and then stops for longer than ttl is taken for dead, and
	// its claims end (see Claim). A ttl of zero or less says the worker
	// leaves: it is forgotten, and its claims run their course. A worker
	// that never beats holds its claims until they run out.
	Beat(ctx context.Context, worker string, ttl time.Duration) error

	// KeepParts records, under c's claim, how far c's message sent in
	// parts got, so that a later attempt (by any worker) sends only the
	// parts left; the claims that follow read it back in Message.Parts.
	// Errors: LeaseLost, NotFound, Invalid, TooLarge.
	KeepParts(ctx context.Context, c Claimed, p Parts) error

	// Ack removes a message the platform accepted. Errors: LeaseLost when
	// the claim expired and was taken by another worker, NotFound.
	Ack(ctx context.Context, c Claimed) error

	// AckAll acks each of cs, in one call to the store: acked[i] is what
	// Ack(cs[i]) would have returned (nil, LeaseLost or NotFound), and one
	// refused ack does not stop the others. When the call itself fails
	// (Closed, Unavailable) it returns only that error, and which of cs
	// were acked is not known: their claims run out as when an Ack fails.
	AckAll(ctx context.Context, cs []Claimed) (acked []error, err error)

	// Release gives a message back after a failed attempt: it counts the
	// attempt, records reason and makes the message due at next.
	// Errors: LeaseLost, NotFound.
	Release(ctx context.Context, c Claimed, next time.Time, reason string) error

	// Postpone gives a message back without counting an attempt (the
	// route went away between claim and send). Errors: LeaseLost, NotFound.
	Postpone(ctx context.Context, c Claimed, next time.Time) error

	// Dead moves a message to the dead-letter list with reason.
	// Errors: LeaseLost, NotFound.
	Dead(ctx context.Context, c Claimed, reason string) error

	// Pending lists up to limit messages not yet delivered (claimed or not),
	// oldest first.
	Pending(ctx context.Context, limit int) ([]Message, error)

	// DeadLetters lists up to limit dead-lettered messages, oldest first.
	DeadLetters(ctx context.Context, limit int) ([]Message, error)

	// Unsent reports whether any message to target is not delivered yet:
	// pending or claimed, not dead. A message shown to target outside the
	// outbox while one is would appear above it. Errors: Invalid (bad
	// target), Closed, Unavailable.
	Unsent(ctx context.Context, target Target) (bool, error)

	// Requeue makes a dead-lettered message pending again, due now, with
	// its attempts reset. Errors: NotFound (no dead message with that id).
	Requeue(ctx context.Context, id string) error
}

// Encode validates m and returns it encoded, ready to store. Backends call
// it so that both accept exactly the same input.
func Encode(op string, m *Message, maxBytes int) ([]byte, error) {
	if err := m.Target.Validate(); err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if maxBytes > 0 && len(b) > maxBytes {
		return nil, errs.E(op, errs.TooLarge, "message is %d bytes, over the limit of %d", len(b), maxBytes)
	}
	return b, nil
}
