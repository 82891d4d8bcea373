package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// TestSignalsPruned checks that the signals table forgets what is older
// than the keep window.
func TestSignalsPruned(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Signals(), context.Background()
	for range 20 {
		if err := s.Signal(ctx, signals.Signal{Conv: "c", Kind: signals.Stop}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(signalsKeep + time.Minute)
	if err := s.Signal(ctx, signals.Signal{Conv: "c", Kind: signals.Interrupt}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM signals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d signals kept, want 1: the older ones are past the keep window", n)
	}
}

// A file written before timeline items kept what they reply to (schema
// version 3) opens with its items, which reply to nothing, and keeps
// reply_to from then on.
func TestVersion3FileGainsReplyTo(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 3, `INSERT INTO timeline (conv, item_id, kind, text, at) VALUES ('api:c', 'o1', 'reply', 'before', 1)`)
	s := openAt(t, path, nil, sessions.Limits{}).Timeline()
	if _, err := s.AppendTimeline(ctx, sessions.TimelineItem{Conv: "api:c", ID: "o2", Kind: "reply", Text: "after", ReplyTo: "m2"}); err != nil {
		t.Fatal(err)
	}
	items, err := s.ReadTimeline(ctx, "api:c", "", 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("ReadTimeline = %+v, %v; want both items", items, err)
	}
	if items[0].Text != "before" || items[0].ReplyTo != "" || items[1].ReplyTo != "m2" {
		t.Errorf("items after the upgrade = %+v; want the old one replying to nothing, the new one to m2", items)
	}
}

// A file written before timeline items kept the files they sent (schema
// version 23) opens with its items, which sent none, and keeps files from
// then on.
func TestVersion23FileGainsTimelineFiles(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 23, `INSERT INTO timeline (conv, item_id, kind, text, at, reply_to, meta) VALUES ('api:c', 'o1', 'reply', 'before', 1, '', '')`)
	s := openAt(t, path, nil, sessions.Limits{}).Timeline()
	file := sessions.TimelineFile{Name: "a.png", MIME: "image/png", Size: 3, URL: "/x"}
	if _, err := s.AppendTimeline(ctx, sessions.TimelineItem{Conv: "api:c", ID: "o2", Kind: "file", Files: []sessions.TimelineFile{file}}); err != nil {
		t.Fatal(err)
	}
	items, err := s.ReadTimeline(ctx, "api:c", "", 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("ReadTimeline = %+v, %v; want both items", items, err)
	}
	if items[0].Text != "before" || items[0].Files != nil || len(items[1].Files) != 1 || items[1].Files[0] != file {
		t.Errorf("items after the upgrade = %+v; want the old one with no files, the new one with its file", items)
	}
}

// A file written before signals kept a steered entry's message id
// (schema version 4) opens with its signals, which name no message, and
// keeps the message id from then on.
func TestVersion4FileGainsSignalMessageIDs(t *testing.T) {
	ctx := context.Background()
	at := time.Now().UnixNano()
	path := oldFile(t, 4, fmt.Sprintf(`INSERT INTO signals (conv, kind, entry_id, text, at) VALUES ('api:c', 'steer', '1', 'before', %d)`, at))
	s := openAt(t, path, nil, sessions.Limits{}).Signals()
	if err := s.Signal(ctx, signals.Signal{Conv: "api:c", Kind: signals.Steer, EntryID: "2", Text: "after", MessageID: "m2"}); err != nil {
		t.Fatal(err)
	}
	sigs, _, err := s.SignalsAfter(ctx, "0", 10)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("SignalsAfter = %+v, %v; want both signals", sigs, err)
	}
	if sigs[0].Text != "before" || sigs[0].MessageID != "" || sigs[1].MessageID != "m2" {
		t.Errorf("signals after the upgrade = %+v; want the old one naming no message, the new one m2", sigs)
	}
}

// A file written before signals kept a target (schema version 5) opens
// with its signals, which name none, and keeps a domain's target from
// then on.
func TestVersion5FileGainsSignalTargets(t *testing.T) {
	ctx := context.Background()
	at := time.Now().UnixNano()
	path := oldFile(t, 5, fmt.Sprintf(`INSERT INTO signals (conv, kind, entry_id, text, message_id, at) VALUES ('api:c', 'stop', '', 'before', '', %d)`, at))
	s := openAt(t, path, nil, sessions.Limits{}).Signals()
	if err := s.Signal(ctx, signals.Signal{Conv: "api:c", Kind: "delegation.stop", Target: "sub-1"}); err != nil {
		t.Fatal(err)
	}
	sigs, _, err := s.SignalsAfter(ctx, "0", 10)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("SignalsAfter = %+v, %v; want both signals", sigs, err)
	}
	if sigs[0].Text != "before" || sigs[0].Target != "" || sigs[1].Kind != "delegation.stop" || sigs[1].Target != "sub-1" {
		t.Errorf("signals after the upgrade = %+v; want the old one naming no target, the new one sub-1", sigs)
	}
}

// A file written before approvals (schema version 24) opens and keeps
// them from then on.
func TestVersion24FileGainsApprovals(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 24)
	s := openAt(t, path, nil, sessions.Limits{}).Approvals()
	if err := s.CreateApproval(ctx, approvals.Approval{ID: "appr_1", Conv: "api:c", Key: "e1:call-1", Pattern: "sudo"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddGrant(ctx, approvals.Grant{Pattern: "sudo", GrantedBy: "u-1"}); err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingApprovals(ctx, "")
	if err != nil || len(pending) != 1 || pending[0].ID != "appr_1" {
		t.Errorf("PendingApprovals after the upgrade = %+v, %v; want appr_1", pending, err)
	}
	if gone, err := s.Revoke(ctx, "sudo"); err != nil || !gone {
		t.Errorf("Revoke(sudo) after the upgrade = %v, %v; want true", gone, err)
	}
}

// A file written while runs and events had rowids and an AUTOINCREMENT
// seq (schema version 27) opens with its runs and events: a run written
// again is the same run, and the next event's cursor comes after the
// last one's.
func TestVersion27FileKeepsKanbanRunsAndEvents(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 27,
		`INSERT INTO kanban_runs (id, card, started, run) VALUES ('run_1', 't_1', 1, '{"id":"run_1","card":"t_1","board":"ops"}')`,
		`INSERT INTO kanban_events (seq, board, card, event) VALUES (9, 'ops', 't_1', '{"board":"ops","card":"t_1","kind":"created"}')`)
	st := openAt(t, path, nil, sessions.Limits{}).Kanban()
	evs, err := st.Apply(ctx, kanban.Change{
		Runs:   []kanban.Run{{ID: "run_1", Card: "t_1", Board: "ops", Outcome: kanban.OutcomeCompleted}},
		Events: []kanban.Event{{Board: "ops", Card: "t_1", Kind: kanban.EventCompleted}}})
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Cursor != "10" {
		t.Errorf("the new event's cursor = %q, want 10, after the old one's 9", evs[0].Cursor)
	}
	runs, err := st.Runs(ctx, "t_1")
	if err != nil || len(runs) != 1 || runs[0].Outcome != kanban.OutcomeCompleted {
		t.Errorf("Runs = %+v, %v; want run_1 alone, completed", runs, err)
	}
	all, err := st.Events(ctx, kanban.EventQuery{Board: "ops", Card: "t_1"})
	if err != nil || len(all) != 2 || all[0].Cursor != "9" || all[1].Cursor != "10" {
		t.Errorf("Events = %+v, %v; want the old one at 9, the new one at 10", all, err)
	}
}

// A file written while a card's runs and events were keyed by its id
// (schema version 28) opens with them: each found by its card, a run
// written again the same run, and the cards made next keyed after the
// old ones.
func TestVersion28FileKeepsKanbanRunsAndEvents(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 28,
		`INSERT INTO kanban_cards (rowid, id, board, status, priority, created_at, idem_key, version, card)
			VALUES (7, 't_1', 'ops', 'running', 0, 1, '', 2, '{"id":"t_1","board":"ops","title":"old","status":"running"}')`,
		`INSERT INTO kanban_runs (card, id, started, run) VALUES ('t_1', 'run_1', 1, '{"id":"run_1","card":"t_1","board":"ops"}')`,
		`INSERT INTO kanban_runs (card, id, started, run) VALUES ('t_gone', 'run_2', 1, '{"id":"run_2","card":"t_gone","board":"ops"}')`,
		`INSERT INTO kanban_events (seq, board, card, event) VALUES (9, 'ops', 't_1', '{"board":"ops","card":"t_1","kind":"created"}')`,
		`INSERT INTO kanban_events (seq, board, card, event) VALUES (10, 'ops', 't_gone', '{"board":"ops","card":"t_gone","kind":"created"}')`)
	d := openAt(t, path, nil, sessions.Limits{})
	st := d.Kanban()
	k, err := st.Card(ctx, "t_1")
	if err != nil || k.Title != "old" || k.Version != 2 {
		t.Fatalf("Card(t_1) = %+v, %v; want the old card at version 2", k, err)
	}
	k.Status = kanban.StatusDone
	if _, err := st.Apply(ctx, kanban.Change{
		Cards:  []kanban.CardWrite{{Card: k, From: 2}, {Card: kanban.Card{ID: "t_2", Board: "ops", Title: "new", Status: kanban.StatusReady}}},
		Runs:   []kanban.Run{{ID: "run_1", Card: "t_1", Board: "ops", Outcome: kanban.OutcomeCompleted}},
		Events: []kanban.Event{{Board: "ops", Card: "t_1", Kind: kanban.EventCompleted}}}); err != nil {
		t.Fatal(err)
	}
	var row int64
	if err := d.rdb.QueryRowContext(ctx, `SELECT row FROM kanban_cards WHERE id = 't_2'`).Scan(&row); err != nil || row != 8 {
		t.Errorf("the new card's row = %d, %v; want 8, after the old card's 7", row, err)
	}
	runs, err := st.Runs(ctx, "t_1")
	if err != nil || len(runs) != 1 || runs[0].Outcome != kanban.OutcomeCompleted {
		t.Errorf("Runs(t_1) = %+v, %v; want run_1 alone, completed", runs, err)
	}
	if runs, err := st.Runs(ctx, "t_gone"); err != nil || len(runs) != 1 || runs[0].ID != "run_2" {
		t.Errorf("Runs(t_gone) = %+v, %v; want run_2", runs, err)
	}
	evs, err := st.Events(ctx, kanban.EventQuery{Board: "ops", Card: "t_1"})
	if err != nil || len(evs) != 2 || evs[0].Cursor != "9" || evs[1].Cursor != "11" {
		t.Errorf("Events(t_1) = %+v, %v; want the old one at 9, the new one at 11", evs, err)
	}
	if evs, err := st.Events(ctx, kanban.EventQuery{Board: "ops", Card: "t_gone"}); err != nil || len(evs) != 1 || evs[0].Cursor != "10" {
		t.Errorf("Events(t_gone) = %+v, %v; want the one at 10", evs, err)
	}
}

// A file written when workers stored the running-turn mark (before
// schema version 31) opens without it: the mark a worker left behind,
// its turn long gone, tells nothing, and the other metadata stays.
func TestVersion30FileDropsStoredTurnMarks(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 30,
		`INSERT INTO meta (conv, key, value) VALUES ('api:c', 'turn', '{"entry":"9","text":"long gone"}')`,
		`INSERT INTO meta (conv, key, value) VALUES ('api:c', 'busy_input_mode', 'queue')`)
	d := openAt(t, path, nil, sessions.Limits{})
	s := d.Sessions()
	m, err := s.Meta(ctx, "api:c")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"busy_input_mode": "queue"}; !maps.Equal(m, want) {
		t.Errorf("Meta after the upgrade = %v, want %v", m, want)
	}
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var left int
	if err := raw.QueryRow(`SELECT count(*) FROM meta WHERE key = 'turn'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d stored marks left after the migration (%v), want none", left, err)
	}

	// A process of the version before, sharing the file, stores a mark
	// and dies: neither Meta nor the list tells it.
	if _, err := raw.Exec(`INSERT INTO meta (conv, key, value) VALUES ('api:c', 'turn', '{"entry":"9","text":"left behind"}')`); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Meta(ctx, "api:c"); err != nil || m[sessions.ConvMetaTurn] != "" {
		t.Errorf("Meta = %v, %v; want no mark an older process left", m, err)
	}
	mustAppend(t, s, sessions.Inbound{Conv: "api:c", Text: "hi"})
	list, err := d.Conversations().Conversations(ctx, sessions.ConvQuery{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Meta[sessions.ConvMetaTurn] != "" || list[0].Meta["busy_input_mode"] != "queue" {
		t.Errorf("Conversations = %+v, %v; want api:c with its mode and no mark an older process left", list, err)
	}
}
