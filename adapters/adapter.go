// Package adapters is the edge between herald and the chat platforms. An
// adapter translates, and nothing more: it turns platform events into
// sessions.Inbound for the router and sends outbox messages back, telling
// the delivery worker how the platform answered. Session logic, commands
// and delivery rules live in the shared packages.
package adapters

import (
	"context"
	"time"

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
// an event is never lost between the platform and the queue.
type Inbox interface {
	Deliver(ctx context.Context, in sessions.Inbound) error
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
