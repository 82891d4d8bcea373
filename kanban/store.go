package kanban

import (
	"context"
	"time"
)

// Store keeps boards, cards, their links, comments, attachments, runs
// and events, and the notification subscriptions. Every method may
// return errs.Closed after Close and errs.Unavailable when the backend
// cannot be reached.
//
// Apply is the one way a card changes: the package decides a change on
// cards it read and the store applies it whole, or not at all when any
// card it read has moved on.
type Store interface {
	// Now is the store's clock: claims expire and the dispatcher's
	// decisions are timed by it, so every instance agrees.
	Now(ctx context.Context) (time.Time, error)

	// PutBoard writes a board (new, or its name and description).
	// Errors: Invalid (a bad slug).
	PutBoard(ctx context.Context, b Board) error
	// Boards returns every board, by slug.
	Boards(ctx context.Context) ([]Board, error)
	// Board returns one board. Errors: NotFound.
	Board(ctx context.Context, slug string) (Board, error)

	// Apply writes c in one atomic step: each of c.Cards over the
	// version it was read at (0 for a new card, whose id and idempotency
	// key must be new), c.Check unchanged, the links, comments,
	// attachments, runs and events (each event given its cursor, in
	// order), stamped with the store's clock inside the write when
	// c.Stamp says so, and returns the events as written. Errors:
	// Conflict (a card moved on, a new card's id or key
	// exists, a card has an attachment of a new one's name: read again
	// and decide again; nothing was written), Invalid (as CheckChange
	// says, and an attachment of a card that is not there or is
	// archived, as the change leaves it).
	Apply(ctx context.Context, c Change) ([]Event, error)

	// Card returns one card with its links. Errors: NotFound.
	Card(ctx context.Context, id string) (Card, error)
	// CardByKey returns the card of board with idempotency key key.
	// Errors: NotFound.
	CardByKey(ctx context.Context, board, key string) (Card, error)
	// Cards returns the cards q selects, with their links.
	Cards(ctx context.Context, q Query) ([]Card, error)

	// Comments returns a card's comments, oldest first.
	Comments(ctx context.Context, card string) ([]Comment, error)
	// Attachments returns a card's attachments, oldest first (by name
	// within an instant), without their paths.
	Attachments(ctx context.Context, card string) ([]Attachment, error)
	// Runs returns a card's runs, oldest first.
	Runs(ctx context.Context, card string) ([]Run, error)
	// Events returns up to limit events of board after cursor (""
	// from the start), oldest first; with card set, only that card's.
	Events(ctx context.Context, q EventQuery) ([]Event, error)

	// PutSubscription writes s over the version it was read at (0: a
	// new one). Errors: Conflict, Invalid.
	PutSubscription(ctx context.Context, s Subscription) (Subscription, error)
	// Subscriptions returns board's subscriptions ("" for every board).
	Subscriptions(ctx context.Context, board string) ([]Subscription, error)
	// RemoveSubscription removes one. Errors: NotFound.
	RemoveSubscription(ctx context.Context, id string) error

	// PutLane writes a lane's state over the version it was read at (0:
	// a new one). Errors: Conflict (it moved on, or a new one exists),
	// NotFound (an update of one that is not there), Invalid.
	PutLane(ctx context.Context, l LaneState) (LaneState, error)
	// Lanes returns every lane's state, by name.
	Lanes(ctx context.Context) ([]LaneState, error)
}

// Change is one atomic write of Store.Apply.
type Change struct {
	Cards []CardWrite
	// Check names cards read but not written whose versions must still
	// be the ones read: what a decision rested on (a cycle check's
	// walk, a promotion's parents).
	Check    []Version
	Link     []Link // parent → child links to add
	Unlink   []Link
	Comments []Comment
	// Attachments are new attachments' rows: the files are written
	// first, by the service.
	Attachments []Attachment
	Runs        []Run // new or updated, by id
	Events      []Event
	// Stamp has the store stamp the change with its clock, read inside
	// the write: every instant of it in 1970 is written as the store's
	// now plus its offset from StampBase (see Change.Stamped). The
	// service then decides with no call of its own to the clock.
	Stamp bool
	// Bookkeeping says the change only takes a claim: a store may commit
	// it without waiting for it to reach the disk, the next durable
	// write (the claim's complete, its release) making it durable with
	// everything before it. A power cut that loses the claim also ended
	// the worker that held it, on the store's machine; the card is ready
	// again, as it was.
	Bookkeeping bool
}

// CardWrite is a card to write over the version it was read at.
type CardWrite struct {
	Card Card  // written with Version From+1
	From int64 // 0: a new card
}

// Version names a card at a version.
type Version struct {
	ID      string
	Version int64
}

// Link is a parent → child link: the child waits for the parent.
type Link struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
}

// Query selects cards. A card is in it when it matches every field set.
type Query struct {
	Board    string   // required
	Statuses []Status // any of these; none: every status but archived
	Assignee string
	Tenant   string
	Archived bool // with no Statuses, archived cards too
	Limit    int  // 0: all
}

// StatusList is the statuses q selects: its Statuses, else every one but
// archived (with Archived, every one).
func (q Query) StatusList() []Status {
	if len(q.Statuses) > 0 {
		return q.Statuses
	}
	var out []Status
	for _, st := range Statuses {
		if st != StatusArchived || q.Archived {
			out = append(out, st)
		}
	}
	return out
}

// Trim keeps of cards, read in the board's order for q's statuses, those
// q's other fields select, up to its limit. Stores answer Cards with it.
func (q Query) Trim(cards []Card) []Card {
	out := cards[:0]
	for _, k := range cards {
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
		if (q.Assignee == "" || k.Assignee == q.Assignee) && (q.Tenant == "" || k.Tenant == q.Tenant) {
			out = append(out, k)
		}
	}
	return out
}

// EventQuery selects events of a board.
type EventQuery struct {
	Board string // required
	Card  string // only this card's
	After string // a cursor; "" from the start
	Limit int    // 0: 500
}
