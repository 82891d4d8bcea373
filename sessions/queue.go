// Package sessions holds conversations: the per-conversation turn queue,
// the lease that lets one worker in the cluster run a conversation's turn,
// and the conversation's history and metadata.
package sessions

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Kind says who an entry comes from.
type Kind string

const (
	// KindUser is a message a person sent.
	KindUser Kind = "user"
	// KindSynthetic is a message herald itself queues into a conversation
	// (a sub-agent's result, a cron fire, a controller's tick). It is taken
	// only when no user entry is waiting.
	KindSynthetic Kind = "synthetic"
)

// Priority orders entries of the same kind: higher first, FIFO within one
// priority.
type Priority int8

const (
	PriorityLow    Priority = -1
	PriorityNormal Priority = 0
	PriorityHigh   Priority = 1
)

// Lanes is the number of queues a conversation has: one per kind and
// priority. Backends keep a FIFO per lane and take from the lowest
// non-empty lane.
const Lanes = 6

// AttachmentKind is what a file is to the agent: an image it can see, a
// voice note or other audio it hears through a transcript, or any other
// document it reads from the disk.
type AttachmentKind string

const (
	AttachImage    AttachmentKind = "image"
	AttachVoice    AttachmentKind = "voice" // a voice note
	AttachAudio    AttachmentKind = "audio"
	AttachDocument AttachmentKind = "document"
)

// Attachment is a file that came with a message: its metadata and where
// to get it again. The bytes are not in the entry: the turn that runs it
// finds them under $HERALD_HOME/files/<conversation>/, or fetches them
// again by the platform's reference (adapters.Fetcher), or, for an upload
// through the local API, which no platform can give again, reads them
// from the store (Blob) until the turn has committed. No reference holds
// a secret: a URL that needs the bot's token gets it from the adapter at
// fetch time.
type Attachment struct {
	Name       string         `json:"name,omitempty"`
	MIME       string         `json:"mime,omitempty"`
	Size       int64          `json:"size,omitempty"` // as the platform told it; 0 when it did not
	Kind       AttachmentKind `json:"kind,omitempty"` // empty reads as AttachDocument
	URL        string         `json:"url,omitempty"`
	PlatformID string         `json:"platform_id,omitempty"`
	// Blob is the id of the bytes kept in the store (media.Store), for a
	// file no platform can give again.
	Blob string `json:"blob,omitempty"`
}

// Inbound is what an adapter (or a synthetic source) hands to the queue.
type Inbound struct {
	Conv        string            `json:"conv"`                  // conversation key, e.g. "telegram:123"
	Sender      string            `json:"sender,omitempty"`      // platform user id
	MessageID   string            `json:"message_id,omitempty"`  // platform message id; the dedupe key when set
	Text        string            `json:"text"`                  // the message text
	Attachments []Attachment      `json:"attachments,omitempty"` // files that came with it
	Kind        Kind              `json:"kind"`                  // user or synthetic; empty means user
	Priority    Priority          `json:"priority,omitempty"`    // within the kind
	Meta        map[string]string `json:"meta,omitempty"`        // platform extras (reply-to, thread, …)
	// User is whom the entry is for when it is not the sender's own
	// message: a synthetic entry (a sub-agent's result, a cron fire)
	// names the conversation's user, so that the agent's per-user
	// features (notes) work on it. Empty means the sender.
	User string `json:"user,omitempty"`
}

// UserKey is whom in is for, as the agent keys the user's notes: its
// User, else its sender qualified by the platform its replies go to
// ("telegram:42"), so ids on two platforms never share notes; "" when
// it names no one.
func (in Inbound) UserKey(platform string) string {
	switch {
	case in.User != "":
		return in.User
	case in.Sender == "":
		return ""
	case platform != "":
		return platform + ":" + in.Sender
	}
	return in.Sender
}

// Lane is the queue an entry goes to: user entries before synthetic ones,
// then higher priority first.
func (in Inbound) Lane() int {
	p := in.Priority
	if p > PriorityHigh {
		p = PriorityHigh
	}
	if p < PriorityLow {
		p = PriorityLow
	}
	lane := int(PriorityHigh - p) // 0, 1, 2
	if in.Kind == KindSynthetic {
		lane += 3
	}
	return lane
}

// Entry is a queued inbound as a worker sees it.
type Entry struct {
	Inbound
	ID         string    // assigned by the store; opaque
	EnqueuedAt time.Time // by the store's clock
	Deliveries int       // times handed to a lease holder, this one included
}

// AppendResult tells what Append did.
type AppendResult struct {
	EntryID   string // the new entry, or the first one when Duplicate
	Duplicate bool   // the MessageID was seen within the dedupe window
	// Meta is the conversation's metadata (see Store.Meta) as it stood
	// when a new entry was queued, so the router knows the busy input
	// mode and the running turn without a read of its own. Nil when
	// Duplicate, when the store could not read it, and when AppendClaim
	// started the entry's turn: no turn was running then, and the router
	// has nothing to tell one.
	Meta map[string]string
	// Held says a live lease held the conversation when the new entry was
	// queued: a turn of it may be running in another process, or be
	// about to run under a lease that has no entry handed out (and so no
	// ConvMetaTurn in Meta). False when Duplicate and when AppendClaim
	// started the entry's turn.
	Held bool
}

// Lease is one worker's hold on a conversation. Token increases with every
// grant of the conversation; every write made under the lease checks it, so
// a worker whose lease was taken over cannot commit anything.
type Lease struct {
	Conv    string
	Worker  string
	Token   int64
	Expires time.Time // by the store's clock
}

// Turn is a claimed conversation and the entry to run now.
type Turn struct {
	Lease Lease
	Entry Entry
	// History is the conversation's history, oldest first, as History
	// would have returned it right after the claim, when HistoryRead is
	// set: the claim brings it, so the worker that runs the turn makes no
	// read of its own. A backend that could not read it with the claim
	// leaves HistoryRead false, and the worker reads it itself.
	History     []chat.Message
	HistoryRead bool
	// Uncontrolled is set when the claim found, with the history, that
	// the conversation has no session controller's state (a goal, a
	// loop, a heartbeat; package controllers): its turn's controllers
	// read none. A backend that did not look leaves it unset.
	Uncontrolled bool
}

// Finish is what a turn commits in one atomic step.
type Finish struct {
	EntryID string // the entry to ack
	// Absorbed are other queued entries of the conversation that the turn
	// took in (steer); they are removed in the same step. An entry that is
	// not queued any more makes Finish fail with NotFound.
	Absorbed []string
	History  []chat.Message   // appended to the conversation's history
	Outbox   []outbox.Message // enqueued for delivery
	Release  bool             // give the lease back in the same step
	// DropHistory removes that many of the oldest messages of the stored
	// history (all of them when it has fewer) before History is appended,
	// in the same step: a bound on what a conversation keeps. Negative is
	// Invalid.
	DropHistory int
	// Meta is written to the conversation's metadata in the same step,
	// each key as SetMeta writes it: an empty value deletes the key.
	Meta map[string]string
	// Handoff, when set, has the store enqueue Outbox already claimed for
	// a delivery worker, as outbox.Store.Claim would have claimed them,
	// so that the worker sends them at once, without a claim of its own.
	Handoff *Handoff
	// Writes are other domains' writes (see Write) applied in the same
	// step, under the same fencing token: a turn that lost its lease
	// writes none of them. A kind the store does not apply makes the
	// Finish fail with Invalid, having written nothing.
	Writes []Write
	// ClaimIfLeft makes FinishAndClaim claim only when the finished
	// conversation has entries left; else it claims nothing and does not
	// look for other ready conversations. A worker that knows of no
	// other waiting work spares the store that search. Finish ignores it.
	ClaimIfLeft bool
}

// DropAllHistory, as Finish.DropHistory, empties the stored history (/new).
const DropAllHistory = math.MaxInt32

// CheckDropHistory refuses a negative Finish.DropHistory.
func CheckDropHistory(op string, f Finish) error {
	if f.DropHistory < 0 {
		return errs.E(op, errs.Invalid, "DropHistory is %d; want 0 or more", f.DropHistory)
	}
	return nil
}

// Handoff asks a Finish to claim the messages it enqueues (Finish.Handoff)
// for Worker, for TTL. Once the finish has committed, the store calls
// Claimed with the claims of the messages it enqueued, in the order of
// Finish.Outbox; a message whose idempotency key was seen before is not
// enqueued and has no claim, and neither has one due later, or one behind
// an earlier message to its target that Worker does not hold (it is
// enqueued due, and leaves after that one, as outbox.Store.Claim keeps
// a target's order). Claimed is not called when the finish fails.
// Claims made this way are like any other: acked, released or let run
// out through outbox.Store. A TTL of zero or less is the outbox's default
// claim; a Handoff without a Worker or without Claimed asks for nothing.
type Handoff struct {
	Worker  string
	TTL     time.Duration
	Claimed func([]outbox.Claimed)
}

// Active reports whether h asks for anything: a nil Handoff, or one
// without a Worker or without Claimed, asks for nothing.
func (h *Handoff) Active() bool {
	return h != nil && h.Worker != "" && h.Claimed != nil
}

// ClaimTTL is how long the handed claims last: TTL, or
// outbox.DefaultClaimTTL when TTL is zero or less.
func (h *Handoff) ClaimTTL() time.Duration {
	if h.TTL <= 0 {
		return outbox.DefaultClaimTTL
	}
	return h.TTL
}

// Give passes the claims a committed finish made to Claimed, when h asks
// for them (Active).
func (h *Handoff) Give(cs []outbox.Claimed) {
	if h.Active() {
		h.Claimed(cs)
	}
}

// Store keeps conversations. Every method may return errs.Closed after
// Close and errs.Unavailable when the backend cannot be reached; methods
// taking a Lease return errs.LeaseLost when its token is no longer the
// conversation's current one, and then have written nothing.
type Store interface {
	// Append adds in to the end of its lane. An in.MessageID seen in the
	// same conversation within the dedupe window adds nothing and returns
	// Duplicate. A conversation that is not leased becomes ready.
	// Errors: Invalid (empty conversation key, unknown kind), TooLarge.
	Append(ctx context.Context, in Inbound) (AppendResult, error)

	// AppendClaim is Append that also starts the new entry's turn when
	// nothing stands before it: when the entry is new (not Duplicate)
	// and the conversation had no other entry (queued, or delivered and
	// not acked) and no live lease, it leases the conversation to worker
	// for ttl, as Claim would, and returns the entry's turn, history
	// included. Otherwise the turn is nil and the entry waits as Append
	// leaves it. A process that receives a message while it has a turn
	// free runs it at once, without a claim of its own.
	// Errors: those of Append.
	AppendClaim(ctx context.Context, in Inbound, worker string, ttl time.Duration) (AppendResult, *Turn, error)

	// Claim leases, for ttl, the conversation that has been ready longest
	// (a conversation whose lease expired is ready again) and returns its
	// next entry: an entry delivered before and never acked comes first,
	// then the lowest non-empty lane. The turn carries the conversation's
	// history (Turn.History). It returns nil, nil when no conversation is
	// ready.
	Claim(ctx context.Context, worker string, ttl time.Duration) (*Turn, error)

	// ClaimMany is Claim made up to n times in one call to the store: it
	// returns the turns of up to n conversations, those ready longest
	// first, each leased for ttl as Claim leases one, and none when
	// nothing is ready. A worker with n turns free claims a backlog with
	// one call instead of n.
	ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*Turn, error)

	// Next returns the held conversation's next entry, as Claim orders
	// them, or nil when its queue is empty.
	Next(ctx context.Context, l Lease) (*Entry, error)

	// Renew extends the lease to ttl from now and returns it.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// Release gives the lease back. A conversation with entries left is
	// ready again, behind the conversations already waiting.
	Release(ctx context.Context, l Lease) error

	// Finish acks f.EntryID, appends f.History, enqueues f.Outbox, writes
	// f.Meta and, with f.Release, gives the lease back: all or nothing.
	// Errors: NotFound (no such unacked entry), Invalid, TooLarge.
	Finish(ctx context.Context, l Lease, f Finish) error

	// FinishAndClaim is Finish followed by Claim(worker, ttl), in one
	// atomic step: a worker done with a turn commits it and takes its
	// next one with a single call to the store. When the Finish fails,
	// nothing is written and nothing is claimed; when it succeeds and no
	// conversation is ready, FinishAndClaim returns nil, nil. With
	// f.Release, the finished conversation, if it has entries left, is
	// ready behind those already waiting, so it comes back only when it
	// has waited longest. The turn worker commits every turn this way
	// and runs what it claimed next, so a busy worker moves from turn to
	// turn without a Claim of its own. With f.ClaimIfLeft it claims only
	// when the finished conversation has entries left.
	// Errors: those of Finish.
	FinishAndClaim(ctx context.Context, l Lease, f Finish, worker string, ttl time.Duration) (*Turn, error)

	// AppendHistory appends to the conversation's history under the lease.
	AppendHistory(ctx context.Context, l Lease, msgs ...chat.Message) error

	// History returns the conversation's whole history, oldest first.
	History(ctx context.Context, conv string) ([]chat.Message, error)

	// ClearHistory drops the conversation's history at once, under no
	// lease: for what runs outside a turn. A turn clears it in its commit
	// instead (Finish.DropHistory of DropAllHistory, as /new does), so a
	// turn that lost its lease clears nothing.
	ClearHistory(ctx context.Context, conv string) error

	// Meta returns the conversation's metadata (busy-input mode, …),
	// with ConvMetaTurn made from the conversation's live lease, if one
	// holds it with an entry handed out (TurnMark); a ConvMetaTurn
	// stored by an older version is not returned.
	Meta(ctx context.Context, conv string) (map[string]string, error)

	// SetMeta sets one metadata key; an empty value deletes it.
	SetMeta(ctx context.Context, conv, key, value string) error

	// QueueDepth counts the queued entries of every conversation, those
	// waiting and those a turn runs, up to limit (1 or more): a count of
	// limit means at least that many. Errors: Invalid (limit below 1;
	// see CheckQueueLimit).
	QueueDepth(ctx context.Context, limit int) (int, error)
}

// CheckQueueLimit refuses a QueueDepth limit below 1.
func CheckQueueLimit(op string, limit int) error {
	if limit < 1 {
		return errs.E(op, errs.Invalid, "limit %d; want 1 or more", limit)
	}
	return nil
}

// Limits bound what a store accepts and remembers.
type Limits struct {
	MaxEntryBytes int           // an encoded entry or message over this is TooLarge; default 256 KiB
	DedupeWindow  time.Duration // how long message ids are remembered; default 7 days
	// TimelineMax is how many items a conversation's timeline keeps: an
	// append drops the oldest beyond it. 0 keeps all.
	TimelineMax int
}

// Defaults for Limits.
const (
	DefaultMaxEntryBytes = 256 << 10
	DefaultDedupeWindow  = 7 * 24 * time.Hour
	DefaultLeaseTTL      = 30 * time.Second
)

// WithDefaults fills the zero fields of l.
func (l Limits) WithDefaults() Limits {
	if l.MaxEntryBytes <= 0 {
		l.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if l.DedupeWindow <= 0 {
		l.DedupeWindow = DefaultDedupeWindow
	}
	return l
}

// EncodeInbound validates in, fills its defaults and returns it encoded,
// ready to store. Backends call it so that both accept exactly the same
// input.
func EncodeInbound(op string, in Inbound, lim Limits) (Inbound, []byte, error) {
	if err := chat.ValidateConv(op, in.Conv); err != nil {
		return in, nil, err
	}
	switch in.Kind {
	case "":
		in.Kind = KindUser
	case KindUser, KindSynthetic:
	default:
		return in, nil, errs.E(op, errs.Invalid, "unknown entry kind %q", in.Kind)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return in, nil, errs.Wrap(op, errs.Invalid, err)
	}
	if len(b) > lim.WithDefaults().MaxEntryBytes {
		return in, nil, errs.E(op, errs.TooLarge, "entry is %d bytes, over the limit of %d", len(b), lim.WithDefaults().MaxEntryBytes)
	}
	return in, b, nil
}

// ValidateMeta checks metadata about to be written, as SetMeta and
// Finish.Meta write it: no empty key, and no key and value together over
// the entry limit. Errors: Invalid, TooLarge.
func ValidateMeta(op string, meta map[string]string, lim Limits) error {
	max := lim.WithDefaults().MaxEntryBytes
	for k, v := range meta {
		if k == "" {
			return errs.E(op, errs.Invalid, "empty metadata key")
		}
		if k == ConvMetaTurn {
			return errs.E(op, errs.Invalid, "metadata key %q is the store's: it tells the running turn from the lease", k)
		}
		if n := len(k) + len(v); n > max {
			return errs.E(op, errs.TooLarge, "metadata is %d bytes, over the limit of %d", n, max)
		}
	}
	return nil
}

// EncodeMessages encodes history messages, each checked against the limit.
func EncodeMessages(op string, msgs []chat.Message, lim Limits) ([][]byte, error) {
	out := make([][]byte, 0, len(msgs))
	max := lim.WithDefaults().MaxEntryBytes
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		if len(b) > max {
			return nil, errs.E(op, errs.TooLarge, "history message is %d bytes, over the limit of %d", len(b), max)
		}
		out = append(out, b)
	}
	return out, nil
}
