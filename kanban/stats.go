package kanban

import "context"

// BoardStats are a board's cards counted by status and by lane.
type BoardStats struct {
	Board      string         `json:"board"`
	Total      int            `json:"total"`
	Statuses   map[string]int `json:"statuses"`   // every status, archived too
	Assignees  map[string]int `json:"assignees"`  // cards not archived, by lane
	Unassigned int            `json:"unassigned"` // cards not archived without a lane
}

// Stats counts board's cards, archived ones too.
func Stats(ctx context.Context, s Store, board string) (BoardStats, error) {
	st := BoardStats{Board: board, Statuses: map[string]int{}, Assignees: map[string]int{}}
	cards, err := s.Cards(ctx, Query{Board: board, Archived: true})
	if err != nil {
		return st, err
	}
	st.Total = len(cards)
	for _, s := range Statuses {
		st.Statuses[string(s)] = 0
	}
	for _, k := range cards {
		st.Statuses[string(k.Status)]++
		switch {
		case k.Status == StatusArchived:
		case k.Assignee == "":
			st.Unassigned++
		default:
			st.Assignees[k.Assignee]++
		}
	}
	return st, nil
}

// eventPage is how many events one read of CardEvents asks for.
const eventPage = 500

// CardEvents returns k's events after cursor after (from the start:
// ""), oldest first, read a page at a time.
func CardEvents(ctx context.Context, s Store, k Card, after string) ([]Event, error) {
	var out []Event
	for {
		evs, err := s.Events(ctx, EventQuery{Board: k.Board, Card: k.ID, After: after, Limit: eventPage})
		if err != nil {
			return out, err
		}
		out = append(out, evs...)
		if len(evs) < eventPage {
			return out, nil
		}
		after = evs[len(evs)-1].Cursor
	}
}
