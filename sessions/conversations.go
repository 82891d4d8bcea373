package sessions

import (
	"context"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// MaxConvList is the most conversations one Conversations call lists.
const MaxConvList = 500

// ConvQuery asks Conversations for one page of conversations, those
// active most recently first.
type ConvQuery struct {
	// Limit is how many to list, 1 to MaxConvList.
	Limit int
	// Before is the Cursor of the last summary of the page before: the
	// page goes on after it. "" starts with the conversation active last.
	Before string
}

// Check refuses a limit out of range: Invalid.
func (q ConvQuery) Check(op string) error {
	if q.Limit < 1 || q.Limit > MaxConvList {
		return errs.E(op, errs.Invalid, "limit %d; want 1 to %d", q.Limit, MaxConvList)
	}
	return nil
}

// ConvSummary is one conversation as an operator's list shows it.
type ConvSummary struct {
	Conv string
	// LastActive is when an entry was last appended to it or a turn of
	// it last committed (Finish), by the store's clock.
	LastActive time.Time
	// Queued counts its queue's entries, those waiting and the one a
	// turn runs (as QueueDepth counts them).
	Queued int
	// Worker holds the conversation under a live lease until Expires:
	// a turn of it runs there. Both are zero when no lease is live.
	Worker  string
	Expires time.Time
	// Meta is the conversation's written metadata: its token totals
	// (UsagePrefix), its modes. Unlike Store.Meta, it has no running
	// turn (Worker and Expires tell the lease).
	Meta map[string]string
	// Cursor places it in the list, for ConvQuery.Before.
	Cursor string
}

// Conversations lists conversations by their last activity. A
// conversation is listed from its first append on; one whose last
// activity came before the store kept it (an older herald's) is listed
// from its next.
type Conversations interface {
	// Conversations returns up to q.Limit conversations, the one active
	// last first; ties in no promised order, but every conversation on
	// one page or the next. Errors: Invalid (a limit out of range, a
	// cursor the store did not make).
	Conversations(ctx context.Context, q ConvQuery) ([]ConvSummary, error)

	// Conversation returns one conversation's summary. Errors: Invalid
	// (a bad key), NotFound (the store lists no such conversation).
	Conversation(ctx context.Context, conv string) (ConvSummary, error)

	// RecentHistory returns the last n (1 or more) messages of the
	// conversation's history, oldest first, and how many it holds in
	// all: a page shows the end of a long history without reading the
	// whole. Errors: Invalid (a bad key, n below 1).
	RecentHistory(ctx context.Context, conv string, n int) (msgs []chat.Message, total int, err error)
}

// CheckRecent refuses what RecentHistory must not read: Invalid for a
// bad conversation key or n below 1.
func CheckRecent(op, conv string, n int) error {
	if err := chat.ValidateConv(op, conv); err != nil {
		return err
	}
	if n < 1 {
		return errs.E(op, errs.Invalid, "n %d; want 1 or more", n)
	}
	return nil
}
