package kanban

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// EventEdited is a card's title or body changed by Edit.
const EventEdited = "edited"

// EditSpec is what Edit changes: each field that is set.
type EditSpec struct {
	Title    *string
	Body     *string
	Priority *int
}

// Edit changes a card's title, body and priority, in any status but
// archived. A running card's worker goes on with what it was given; the
// next run reads the card anew. A title or body change is an edited
// event naming the fields, a priority change a prioritized one.
// Errors: NotFound, Invalid (nothing to change, an empty title, an
// archived card).
func (s *Service) Edit(ctx context.Context, id string, e EditSpec, actor string) (Card, error) {
	const op = "kanban.Edit"
	if e.Title == nil && e.Body == nil && e.Priority == nil {
		return Card{}, errs.E(op, errs.Invalid, "nothing to change: give a title, a body or a priority")
	}
	if e.Title != nil {
		title := strings.TrimSpace(*e.Title)
		if title == "" {
			return Card{}, errs.E(op, errs.Invalid, "a card needs a title")
		}
		e.Title = &title
	}
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		if k.Status == StatusArchived {
			return change{}, errs.E(op, errs.Invalid, "%s is archived", k.ID)
		}
		from := k.Version
		var fields []string
		if e.Title != nil && *e.Title != k.Title {
			k.Title = *e.Title
			fields = append(fields, "title")
		}
		if e.Body != nil && *e.Body != k.Body {
			k.Body = *e.Body
			fields = append(fields, "body")
		}
		var evs []Event
		if len(fields) > 0 {
			evs = append(evs, Event{Board: k.Board, Card: k.ID, Kind: EventEdited, Actor: actor, Text: strings.Join(fields, ", "), At: now,
				Data: map[string]any{"fields": fields}})
		}
		if e.Priority != nil && *e.Priority != k.Priority {
			k.Priority = *e.Priority
			evs = append(evs, Event{Board: k.Board, Card: k.ID, Kind: EventPrioritized, Actor: actor, Text: strconv.Itoa(k.Priority), At: now})
		}
		if len(evs) == 0 {
			return change{card: k}, nil // as it is already
		}
		k.UpdatedAt = now
		return change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: from}}, Events: evs}}, nil
	})
}
