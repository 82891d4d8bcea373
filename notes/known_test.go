package notes_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/signals"
)

// countedNotes is a Store in memory that counts its reads, and can hold
// one read until told.
type countedNotes struct {
	mu    sync.Mutex
	by    map[string][]notes.Note
	reads int
	hold  chan struct{} // when set, the next read waits for it
	held  chan struct{} // closed when the held read began
}

func (c *countedNotes) AddNote(_ context.Context, user, text string) (notes.Note, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := notes.Note{ID: notes.NewID(), Text: text}
	c.by[user] = append(c.by[user], n)
	return n, nil
}

func (c *countedNotes) Notes(_ context.Context, user string) ([]notes.Note, error) {
	c.mu.Lock()
	c.reads++
	hold := c.hold
	c.hold = nil
	ns := append([]notes.Note(nil), c.by[user]...)
	c.mu.Unlock()
	if hold != nil {
		close(c.held)
		<-hold
	}
	return ns, nil
}

func (c *countedNotes) DeleteNote(context.Context, string, string) error { return nil }

func (c *countedNotes) readCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func TestKnownReadsAUserWithoutNotesOnce(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	store := &countedNotes{by: map[string][]notes.Note{"with": {{ID: "n_1", Text: "likes tea"}}}}
	k := notes.NewKnown(store, clk, time.Minute)
	read := func(user string, want int) {
		t.Helper()
		ns, err := k.Notes(ctx, user)
		if err != nil || len(ns) != want {
			t.Fatalf("Notes(%s) = %v, %v; want %d", user, ns, err, want)
		}
	}
	read("without", 0)
	read("without", 0)
	read("with", 1)
	read("with", 1)
	if n := store.readCount(); n != 3 {
		t.Errorf("%d reads, want one for the user without notes and one each for the user with", n)
	}
	// Another gateway added a note: its signal makes the next turn read.
	if _, err := store.AddNote(ctx, "without", "likes coffee"); err != nil {
		t.Fatal(err)
	}
	k.HandleSignal(signals.Signal{Conv: "c", Kind: notes.SignalAdded, Target: "without"})
	read("without", 1)
	// One added through it is read at once; a signal of another kind
	// changes nothing.
	read("empty", 0)
	k.HandleSignal(signals.Signal{Conv: "c", Kind: signals.Stop, Target: "empty"})
	before := store.readCount()
	read("empty", 0)
	if store.readCount() != before {
		t.Errorf("a stop signal made the user without notes read again")
	}
	if _, err := k.AddNote(ctx, "empty", "likes juice"); err != nil {
		t.Fatal(err)
	}
	read("empty", 1)
	// Past the time it is trusted, it reads again.
	read("gone", 0)
	before = store.readCount()
	clk.Advance(time.Minute)
	read("gone", 0)
	if store.readCount() != before+1 {
		t.Errorf("no read once the minute passed")
	}
}

// A read that began before a note was added does not make the user
// known to have none.
func TestKnownForgetsDuringARead(t *testing.T) {
	ctx := context.Background()
	store := &countedNotes{by: map[string][]notes.Note{}, hold: make(chan struct{}), held: make(chan struct{})}
	k := notes.NewKnown(store, clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)), time.Minute)
	hold := store.hold
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ns, err := k.Notes(ctx, "u"); err != nil || len(ns) != 0 {
			t.Errorf("the held read = %v, %v", ns, err)
		}
	}()
	<-store.held
	if _, err := store.AddNote(ctx, "u", "likes tea"); err != nil {
		t.Fatal(err)
	}
	k.Forget("u")
	close(hold)
	<-done
	if ns, err := k.Notes(ctx, "u"); err != nil || len(ns) != 1 {
		t.Errorf("after the note = %v, %v; want it read", ns, err)
	}
}
