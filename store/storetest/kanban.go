package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/sessions"
)

// runKanban runs the conformance cases of kanban.Store.
func runKanban(t *testing.T, b Backend) {
	t.Run("boards", func(t *testing.T) { runKbBoards(t, b) })
	t.Run("cards, links and events", func(t *testing.T) { runKbCards(t, b) })
	t.Run("a claim is kept whole, its stop request too", func(t *testing.T) { runKbClaimKept(t, b) })
	t.Run("a change is a compare-and-set", func(t *testing.T) { runKbConflict(t, b) })
	t.Run("idempotency keys", func(t *testing.T) { runKbKeys(t, b) })
	t.Run("queries", func(t *testing.T) { runKbQuery(t, b) })
	t.Run("comments and runs", func(t *testing.T) { runKbCommentsRuns(t, b) })
	t.Run("attachments", func(t *testing.T) { runKbAttachments(t, b) })
	t.Run("events after a cursor", func(t *testing.T) { runKbEvents(t, b) })
	t.Run("subscriptions", func(t *testing.T) { runKbSubscriptions(t, b) })
	t.Run("lanes' states", func(t *testing.T) { runKbLanes(t, b) })
	t.Run("invalid changes", func(t *testing.T) { runKbInvalid(t, b) })
	t.Run("one winner of concurrent claims", func(t *testing.T) { runKbRace(t, b) })
	t.Run("durability", func(t *testing.T) { runKbDurability(t, b) })
	t.Run("a stamped change takes the store's clock", func(t *testing.T) { runKbStamp(t, b) })
}

func (f *fixture) kb() kanban.Store { return f.st.Kanban() }

// newCard is a ready card of board created at t0 plus age.
func newCard(id, board string, priority int, age time.Duration) kanban.Card {
	return kanban.Card{
		ID: id, Board: board, Title: "card " + id, Status: kanban.StatusReady, Priority: priority,
		Workspace: kanban.Workspace{Kind: kanban.WorkspaceScratch}, CreatedAt: t0.Add(age), UpdatedAt: t0.Add(age),
	}
}

func (f *fixture) apply(c kanban.Change) []kanban.Event {
	f.t.Helper()
	evs, err := f.kb().Apply(f.ctx, c)
	if err != nil {
		f.t.Fatalf("Apply: %v", err)
	}
	return evs
}

// create writes new cards and returns them as stored (version 1).
func (f *fixture) createCards(cards ...kanban.Card) []kanban.Card {
	f.t.Helper()
	c := kanban.Change{}
	for _, k := range cards {
		c.Cards = append(c.Cards, kanban.CardWrite{Card: k})
		c.Events = append(c.Events, kanban.Event{Board: k.Board, Card: k.ID, Kind: kanban.EventCreated, To: k.Status, At: f.clk.Now()})
	}
	f.apply(c)
	out := make([]kanban.Card, len(cards))
	for i, k := range cards {
		k.Version = 1
		out[i] = k
	}
	return out
}

func (f *fixture) card(id string) kanban.Card {
	f.t.Helper()
	k, err := f.kb().Card(f.ctx, id)
	if err != nil {
		f.t.Fatalf("Card(%s): %v", id, err)
	}
	return k
}

func (f *fixture) cardIDs(q kanban.Query) []string {
	f.t.Helper()
	cards, err := f.kb().Cards(f.ctx, q)
	if err != nil {
		f.t.Fatalf("Cards(%+v): %v", q, err)
	}
	ids := []string{}
	for _, k := range cards {
		ids = append(ids, k.ID)
	}
	return ids
}

func (f *fixture) events(q kanban.EventQuery) []kanban.Event {
	f.t.Helper()
	evs, err := f.kb().Events(f.ctx, q)
	if err != nil {
		f.t.Fatalf("Events(%+v): %v", q, err)
	}
	return evs
}

func eventKinds(evs []kanban.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Card+" "+e.Kind)
	}
	return out
}

func runKbBoards(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	for _, slug := range []string{"ops", "default"} {
		if err := f.kb().PutBoard(f.ctx, kanban.Board{Slug: slug, Name: "the " + slug, CreatedAt: t0}); err != nil {
			t.Fatalf("PutBoard(%s): %v", slug, err)
		}
	}
	if err := f.kb().PutBoard(f.ctx, kanban.Board{Slug: "ops", Name: "operations", CreatedAt: t0}); err != nil {
		t.Fatalf("PutBoard(ops) again: %v", err)
	}
	bs, err := f.kb().Boards(f.ctx)
	if err != nil || len(bs) != 2 || bs[0].Slug != "default" || bs[1].Slug != "ops" || bs[1].Name != "operations" {
		t.Errorf("Boards = %+v, %v; want default, then ops renamed", bs, err)
	}
	if got, err := f.kb().Board(f.ctx, "ops"); err != nil || got.Name != "operations" {
		t.Errorf("Board(ops) = %+v, %v", got, err)
	}
	_, err = f.kb().Board(f.ctx, "none")
	wantCode(t, "Board of an unknown slug", err, errs.NotFound)
	for _, bad := range []string{"", "Ops", "a b", "-x"} {
		wantCode(t, fmt.Sprintf("PutBoard(%q)", bad), f.kb().PutBoard(f.ctx, kanban.Board{Slug: bad}), errs.Invalid)
	}
}

func runKbCards(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	parent := newCard("t_00000001", "default", 0, 0)
	child := newCard("t_00000002", "default", 0, time.Second)
	child.Status = kanban.StatusTodo
	child.Body, child.Assignee, child.Tenant, child.MaxRuntime = "do it", "herald", "acme", kanban.Seconds(time.Minute)
	evs := f.apply(kanban.Change{
		Cards:  []kanban.CardWrite{{Card: parent}, {Card: child}},
		Link:   []kanban.Link{{Parent: parent.ID, Child: child.ID}},
		Events: []kanban.Event{{Board: "default", Card: parent.ID, Kind: kanban.EventCreated}, {Board: "default", Card: child.ID, Kind: kanban.EventCreated}},
	})
	if len(evs) != 2 || evs[0].Cursor == "" || evs[1].Cursor == "" || evs[0].Cursor == evs[1].Cursor || evs[0].At.IsZero() {
		t.Fatalf("Apply's events = %+v, want two with cursors and times", evs)
	}
	want := child
	want.Version, want.Parents = 1, []string{parent.ID}
	if diff := cmp.Diff(want, f.card(child.ID), timeOpts); diff != "" {
		t.Errorf("Card(child) (-want +got):\n%s", diff)
	}
	if got := f.card(parent.ID); !cmp.Equal(got.Children, []string{child.ID}) || len(got.Parents) != 0 {
		t.Errorf("parent's links = %v / %v", got.Parents, got.Children)
	}
	_, err := f.kb().Card(f.ctx, "t_none")
	wantCode(t, "Card of an unknown id", err, errs.NotFound)

	// An update over the version read, with the link taken away.
	child.Status, child.Version = kanban.StatusReady, 0
	f.apply(kanban.Change{
		Cards:  []kanban.CardWrite{{Card: child, From: 1}},
		Unlink: []kanban.Link{{Parent: parent.ID, Child: child.ID}},
		Events: []kanban.Event{{Board: "default", Card: child.ID, Kind: kanban.EventMoved, From: kanban.StatusTodo, To: kanban.StatusReady}},
	})
	got := f.card(child.ID)
	if got.Version != 2 || got.Status != kanban.StatusReady || len(got.Parents) != 0 || len(f.card(parent.ID).Children) != 0 {
		t.Errorf("after the update: %+v", got)
	}
	if kinds := eventKinds(f.events(kanban.EventQuery{Board: "default"})); !cmp.Equal(kinds, []string{parent.ID + " created", child.ID + " created", child.ID + " moved"}) {
		t.Errorf("events = %v", kinds)
	}
}

// runKbClaimKept: a running card's claim reads back as written, with
// its owner's process and the stop request a person made of it (the
// dispatcher that runs the worker acts on it).
func runKbClaimKept(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	k := newCard("t_00000001", "default", 0, 0)
	k.Status = kanban.StatusRunning
	k.Claim = &kanban.Claim{Owner: "gw-a", Token: 1, Expires: t0.Add(time.Minute), Run: "run_1", Lane: "herald",
		Host: "h1", PID: 4242, ProcStart: "99", Spawned: true, Heartbeat: t0, Started: t0, OwnerPID: 4200, OwnerStart: "98",
		Stop: &kanban.StopRequest{Reason: "wrong approach", By: "ann", At: t0.Add(time.Second), Then: kanban.StopReclaim}}
	f.createCards(k)
	want := k
	want.Version = 1
	if diff := cmp.Diff(want, f.card(k.ID), timeOpts); diff != "" {
		t.Errorf("Card (-want +got):\n%s", diff)
	}
}

func runKbConflict(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	cards := f.createCards(newCard("t_00000001", "default", 0, 0), newCard("t_00000002", "default", 0, 0))
	a, other := cards[0], cards[1]
	before := f.events(kanban.EventQuery{Board: "default"})

	// a moves on to version 2; a writer that read version 1 is refused
	// whole: none of its cards, links, comments, runs or events.
	a.Priority = 5
	f.apply(kanban.Change{Cards: []kanban.CardWrite{{Card: a, From: 1}}})
	stale := kanban.Change{
		Cards:    []kanban.CardWrite{{Card: other, From: 1}, {Card: a, From: 1}},
		Link:     []kanban.Link{{Parent: a.ID, Child: other.ID}},
		Comments: []kanban.Comment{{ID: "cm_1", Card: a.ID, Text: "hi"}},
		Runs:     []kanban.Run{{ID: "run_1", Card: a.ID, Started: t0}},
		Events:   []kanban.Event{{Board: "default", Card: a.ID, Kind: kanban.EventMoved}},
	}
	_, err := f.kb().Apply(f.ctx, stale)
	wantCode(t, "Apply over a stale version", err, errs.Conflict)
	for _, tc := range []struct {
		desc string
		c    kanban.Change
	}{
		{"a check of a stale version", kanban.Change{Cards: []kanban.CardWrite{{Card: other, From: 1}}, Check: []kanban.Version{{ID: a.ID, Version: 1}}}},
		{"a check of an unknown card", kanban.Change{Cards: []kanban.CardWrite{{Card: other, From: 1}}, Check: []kanban.Version{{ID: "t_none", Version: 1}}}},
		{"a new card over an existing id", kanban.Change{Cards: []kanban.CardWrite{{Card: newCard(a.ID, "default", 0, 0)}}}},
		{"an update of an unknown card", kanban.Change{Cards: []kanban.CardWrite{{Card: newCard("t_none", "default", 0, 0), From: 3}}}},
	} {
		_, err := f.kb().Apply(f.ctx, tc.c)
		wantCode(t, "Apply with "+tc.desc, err, errs.Conflict)
	}
	if got := f.card(other.ID); got.Version != 1 || len(got.Parents) != 0 {
		t.Errorf("a refused change wrote %+v", got)
	}
	if got := f.card(a.ID); got.Version != 2 || got.Priority != 5 {
		t.Errorf("card a = %+v, want version 2", got)
	}
	if cs, _ := f.kb().Comments(f.ctx, a.ID); len(cs) != 0 {
		t.Errorf("a refused change wrote comments %+v", cs)
	}
	if rs, _ := f.kb().Runs(f.ctx, a.ID); len(rs) != 0 {
		t.Errorf("a refused change wrote runs %+v", rs)
	}
	if after := f.events(kanban.EventQuery{Board: "default"}); len(after) != len(before) {
		t.Errorf("a refused change wrote events: %v", eventKinds(after))
	}
	if _, err := f.kb().Apply(f.ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: other, From: 1}}, Check: []kanban.Version{{ID: a.ID, Version: 2}}}); err != nil {
		t.Errorf("Apply with a current check: %v", err)
	}
}

func runKbKeys(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	k := newCard("t_00000001", "default", 0, 0)
	k.IdempotencyKey = "nightly-2031-03-04"
	f.createCards(k)
	dup := newCard("t_00000002", "default", 0, 0)
	dup.IdempotencyKey = k.IdempotencyKey
	_, err := f.kb().Apply(f.ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: dup}}})
	wantCode(t, "a second card with the key", err, errs.Conflict)
	elsewhere := dup
	elsewhere.Board = "ops"
	f.createCards(elsewhere)
	got, err := f.kb().CardByKey(f.ctx, "default", k.IdempotencyKey)
	if err != nil || got.ID != k.ID {
		t.Errorf("CardByKey(default) = %s, %v; want %s", got.ID, err, k.ID)
	}
	if got, err := f.kb().CardByKey(f.ctx, "ops", k.IdempotencyKey); err != nil || got.ID != elsewhere.ID {
		t.Errorf("CardByKey(ops) = %s, %v; want %s", got.ID, err, elsewhere.ID)
	}
	_, err = f.kb().CardByKey(f.ctx, "default", "other")
	wantCode(t, "CardByKey of an unknown key", err, errs.NotFound)
	_, err = f.kb().CardByKey(f.ctx, "default", "")
	wantCode(t, "CardByKey of no key", err, errs.NotFound)
	// A card dropping its key frees it.
	k.IdempotencyKey = ""
	f.apply(kanban.Change{Cards: []kanban.CardWrite{{Card: k, From: 1}}})
	dup.ID = "t_00000003"
	f.createCards(dup)
	if got, err := f.kb().CardByKey(f.ctx, "default", dup.IdempotencyKey); err != nil || got.ID != dup.ID {
		t.Errorf("CardByKey after the key moved = %s, %v; want %s", got.ID, err, dup.ID)
	}
	// A card taking a key another card of its board holds is refused,
	// and one taking a key of another board, in that board, is not.
	k.IdempotencyKey = dup.IdempotencyKey
	_, err = f.kb().Apply(f.ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: k, From: 2}}})
	wantCode(t, "a card taking a key held", err, errs.Conflict)
	k.Board = "elsewhere"
	f.apply(kanban.Change{Cards: []kanban.CardWrite{{Card: k, From: 2}}})
	if got, err := f.kb().CardByKey(f.ctx, "elsewhere", k.IdempotencyKey); err != nil || got.ID != k.ID || got.Version != 3 {
		t.Errorf("CardByKey after the card moved board = %s v%d, %v; want %s v3", got.ID, got.Version, err, k.ID)
	}
}

func runKbQuery(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	old := newCard("t_00000001", "default", 0, 0)
	urgent := newCard("t_00000002", "default", 9, time.Minute)
	young := newCard("t_00000003", "default", 0, time.Hour)
	young.Assignee, young.Tenant = "coder", "acme"
	todo := newCard("t_00000004", "default", 0, 0)
	todo.Status = kanban.StatusTodo
	gone := newCard("t_00000005", "default", 0, 0)
	gone.Status = kanban.StatusArchived
	f.createCards(young, old, urgent, todo, gone, newCard("t_00000006", "ops", 0, 0))
	for _, tc := range []struct {
		q    kanban.Query
		want []string
	}{
		{kanban.Query{Board: "default", Statuses: []kanban.Status{kanban.StatusReady}}, []string{urgent.ID, old.ID, young.ID}},
		{kanban.Query{Board: "default"}, []string{urgent.ID, old.ID, todo.ID, young.ID}},
		{kanban.Query{Board: "default", Archived: true}, []string{urgent.ID, old.ID, todo.ID, gone.ID, young.ID}},
		{kanban.Query{Board: "default", Statuses: []kanban.Status{kanban.StatusTodo, kanban.StatusArchived}}, []string{todo.ID, gone.ID}},
		{kanban.Query{Board: "default", Assignee: "coder"}, []string{young.ID}},
		{kanban.Query{Board: "default", Tenant: "acme"}, []string{young.ID}},
		{kanban.Query{Board: "default", Statuses: []kanban.Status{kanban.StatusReady}, Limit: 2}, []string{urgent.ID, old.ID}},
		{kanban.Query{Board: "none"}, []string{}},
	} {
		if got := f.cardIDs(tc.q); !cmp.Equal(got, tc.want) {
			t.Errorf("Cards(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	_, err := f.kb().Cards(f.ctx, kanban.Query{})
	wantCode(t, "Cards without a board", err, errs.Invalid)
}

func runKbCommentsRuns(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	k := f.createCards(newCard("t_00000001", "default", 0, 0))[0]
	f.apply(kanban.Change{Comments: []kanban.Comment{{ID: "cm_1", Card: k.ID, Author: "ann", Text: "first", At: t0}}})
	f.apply(kanban.Change{Comments: []kanban.Comment{{ID: "cm_2", Card: k.ID, Text: "second", At: t0.Add(time.Second)}}})
	cs, err := f.kb().Comments(f.ctx, k.ID)
	if err != nil || len(cs) != 2 || cs[0].Text != "first" || cs[0].Author != "ann" || cs[1].Text != "second" {
		t.Errorf("Comments = %+v, %v", cs, err)
	}
	r1 := kanban.Run{ID: "run_1", Card: k.ID, Board: "default", Lane: "herald", Owner: "gw-a", Started: t0}
	r2 := kanban.Run{ID: "run_2", Card: k.ID, Board: "default", Lane: "herald", Owner: "gw-b", Started: t0.Add(time.Minute)}
	f.apply(kanban.Change{Runs: []kanban.Run{r2, r1}})
	r1.Ended, r1.Outcome, r1.Error = t0.Add(30*time.Second), kanban.OutcomeCrashed, "exit 1"
	f.apply(kanban.Change{Runs: []kanban.Run{r1}})
	rs, err := f.kb().Runs(f.ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]kanban.Run{r1, r2}, rs, timeOpts); diff != "" {
		t.Errorf("Runs (-want +got):\n%s", diff)
	}
	if cs, _ := f.kb().Comments(f.ctx, "t_none"); len(cs) != 0 {
		t.Errorf("Comments of an unknown card = %+v", cs)
	}
}

// runKbAttachments: a card's attachments are rows of its own, one a
// name, of a card that is there and not archived as the change leaves
// it; a change that breaks that is refused whole.
func runKbAttachments(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	cards := f.createCards(newCard("t_00000001", "default", 0, 0), newCard("t_00000002", "default", 0, 0))
	k, other := cards[0], cards[1]
	att := func(card, name string, at time.Time) kanban.Attachment {
		return kanban.Attachment{Card: card, Name: name, Size: int64(len(name)), SHA256: "ab12", CreatedAt: at, CreatedBy: "ann"}
	}
	b2, a1 := att(k.ID, "b.txt", t0), att(k.ID, "a.txt", t0)
	later := att(k.ID, "0-later.pdf", t0.Add(time.Second))
	withPath := b2
	withPath.Path = "/somewhere/b.txt" // the service's to make, not kept
	f.apply(kanban.Change{Attachments: []kanban.Attachment{withPath, a1}})
	f.apply(kanban.Change{Attachments: []kanban.Attachment{later}})
	f.apply(kanban.Change{Attachments: []kanban.Attachment{att(other.ID, "a.txt", t0)}}) // a name is a card's own
	got, err := f.kb().Attachments(f.ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]kanban.Attachment{a1, b2, later}, got, timeOpts); diff != "" {
		t.Errorf("Attachments, oldest first, then by name (-want +got):\n%s", diff)
	}
	stamped := f.apply(kanban.Change{
		Attachments: []kanban.Attachment{{Card: other.ID, Name: "now.txt"}},
		Events:      []kanban.Event{{Board: "default", Card: other.ID, Kind: kanban.EventAttached}},
	})
	if as, _ := f.kb().Attachments(f.ctx, other.ID); len(as) != 2 || as[1].Name != "now.txt" || !as[1].CreatedAt.Equal(stamped[0].At) {
		t.Errorf("an attachment without a time = %+v, want the store's now (%v)", as, stamped[0].At)
	}

	archived := other
	archived.Status = kanban.StatusArchived
	fresh := newCard("t_00000003", "default", 0, 0)
	before := f.events(kanban.EventQuery{Board: "default"})
	for _, tc := range []struct {
		desc string
		c    kanban.Change
		code errs.Code
	}{
		{"a name the card has", kanban.Change{Attachments: []kanban.Attachment{att(k.ID, "a.txt", t0)}}, errs.Conflict},
		{"a card that is not there", kanban.Change{Attachments: []kanban.Attachment{att("t_none", "a.txt", t0)}}, errs.Invalid},
		{"a card the change archives", kanban.Change{Cards: []kanban.CardWrite{{Card: archived, From: 1}}, Attachments: []kanban.Attachment{att(other.ID, "c.txt", t0)}}, errs.Invalid},
		{"a path for a name", kanban.Change{Attachments: []kanban.Attachment{att(k.ID, "../c.txt", t0)}}, errs.Invalid},
		{"no name", kanban.Change{Attachments: []kanban.Attachment{att(k.ID, "", t0)}}, errs.Invalid},
		{"no card", kanban.Change{Attachments: []kanban.Attachment{att("", "c.txt", t0)}}, errs.Invalid},
		{"one name twice", kanban.Change{Attachments: []kanban.Attachment{att(k.ID, "c.txt", t0), att(k.ID, "c.txt", t0)}}, errs.Invalid},
	} {
		tc.c.Comments = []kanban.Comment{{ID: "cm_refused", Card: k.ID, Text: "not written"}}
		tc.c.Events = []kanban.Event{{Board: "default", Card: k.ID, Kind: kanban.EventAttached}}
		_, err := f.kb().Apply(f.ctx, tc.c)
		wantCode(t, "Apply of an attachment with "+tc.desc, err, tc.code)
	}
	if got, _ := f.kb().Attachments(f.ctx, k.ID); len(got) != 3 {
		t.Errorf("refused changes left attachments %+v", got)
	}
	if cs, _ := f.kb().Comments(f.ctx, k.ID); len(cs) != 0 {
		t.Errorf("refused changes wrote comments %+v", cs)
	}
	if got := f.card(other.ID); got.Status != kanban.StatusReady || got.Version != 1 {
		t.Errorf("a refused change wrote card %+v", got)
	}
	if after := f.events(kanban.EventQuery{Board: "default"}); len(after) != len(before) {
		t.Errorf("refused changes wrote events: %v", eventKinds(after[len(before):]))
	}

	// A card made in the change takes its attachments; once archived, a
	// card takes none.
	f.apply(kanban.Change{Cards: []kanban.CardWrite{{Card: fresh}}, Attachments: []kanban.Attachment{att(fresh.ID, "spec.md", t0)}})
	if as, _ := f.kb().Attachments(f.ctx, fresh.ID); len(as) != 1 {
		t.Errorf("attachments of a card made with them = %+v", as)
	}
	f.apply(kanban.Change{Cards: []kanban.CardWrite{{Card: archived, From: 1}}})
	_, err = f.kb().Apply(f.ctx, kanban.Change{Attachments: []kanban.Attachment{att(other.ID, "late.txt", t0)}})
	wantCode(t, "Apply of an attachment of an archived card", err, errs.Invalid)
	if as, _ := f.kb().Attachments(f.ctx, "t_none"); len(as) != 0 {
		t.Errorf("Attachments of an unknown card = %+v", as)
	}
}

func runKbEvents(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	a := newCard("t_0000000a", "default", 0, 0)
	bb := newCard("t_0000000b", "default", 0, 0)
	f.createCards(a, bb, newCard("t_0000000c", "ops", 0, 0))
	for i := range 5 {
		card := a.ID
		if i%2 == 1 {
			card = bb.ID
		}
		f.apply(kanban.Change{Events: []kanban.Event{{Board: "default", Card: card, Kind: kanban.EventCommented, Text: fmt.Sprint(i)}}})
	}
	all := f.events(kanban.EventQuery{Board: "default"})
	if len(all) != 7 {
		t.Fatalf("%d events, want 7", len(all))
	}
	page := f.events(kanban.EventQuery{Board: "default", Limit: 3})
	rest := f.events(kanban.EventQuery{Board: "default", After: page[2].Cursor})
	if len(page) != 3 || len(rest) != 4 || rest[0].Cursor != all[3].Cursor {
		t.Errorf("paging by cursor: %d then %d events", len(page), len(rest))
	}
	if got := f.events(kanban.EventQuery{Board: "default", After: all[6].Cursor}); len(got) != 0 {
		t.Errorf("events after the last = %v", eventKinds(got))
	}
	ofB := f.events(kanban.EventQuery{Board: "default", Card: bb.ID})
	if kinds := eventKinds(ofB); !cmp.Equal(kinds, []string{bb.ID + " created", bb.ID + " commented", bb.ID + " commented"}) {
		t.Errorf("events of b = %v", kinds)
	}
	if got := f.events(kanban.EventQuery{Board: "default", Card: bb.ID, After: ofB[1].Cursor}); len(got) != 1 || got[0].Text != "3" {
		t.Errorf("events of b after its second = %+v", got)
	}
	if got := f.events(kanban.EventQuery{Board: "ops"}); len(got) != 1 {
		t.Errorf("events of ops = %v", eventKinds(got))
	}
}

func runKbSubscriptions(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	s1, err := f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_1", Board: "default", Target: "telegram:1", CreatedAt: t0})
	if err != nil || s1.Version != 1 {
		t.Fatalf("PutSubscription = %+v, %v", s1, err)
	}
	if _, err := f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_2", Board: "ops", Target: "slack:C1", Events: []string{kanban.EventBlocked}, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	_, err = f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_1", Board: "default", Target: "telegram:2"})
	wantCode(t, "a second subscription of an id", err, errs.Conflict)
	s1.Cursor = "42"
	s1b, err := f.kb().PutSubscription(f.ctx, s1)
	if err != nil || s1b.Version != 2 {
		t.Fatalf("advancing the cursor = %+v, %v", s1b, err)
	}
	_, err = f.kb().PutSubscription(f.ctx, s1)
	wantCode(t, "advancing from a stale version", err, errs.Conflict)
	subs, err := f.kb().Subscriptions(f.ctx, "default")
	if err != nil || len(subs) != 1 || subs[0].Cursor != "42" || subs[0].Version != 2 {
		t.Errorf("Subscriptions(default) = %+v, %v", subs, err)
	}
	if all, _ := f.kb().Subscriptions(f.ctx, ""); len(all) != 2 || all[0].ID != "sub_1" || all[1].ID != "sub_2" {
		t.Errorf("Subscriptions() = %+v", all)
	}
	if err := f.kb().RemoveSubscription(f.ctx, "sub_1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "RemoveSubscription again", f.kb().RemoveSubscription(f.ctx, "sub_1"), errs.NotFound)
	_, err = f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_1", Board: "default", Target: "telegram:1", Version: 2})
	wantCode(t, "updating a removed subscription", err, errs.NotFound)
	_, err = f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_3", Board: "default"})
	wantCode(t, "a subscription without a target", err, errs.Invalid)
}

func runKbInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	noTitle := newCard("t_00000001", "default", 0, 0)
	noTitle.Title = ""
	badStatus := newCard("t_00000001", "default", 0, 0)
	badStatus.Status = "doing"
	for _, tc := range []struct {
		desc string
		c    kanban.Change
	}{
		{"a card without an id", kanban.Change{Cards: []kanban.CardWrite{{Card: newCard("", "default", 0, 0)}}}},
		{"a card without a board", kanban.Change{Cards: []kanban.CardWrite{{Card: newCard("t_1", "", 0, 0)}}}},
		{"a card without a title", kanban.Change{Cards: []kanban.CardWrite{{Card: noTitle}}}},
		{"an unknown status", kanban.Change{Cards: []kanban.CardWrite{{Card: badStatus}}}},
		{"a self-link", kanban.Change{Link: []kanban.Link{{Parent: "t_1", Child: "t_1"}}}},
		{"an event without a kind", kanban.Change{Events: []kanban.Event{{Board: "default"}}}},
	} {
		_, err := f.kb().Apply(f.ctx, tc.c)
		wantCode(t, "Apply with "+tc.desc, err, errs.Invalid)
	}
	if got := f.cardIDs(kanban.Query{Board: "default", Archived: true}); len(got) != 0 {
		t.Errorf("invalid changes wrote cards %v", got)
	}
}

// runKbRace is the "two claims, one winner" of the issue at the store:
// writers on two stores each try to move the same ready card to running
// over the version they read; exactly one does.
func runKbRace(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	other, _ := openStore(t, f.place, f.clk, f.lim)
	stores := []kanban.Store{f.kb(), other.Kanban()}
	const cards, writers = 10, 6
	for i := range cards {
		f.createCards(newCard(fmt.Sprintf("t_%08d", i), "default", 0, 0))
	}
	var mu sync.Mutex
	won := map[string][]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := stores[w%len(stores)]
			for i := range cards {
				id := fmt.Sprintf("t_%08d", i)
				k, err := st.Card(f.ctx, id)
				if err != nil || k.Status != kanban.StatusReady {
					continue
				}
				from := k.Version
				k.Status, k.Claim = kanban.StatusRunning, &kanban.Claim{Owner: fmt.Sprint("w", w), Token: from + 1}
				_, err = st.Apply(f.ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: k, From: from}},
					Events: []kanban.Event{{Board: "default", Card: id, Kind: kanban.EventClaimed}}})
				if err == nil {
					mu.Lock()
					won[id] = append(won[id], w)
					mu.Unlock()
				} else if !errs.Is(err, errs.Conflict) {
					t.Errorf("Apply(claim %s): %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	for i := range cards {
		id := fmt.Sprintf("t_%08d", i)
		if len(won[id]) != 1 {
			t.Errorf("card %s claimed by %v, want exactly one writer", id, won[id])
		}
		if n := len(f.events(kanban.EventQuery{Board: "default", Card: id})); n != 2 {
			t.Errorf("card %s has %d events, want created and one claim", id, n)
		}
	}
}

func runKbDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		if err := f.kb().PutBoard(f.ctx, kanban.Board{Slug: "ops", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		cards := f.createCards(newCard("t_00000001", "ops", 1, 0), newCard("t_00000002", "ops", 0, 0))
		f.apply(kanban.Change{
			Link:        []kanban.Link{{Parent: cards[0].ID, Child: cards[1].ID}},
			Comments:    []kanban.Comment{{ID: "cm_1", Card: cards[0].ID, Text: "kept", At: t0}},
			Attachments: []kanban.Attachment{{Card: cards[0].ID, Name: "kept.txt", Size: 4, CreatedAt: t0}},
			Runs:        []kanban.Run{{ID: "run_1", Card: cards[0].ID, Started: t0}},
		})
		if _, err := f.kb().PutSubscription(f.ctx, kanban.Subscription{ID: "sub_1", Board: "ops", Target: "telegram:1"}); err != nil {
			t.Fatal(err)
		}
		evs := f.events(kanban.EventQuery{Board: "ops"})
		f.reopen(restart)
		if got := f.card(cards[1].ID); got.Version != 1 || !cmp.Equal(got.Parents, []string{cards[0].ID}) {
			t.Errorf("card after reopening = %+v", got)
		}
		if _, err := f.kb().Board(f.ctx, "ops"); err != nil {
			t.Errorf("Board after reopening: %v", err)
		}
		if cs, _ := f.kb().Comments(f.ctx, cards[0].ID); len(cs) != 1 {
			t.Errorf("comments after reopening = %+v", cs)
		}
		if rs, _ := f.kb().Runs(f.ctx, cards[0].ID); len(rs) != 1 {
			t.Errorf("runs after reopening = %+v", rs)
		}
		if as, _ := f.kb().Attachments(f.ctx, cards[0].ID); len(as) != 1 || as[0].Size != 4 {
			t.Errorf("attachments after reopening = %+v", as)
		}
		if subs, _ := f.kb().Subscriptions(f.ctx, "ops"); len(subs) != 1 {
			t.Errorf("subscriptions after reopening = %+v", subs)
		}
		more := f.apply(kanban.Change{Events: []kanban.Event{{Board: "ops", Kind: kanban.EventCommented}}})
		after := f.events(kanban.EventQuery{Board: "ops", After: evs[len(evs)-1].Cursor})
		if len(after) != 1 || after[0].Cursor != more[0].Cursor {
			t.Errorf("events after reopening = %+v, want only the new one", after)
		}
	})
}

// runKbStamp: a stamped change's instants of 1970 are written as the
// store's clock at the write plus their offset from StampBase, in the
// card, its claim, its run, its event and its comment, and Apply
// returns the events so stamped; its other instants are kept. A claim
// written as bookkeeping reads back as any change does, and the
// durable change after it keeps it.
func runKbStamp(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	base := kanban.StampBase
	f.clk.Advance(90 * time.Second)
	created := f.clk.Now()
	k := newCard("t_00000001", "ops", 0, 0)
	k.CreatedAt, k.UpdatedAt, k.ReadyAt = base, base, base
	k.ScheduledAt = t0.Add(time.Hour)
	evs := f.apply(kanban.Change{Stamp: true, Cards: []kanban.CardWrite{{Card: k}},
		Events: []kanban.Event{{Board: "ops", Card: k.ID, Kind: kanban.EventCreated, To: k.Status, At: base}}})
	if len(evs) != 1 || !evs[0].At.Equal(created) {
		t.Errorf("the stamped create's events = %+v, want one at %v", evs, created)
	}
	got := f.card(k.ID)
	if !got.CreatedAt.Equal(created) || !got.UpdatedAt.Equal(created) || !got.ReadyAt.Equal(created) || !got.ScheduledAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("stamped card = created %v, updated %v, ready %v, scheduled %v; want %v thrice, then %v",
			got.CreatedAt, got.UpdatedAt, got.ReadyAt, got.ScheduledAt, created, t0.Add(time.Hour))
	}

	f.clk.Advance(time.Second)
	claimed := f.clk.Now()
	k = got
	k.Status, k.UpdatedAt = kanban.StatusRunning, base
	k.Claim = &kanban.Claim{Owner: "gw-a", Token: 2, Expires: base.Add(15 * time.Minute), Run: "run_1", Lane: "herald", Heartbeat: base, Started: base}
	run := kanban.Run{ID: "run_1", Card: k.ID, Board: "ops", Lane: "herald", Owner: "gw-a", Started: base}
	evs = f.apply(kanban.Change{Stamp: true, Bookkeeping: true, Cards: []kanban.CardWrite{{Card: k, From: 1}}, Runs: []kanban.Run{run},
		Events: []kanban.Event{{Board: "ops", Card: k.ID, Kind: kanban.EventClaimed, From: kanban.StatusReady, To: kanban.StatusRunning, Run: "run_1", At: base}}})
	if len(evs) != 1 || !evs[0].At.Equal(claimed) {
		t.Errorf("the stamped claim's events = %+v, want one at %v", evs, claimed)
	}
	got = f.card(k.ID)
	if got.Version != 2 || got.Claim == nil || !got.Claim.Expires.Equal(claimed.Add(15*time.Minute)) ||
		!got.Claim.Started.Equal(claimed) || !got.Claim.Heartbeat.Equal(claimed) || !got.UpdatedAt.Equal(claimed) || !got.CreatedAt.Equal(created) {
		t.Errorf("claimed card = %+v (claim %+v), want version 2, claimed at %v for 15 minutes, created at %v", got, got.Claim, claimed, created)
	}
	if rs, err := f.kb().Runs(f.ctx, k.ID); err != nil || len(rs) != 1 || !rs[0].Started.Equal(claimed) {
		t.Errorf("Runs = %+v, %v; want run_1 started at %v", rs, err, claimed)
	}

	f.clk.Advance(time.Second)
	done := f.clk.Now()
	k = got
	k.Status, k.Claim, k.UpdatedAt, k.CompletedAt = kanban.StatusDone, nil, base, base
	run.Started, run.Ended, run.Outcome = claimed, base, kanban.OutcomeCompleted
	f.apply(kanban.Change{Stamp: true, Cards: []kanban.CardWrite{{Card: k, From: 2}}, Runs: []kanban.Run{run},
		Comments: []kanban.Comment{{ID: "cm_1", Card: k.ID, Text: "done", At: base}},
		Events:   []kanban.Event{{Board: "ops", Card: k.ID, Kind: kanban.EventCompleted, To: kanban.StatusDone, Run: "run_1", At: base}}})
	got = f.card(k.ID)
	if got.Version != 3 || !got.CompletedAt.Equal(done) {
		t.Errorf("completed card = version %d, completed at %v; want 3, %v", got.Version, got.CompletedAt, done)
	}
	if rs, err := f.kb().Runs(f.ctx, k.ID); err != nil || len(rs) != 1 || !rs[0].Started.Equal(claimed) || !rs[0].Ended.Equal(done) {
		t.Errorf("Runs = %+v, %v; want run_1 from %v to %v", rs, err, claimed, done)
	}
	if cs, err := f.kb().Comments(f.ctx, k.ID); err != nil || len(cs) != 1 || !cs[0].At.Equal(done) {
		t.Errorf("Comments = %+v, %v; want one at %v", cs, err, done)
	}
	want := []time.Time{created, claimed, done}
	all := f.events(kanban.EventQuery{Board: "ops", Card: k.ID})
	if len(all) != len(want) {
		t.Fatalf("events = %+v, want 3", all)
	}
	for i, e := range all {
		if !e.At.Equal(want[i]) {
			t.Errorf("event %d (%s) at %v, want %v", i, e.Kind, e.At, want[i])
		}
	}
}
