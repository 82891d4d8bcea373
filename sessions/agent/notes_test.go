package agent_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
)

// memNotes keeps notes in memory, numbering them n1, n2, … in the order
// they were added.
type memNotes struct {
	at time.Time

	mu    sync.Mutex
	seq   int
	notes map[string][]notes.Note
	err   error // returned by every call when set
}

var _ notes.Store = (*memNotes)(nil)

func newMemNotes(at time.Time) *memNotes {
	return &memNotes{at: at, notes: map[string][]notes.Note{}}
}

func (n *memNotes) AddNote(_ context.Context, user, text string) (notes.Note, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return notes.Note{}, n.err
	}
	if user == "" || text == "" {
		return notes.Note{}, errs.E("memNotes.AddNote", errs.Invalid, "empty user or text")
	}
	n.seq++
	note := notes.Note{ID: fmt.Sprintf("n%d", n.seq), Text: text, At: n.at}
	n.notes[user] = append(n.notes[user], note)
	return note, nil
}

func (n *memNotes) Notes(_ context.Context, user string) ([]notes.Note, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return nil, n.err
	}
	return slices.Clone(n.notes[user]), nil
}

func (n *memNotes) DeleteNote(_ context.Context, user, id string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return n.err
	}
	i := slices.IndexFunc(n.notes[user], func(x notes.Note) bool { return x.ID == id })
	if i < 0 {
		return errs.E("memNotes.DeleteNote", errs.NotFound, "no note %s", id)
	}
	n.notes[user] = slices.Delete(n.notes[user], i, i+1)
	return nil
}
