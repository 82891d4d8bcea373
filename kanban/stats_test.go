package kanban_test

import (
	"testing"

	"github.com/heraldgw/herald/kanban"
)

// Stats counts every card by status, archived too, and the cards not
// archived by lane.
func TestStatsCountsByStatusAndLane(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.create(kanban.CreateSpec{Title: "a", Assignee: "coder"})
		h.create(kanban.CreateSpec{Title: "b", Assignee: "coder", Status: kanban.StatusTriage})
		h.create(kanban.CreateSpec{Title: "c"})
		gone := h.create(kanban.CreateSpec{Title: "d", Assignee: "writer"})
		if _, err := h.svc.Archive(h.ctx, gone.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		h.create(kanban.CreateSpec{Title: "elsewhere", Board: "other"})
		st, err := kanban.Stats(h.ctx, h.svc.Store, kanban.DefaultBoard)
		if err != nil {
			t.Fatal(err)
		}
		if st.Board != kanban.DefaultBoard || st.Total != 4 || st.Unassigned != 1 || len(st.Assignees) != 1 || st.Assignees["coder"] != 2 {
			t.Errorf("stats = %+v, want 4 cards, 2 of coder's and 1 of no lane not archived", st)
		}
		want := map[kanban.Status]int{kanban.StatusReady: 2, kanban.StatusTriage: 1, kanban.StatusArchived: 1}
		for _, s := range kanban.Statuses {
			if got, ok := st.Statuses[string(s)]; !ok || got != want[s] {
				t.Errorf("%s: %d (listed %v), want %d", s, got, ok, want[s])
			}
		}
	})
}

// CardEvents reads a card's events oldest first, from the start or
// after a cursor.
func TestCardEventsAfterACursor(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "talked about"})
		h.create(kanban.CreateSpec{Title: "another"})
		for _, text := range []string{"one", "two", "three"} {
			if _, err := h.svc.Comment(h.ctx, k.ID, "ann", text); err != nil {
				t.Fatal(err)
			}
		}
		all, err := kanban.CardEvents(h.ctx, h.svc.Store, k, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 4 || all[0].Kind != kanban.EventCreated || all[3].Text != "three" {
			t.Fatalf("events = %+v, want created and three comments, in order", all)
		}
		for _, e := range all {
			if e.Card != k.ID {
				t.Errorf("an event of %s in %s's", e.Card, k.ID)
			}
		}
		rest, err := kanban.CardEvents(h.ctx, h.svc.Store, k, all[1].Cursor)
		if err != nil || len(rest) != 2 || rest[0].Text != "two" {
			t.Errorf("events after the first comment = %+v, %v; want two and three", rest, err)
		}
	})
}
