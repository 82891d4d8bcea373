// Package adapters is the edge between herald and the chat platforms. An
// adapter translates, and nothing more: it turns platform events into
// sessions.Inbound for the router and sends outbox messages back, telling
// the delivery worker how the platform answered. Session logic, commands
// and delivery rules live in the shared packages.
package adapters

import (
	"context"
	"net/http"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Outcome classifies a platform's answer to a send.
type Outcome int

const (
	// Accepted: the platform has the message; ack it.
	Accepted Outcome = iota
	// RateLimited: wait RetryAfter, then send again (an attempt is spent).
	RateLimited
	// Transient: a 5xx or a network error; back off and send again.
	//
	// A refused bot token (Telegram 401/404, Slack invalid_auth and its
	// kin, Discord 401) is Transient too, with the platform's words as
	// Reason, on every platform. It says nothing about the message: the
	// operator fixes the token and restarts herald, and the messages
	// written meanwhile should then go out rather than be dead-lettered
	// at the first attempt. If nobody fixes it, the outbox's bounded
	// retries dead-letter them all the same, with that reason. Each
	// adapter's Run reports the refusal as an error, which is where the
	// operator learns of it.
	//
	// A network error after the platform accepted the message (a timeout
	// on the answer) is Transient as well, and the retry may post the
	// message twice: the outbox delivers at least once, and no platform
	// here takes an idempotency key for a post.
	Transient
	// Permanent: the chat is gone, the bot is blocked, the message cannot
	// be sent as it is; dead-letter it with Reason.
	Permanent
	// RouteMissing: the adapter cannot send right now (not connected); the
	// message stays pending and spends no attempt.
	RouteMissing
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case RateLimited:
		return "rate_limited"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case RouteMissing:
		return "route_missing"
	}
	return "unknown"
}

// SendResult is how a send went.
type SendResult struct {
	Outcome    Outcome
	MessageID  string        // the platform's id of the (first) message sent, when Accepted
	RetryAfter time.Duration // the platform's wait, when RateLimited
	Reason     string        // the platform's words, when not Accepted
}

// Inbox takes what adapters receive. The router implements it. An adapter
// tells the platform it got an event only after Deliver returned nil, so
// an event is never lost between the platform and the queue. An error
// for which Refused is true is final: no retry makes the router take the
// event, and the adapter drops it, saying so in the log.
type Inbox interface {
	Deliver(ctx context.Context, in sessions.Inbound) error
}

// Refused reports whether Deliver's err refuses the event for good (it is
// Invalid or TooLarge), rather than failing for now.
func Refused(err error) bool {
	return errs.Is(err, errs.Invalid) || errs.Is(err, errs.TooLarge)
}

// Adapter is one platform connection.
type Adapter interface {
	// Platform is the name used in conversation keys and outbox targets:
	// "telegram", "slack", "discord", "api".
	Platform() string

	// Run receives the platform's events into inbox until ctx ends.
	Run(ctx context.Context, inbox Inbox) error

	// Send sends one outbox message to its target.
	Send(ctx context.Context, m outbox.Message) SendResult
}

// The interfaces below are optional: an adapter implements those its
// platform has, and the gateway checks for them.

// Presence shows a running turn in the chat. The gateway drives it for
// the turns this process runs: Typing about every 4 s while the turn
// runs, and for a turn that runs tools one status line, edited at most
// every 2 s, removed when the turn ends (the answer comes through the
// outbox). Errors are logged and never fail the turn.
type Presence interface {
	// Typing shows the platform's typing indicator in t's chat; it lapses
	// by itself after a few seconds.
	Typing(ctx context.Context, t outbox.Target) error
	// Status posts a status line to t when id is empty, else edits the
	// one with that id, and returns the status line's id.
	Status(ctx context.Context, t outbox.Target, id, text string) (string, error)
	// ClearStatus removes the status line id from t.
	ClearStatus(ctx context.Context, t outbox.Target, id string) error
}

// Streamer shows a reply while the model writes it: one message, posted
// when the first text arrives and edited as more comes, which the outbox's
// reply then turns into the reply itself. The gateway's streaming driver
// paces the edits (display.stream_edit_interval) and hands the delivery
// of the reply the message's id.
type Streamer interface {
	// StreamText shows text, the reply so far to message replyTo, in t:
	// posted where Send would post the reply's first part when id is
	// empty, else edited into message id. Only what fits one message is
	// shown, rendered as Send renders it. It returns the message's id.
	// Errors: Invalid when the platform refuses it (the driver stops
	// showing this reply), Unavailable when it may pass, wrapping a
	// *WaitError when the platform rate-limited the call. A post that
	// failed otherwise may have gone all the same, so the driver stops
	// showing that reply too rather than post it again.
	StreamText(ctx context.Context, t outbox.Target, replyTo, id, text string) (string, error)
	// SendStreamed sends m as Send does, except that its first part
	// replaces the text of message id, the reply shown in progress. When
	// the platform refuses that edit, m is sent as Send sends it and,
	// once it went, message id is deleted (a failed delete leaves it).
	SendStreamed(ctx context.Context, m outbox.Message, id string) SendResult
	// ClearStatus deletes message id from t, as it deletes a status line
	// (Presence): here the reply in progress of a turn that ended without
	// a reply (stopped, interrupted, run again elsewhere). One already
	// gone is deleted. Errors: Invalid, Unavailable.
	ClearStatus(ctx context.Context, t outbox.Target, id string) error
}

// Exclusive is an adapter whose Run may run in one process only among
// all those sharing a store: a Telegram long poll, a Discord gateway
// shard. The gateway runs it under an Owner (ownership.go), which holds
// a lease named by Exclusive before it calls Run, renews it while Run
// runs, and ends Run's context when the lease is lost; another process
// takes over within the lease TTL when the owner dies. An empty name means Run may run everywhere at once (webhooks).
// Send never needs the lease. Before each platform call only the owner
// makes (a poll, a gateway connection), Run calls CheckOwner on its
// context, so an owner that stalled past its lease makes none once
// another process took it over.
type Exclusive interface {
	Exclusive() string
}

// ownerKey keys the ownership check in an exclusive adapter's context.
type ownerKey struct{}

// withOwner returns ctx carrying check, which CheckOwner calls: an Owner
// gives an exclusive adapter's Run a context that checks the lease's
// fencing token in the store.
func withOwner(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, ownerKey{}, check)
}

// CheckOwner reports whether this process still owns the exclusive
// adapter whose Run ctx is: nil when it does (or when ctx carries no
// check: the adapter is not exclusive here), else an error, after which
// Run must not make the call it was about to, and ctx ends soon. An
// error may also be the store not answering; the adapter waits and
// checks again.
func CheckOwner(ctx context.Context) error {
	if check, ok := ctx.Value(ownerKey{}).(func(context.Context) error); ok {
		return check(ctx)
	}
	return nil
}

// Mounter is an adapter that receives over herald's HTTP server
// (webhooks, Slack's Events API and slash commands). Mount adds its
// routes to mux before the server starts; the handlers deliver to inbox.
type Mounter interface {
	Mount(mux *http.ServeMux, inbox Inbox)
}

// Masker is an adapter whose ids or request paths can carry a
// credential: a Discord interaction's MessageID holds the token its answer
// is posted with, and it travels on as the ReplyTo of the answers. The
// gateway runs every log message and attribute, and every failure reason
// it stores, through each adapter's Mask, so the ids stay readable and the
// credentials never leave the process that way. Mask returns s with every
// credential it knows replaced; it runs on every log line, so it must be
// cheap for text without one and safe for concurrent use.
type Masker interface {
	Mask(s string) string
}

// CommandInfo is one chat command as a platform lists it (Telegram's
// command menu, Slack's slash commands, Discord's application commands).
// The adapter only routes a command to the shared handler, as the text
// "/name args"; it never answers one itself.
type CommandInfo struct {
	Name    string   // lower case, without the slash
	Aliases []string // other names; a platform whose menu refuses Name's characters offers one
	Args    string   // how the arguments read, e.g. "MESSAGE"; empty for none
	Summary string   // one line
}

// Fetcher is an adapter that downloads the files its platform's messages
// carry, by the reference it put in the attachment (PlatformID or URL):
// Telegram's getFile, Slack's url_private with the bot's token, Discord's
// attachment URL. The token is the adapter's to add; the model and the
// store never see it. max bounds the download: a larger file is a
// TooLarge error, and nothing of it is kept. Errors: TooLarge, NotFound
// (the platform no longer has the file), Unavailable (a try later may
// work), Invalid (an attachment this adapter did not make).
type Fetcher interface {
	Fetch(ctx context.Context, att sessions.Attachment, max int64) ([]byte, error)
}
