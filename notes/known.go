package notes

import (
	"context"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/signals"
)

// SignalAdded tells every gateway that a turn's commit added a note for
// the user its Target names: each forgets that it knew the user had
// none (Known.Forget).
const SignalAdded signals.Kind = "notes.added"

// DefaultNoNotesFor is how long a Known trusts that a user has no notes
// when no signal told it otherwise: the bound on a missed signal.
const DefaultNoNotesFor = 5 * time.Minute

// maxKnown bounds the users a Known remembers: past it, it forgets them
// all and reads each again.
const maxKnown = 100_000

// Known is a Store that remembers the users it read and found with no
// notes, for NoNotesFor, so that a turn of a user without notes (most
// of them) reads nothing: every turn asks for its user's notes before
// its first model call. A note added through it, or told of by
// SignalAdded (another gateway's commit, Committed on this one), makes
// it read that user again.
type Known struct {
	Store
	clock clock.Clock
	ttl   time.Duration

	mu   sync.Mutex
	none map[string]time.Time // user → until when it is known to have none
	// forgets counts the Forgets: a read that began before one does not
	// record what it found, which the forgotten note may have changed.
	forgets uint64
}

// NewKnown returns s remembering users without notes for ttl (0:
// DefaultNoNotesFor), by clk (nil: the wall clock).
func NewKnown(s Store, clk clock.Clock, ttl time.Duration) *Known {
	if clk == nil {
		clk = clock.Real{}
	}
	if ttl <= 0 {
		ttl = DefaultNoNotesFor
	}
	return &Known{Store: s, clock: clk, ttl: ttl, none: map[string]time.Time{}}
}

// Notes returns user's notes: none, without a read, for a user read
// with none within the last NoNotesFor and not told of since.
func (k *Known) Notes(ctx context.Context, user string) ([]Note, error) {
	now := k.clock.Now()
	k.mu.Lock()
	until, known := k.none[user]
	began := k.forgets
	k.mu.Unlock()
	if known && now.Before(until) {
		return nil, nil
	}
	ns, err := k.Store.Notes(ctx, user)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.forgets != began:
		// A note was added meanwhile: what was read may be from before.
	case len(ns) == 0:
		if len(k.none) >= maxKnown {
			clear(k.none)
		}
		k.none[user] = now.Add(k.ttl)
	default:
		delete(k.none, user)
	}
	return ns, nil
}

// AddNote adds the note and forgets that user had none.
func (k *Known) AddNote(ctx context.Context, user, text string) (Note, error) {
	n, err := k.Store.AddNote(ctx, user, text)
	k.Forget(user)
	return n, err
}

// Forget makes the next Notes of user read the store.
func (k *Known) Forget(user string) {
	k.mu.Lock()
	delete(k.none, user)
	k.forgets++
	k.mu.Unlock()
}

// HandleSignal forgets the user of a SignalAdded.
func (k *Known) HandleSignal(s signals.Signal) {
	if s.Kind == SignalAdded {
		k.Forget(s.Target)
	}
}
