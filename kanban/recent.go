package kanban

import (
	"errors"
	"maps"
	"slices"
	"sync"
)

// recentCards bounds how many cards a Service remembers.
const recentCards = 1024

// recent is the cards a service wrote last, each as its write left it,
// so that the next change of one (the claim of a card just created, the
// spawn and the complete of the card just claimed) is decided without
// reading it first. A card remembered is a guess: a change decided on it
// is applied over its version, so a card changed since (by another
// instance, or by a write here that did not remember it) fails the write
// with Conflict, and the change is decided again on the card read. Only
// a write is decided on a guess; a refusal is decided on the card read.
// A card's version covers its links: every link added or removed writes
// both cards.
type recent struct {
	mu    sync.Mutex
	cards map[string]Card
}

// errGuess says a decision on a remembered card cannot stand: the card
// is to be read and the decision made again.
var errGuess = errors.New("kanban: decide again on the card read")

// remember keeps k, as written, for the next change of it.
func (r *recent) remember(k Card) {
	k = cloneCard(k)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cards == nil {
		r.cards = make(map[string]Card)
	}
	if _, ok := r.cards[k.ID]; !ok && len(r.cards) >= recentCards {
		for id := range r.cards {
			delete(r.cards, id)
			break
		}
	}
	r.cards[k.ID] = k
}

// forget drops the cards a change wrote.
func (r *recent) forget(ws []CardWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		delete(r.cards, w.Card.ID)
	}
}

// recall is the card id as this service last wrote it, when it
// remembers it.
func (r *recent) recall(id string) (Card, bool) {
	r.mu.Lock()
	k, ok := r.cards[id]
	r.mu.Unlock()
	if !ok {
		return Card{}, false
	}
	return cloneCard(k), true
}

// cloneCard is k sharing nothing a decision could change with k.
func cloneCard(k Card) Card {
	k.Parents, k.Children = slices.Clone(k.Parents), slices.Clone(k.Children)
	if k.Claim != nil {
		cl := *k.Claim
		if cl.Stop != nil {
			st := *cl.Stop
			cl.Stop = &st
		}
		k.Claim = &cl
	}
	if k.Result != nil {
		res := *k.Result
		res.Metadata = maps.Clone(res.Metadata)
		res.CreatedCards, res.Artifacts = slices.Clone(res.CreatedCards), slices.Clone(res.Artifacts)
		k.Result = &res
	}
	return k
}
