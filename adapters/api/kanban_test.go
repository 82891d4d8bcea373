package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/store/sqlite"
)

// kanbanFixture is an API serving the kanban routes with the real
// service over a real SQLite store, both on one fake clock.
type kanbanFixture struct {
	*fixture
	clk    *clock.Fake
	svc    *kanban.Service
	tokens kanban.Tokens
}

const kanbanTTL = 10 * time.Minute

func newKanbanFixture(t *testing.T, edit func(*api.Options)) *kanbanFixture {
	t.Helper()
	clk := clock.NewFake(epoch)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &kanbanFixture{clk: clk, svc: &kanban.Service{Store: db.Kanban()}, tokens: kanban.Tokens{Key: []byte("test-signing-key")}}
	f.fixture = newFixture(t, func(o *api.Options) {
		o.Clock = clk
		o.Routes = append(o.Routes, api.KanbanRoutes(f.svc, f.tokens, kanbanTTL))
		if edit != nil {
			edit(o)
		}
	})
	return f
}

// cardAnswer is a card as the API answers it.
type cardAnswer struct {
	kanban.Card
	MaxRuntime int64            `json:"max_runtime_seconds"`
	Comments   []kanban.Comment `json:"comments"`
	Events     []kanban.Event   `json:"events"`
	Runs       []kanban.Run     `json:"runs"`
}

func decodeCard(t *testing.T, b []byte) cardAnswer {
	t.Helper()
	var k cardAnswer
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return k
}

// create posts body to the board's cards and returns the card made.
func (f *kanbanFixture) create(t *testing.T, board, body string) cardAnswer {
	t.Helper()
	code, b := f.do(t, "POST", "/api/v1/kanban/boards/"+board+"/cards", body)
	if code != http.StatusCreated {
		t.Fatalf("create %s: %d %s, want 201", body, code, b)
	}
	return decodeCard(t, b)
}

// claim takes card id for lane coder, as a dispatcher would, and
// returns its worker token.
func (f *kanbanFixture) claim(t *testing.T, id string) string {
	t.Helper()
	k, err := f.svc.Claim(context.Background(), id, kanban.ClaimSpec{Owner: "test", Lane: "coder", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return f.tokens.Mint(id, k.Claim.Token)
}

func (f *kanbanFixture) patch(t *testing.T, id, body string) (int, cardAnswer, []byte) {
	t.Helper()
	code, b := f.do(t, "PATCH", "/api/v1/kanban/cards/"+id, body)
	var k cardAnswer
	if code == http.StatusOK {
		k = decodeCard(t, b)
	}
	return code, k, b
}

func TestKanbanBoards(t *testing.T) {
	f := newKanbanFixture(t, nil)
	boards := func() []string {
		t.Helper()
		code, b := f.do(t, "GET", "/api/v1/kanban/boards", "")
		var got struct{ Boards []kanban.Board }
		if err := json.Unmarshal(b, &got); code != http.StatusOK || err != nil {
			t.Fatalf("boards: %d %s", code, b)
		}
		var slugs []string
		for _, b := range got.Boards {
			slugs = append(slugs, b.Slug)
		}
		return slugs
	}
	if diff := cmp.Diff([]string{"default"}, boards()); diff != "" {
		t.Errorf("boards of a new store (-want +got):\n%s", diff)
	}
	for _, slug := range []string{"ops", "alpha"} {
		if err := f.svc.Store.PutBoard(context.Background(), kanban.Board{Slug: slug}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"alpha", "default", "ops"}, boards()); diff != "" {
		t.Errorf("boards (-want +got):\n%s", diff)
	}
}

func TestKanbanCreate(t *testing.T) {
	f := newKanbanFixture(t, nil)
	parent := f.create(t, "default", `{"title": "parent"}`)
	k := f.create(t, "default", `{"title": " write the docs ", "body": "all of them", "assignee": "Coder", "priority": 3,
		"parents": ["`+parent.ID+`"], "review": true, "completion_check": "true", "workspace": {"kind": "dir", "path": "/tmp/w"},
		"max_runtime_seconds": 90, "max_retries": 4, "tenant": "acme"}`)
	want := cardAnswer{Card: kanban.Card{
		ID: k.ID, Board: "default", Title: "write the docs", Body: "all of them", Assignee: "coder", Priority: 3,
		Status: kanban.StatusTodo, Parents: []string{parent.ID}, Workspace: kanban.Workspace{Kind: kanban.WorkspaceDir, Path: "/tmp/w"},
		MaxRetries: 4, CreatedBy: "api", Tenant: "acme", Review: true, CompletionCheck: "true",
		CreatedAt: epoch, UpdatedAt: epoch, Version: 1,
	}, MaxRuntime: 90}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if stored, err := f.svc.Store.Card(context.Background(), k.ID); err != nil || stored.MaxRuntime.Duration() != 90*time.Second {
		t.Errorf("stored max runtime %v, %v; want 90s", stored.MaxRuntime, err)
	}
	if parent.Status != kanban.StatusReady || parent.Board != "default" {
		t.Errorf("a card without parents: %s on %s, want ready on default", parent.Status, parent.Board)
	}
	other := f.create(t, "ops", `{"title": "elsewhere"}`)
	if other.Board != "ops" {
		t.Errorf("created on board %q, want ops", other.Board)
	}
}

func TestKanbanCreateIdempotent(t *testing.T) {
	f := newKanbanFixture(t, nil)
	first := f.create(t, "default", `{"title": "once", "idempotency_key": "k1"}`)
	for _, tt := range []struct {
		desc   string
		body   string
		header []string
	}{
		{desc: "the key in the body", body: `{"title": "once again", "idempotency_key": "k1"}`},
		{desc: "the key in the Idempotency-Key header", body: `{"title": "once again"}`, header: []string{"Idempotency-Key", "k1"}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			code, b := f.do(t, "POST", "/api/v1/kanban/boards/default/cards", tt.body, tt.header...)
			if code != http.StatusOK {
				t.Fatalf("%d %s, want 200", code, b)
			}
			if k := decodeCard(t, b); k.ID != first.ID || k.Title != "once" {
				t.Errorf("answered %s %q, want the first card %s", k.ID, k.Title, first.ID)
			}
		})
	}
	if cards, _ := f.svc.Store.Cards(context.Background(), kanban.Query{Board: "default"}); len(cards) != 1 {
		t.Errorf("%d cards, want 1", len(cards))
	}
}

func TestKanbanList(t *testing.T) {
	f := newKanbanFixture(t, nil)
	ctx := context.Background()
	// Cards of one priority are listed oldest first.
	create := func(board, body string) cardAnswer {
		f.clk.Advance(time.Second)
		return f.create(t, board, body)
	}
	low := create("default", `{"title": "low", "assignee": "coder", "tenant": "acme"}`)
	high := create("default", `{"title": "high", "priority": 5, "assignee": "writer"}`)
	todo := create("default", `{"title": "todo", "status": "todo", "tenant": "acme"}`)
	gone := create("default", `{"title": "gone"}`)
	create("ops", `{"title": "another board"}`)
	if _, err := f.svc.Archive(ctx, gone.ID, "test"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		desc  string
		query string
		want  []string
	}{
		{"every card not archived, by priority", "", []string{high.ID, low.ID, todo.ID}},
		{"one status", "?status=ready", []string{high.ID, low.ID}},
		{"statuses repeated", "?status=todo&status=archived", []string{todo.ID, gone.ID}},
		{"statuses comma-separated", "?status=todo,archived", []string{todo.ID, gone.ID}},
		{"an assignee, any case", "?assignee=Coder", []string{low.ID}},
		{"a tenant", "?tenant=acme", []string{low.ID, todo.ID}},
		{"archived too", "?archived=true", []string{high.ID, low.ID, todo.ID, gone.ID}},
		{"a limit", "?limit=2", []string{high.ID, low.ID}},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			code, b := f.do(t, "GET", "/api/v1/kanban/boards/default/cards"+tt.query, "")
			var got struct{ Cards []cardAnswer }
			if err := json.Unmarshal(b, &got); code != http.StatusOK || err != nil {
				t.Fatalf("%d %s", code, b)
			}
			ids := []string{}
			for _, k := range got.Cards {
				ids = append(ids, k.ID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
		})
	}
	if code, b := f.do(t, "GET", "/api/v1/kanban/boards/empty/cards", ""); code != http.StatusOK || strings.TrimSpace(string(b)) != `{"cards":[]}` {
		t.Errorf("an empty board: %d %s, want an empty list", code, b)
	}
}

func TestKanbanBadInput(t *testing.T) {
	f := newKanbanFixture(t, func(o *api.Options) { o.MaxBodyBytes = 1024 })
	k := f.create(t, "default", `{"title": "a card"}`)
	card := "/api/v1/kanban/cards/" + k.ID
	for _, tt := range []struct {
		desc         string
		method, path string
		body         string
		status       int
		typ          string
		says         string // in the message
	}{
		{"no title", "POST", "/api/v1/kanban/boards/default/cards", `{"body": "b"}`, 400, "invalid_request_error", "a card needs a title"},
		{"a status a card cannot start in", "POST", "/api/v1/kanban/boards/default/cards", `{"title": "t", "status": "done"}`, 400, "invalid_request_error", "triage, todo, blocked or scheduled"},
		{"an unknown parent", "POST", "/api/v1/kanban/boards/default/cards", `{"title": "t", "parents": ["t_nope"]}`, 400, "invalid_request_error", "parent t_nope is not a card of board default"},
		{"a bad workspace", "POST", "/api/v1/kanban/boards/default/cards", `{"title": "t", "workspace": {"kind": "cloud"}}`, 400, "invalid_request_error", "scratch, worktree or dir"},
		{"a negative runtime", "POST", "/api/v1/kanban/boards/default/cards", `{"title": "t", "max_runtime_seconds": -1}`, 400, "invalid_request_error", "may not be negative"},
		{"a bad board", "POST", "/api/v1/kanban/boards/No%20Such/cards", `{"title": "t"}`, 400, "invalid_request_error", "a slug is"},
		{"bad JSON", "POST", "/api/v1/kanban/boards/default/cards", `{"title": `, 400, "invalid_request_error", "not valid JSON"},
		{"over the body limit", "POST", "/api/v1/kanban/boards/default/cards", `{"title": "` + strings.Repeat("x", 2048) + `"}`, 413, "request_too_large", "over the limit"},
		{"a bad status filter", "GET", "/api/v1/kanban/boards/default/cards?status=doing", "", 400, "invalid_request_error", `status "doing" is not one of triage`},
		{"a bad limit", "GET", "/api/v1/kanban/boards/default/cards?limit=0", "", 400, "invalid_request_error", "not a positive number"},
		{"a bad archived", "GET", "/api/v1/kanban/boards/default/cards?archived=maybe", "", 400, "invalid_request_error", "not true or false"},
		{"a bad board to list", "GET", "/api/v1/kanban/boards/BIG/cards", "", 400, "invalid_request_error", "a slug is"},
		{"a bad cursor", "GET", "/api/v1/kanban/boards/default/events?after=bogus", "", 400, "invalid_request_error", "cursor"},
		{"a patch of a field that cannot change", "PATCH", card, `{"tenant": "new"}`, 400, "invalid_request_error", `"tenant" cannot be changed; a patch may give status, assignee, title, body, priority`},
		{"a patch of priority that is not a number", "PATCH", card, `{"priority": "high"}`, 400, "invalid_request_error", `priority`},
		{"a patch of an empty title", "PATCH", card, `{"title": " ", "body": "b"}`, 400, "invalid_request_error", "a card needs a title"},
		{"a patch of a title that is not a string", "PATCH", card, `{"title": 7}`, 400, "invalid_request_error", "title"},
		{"a patch of a null title", "PATCH", card, `{"title": null}`, 400, "invalid_request_error", "nothing to change"},
		{"a patch of nothing", "PATCH", card, `{}`, 400, "invalid_request_error", "nothing to change"},
		{"a patch that is not an object", "PATCH", card, `[1]`, 400, "invalid_request_error", "a JSON object"},
		{"a status that cannot be asked for", "PATCH", card, `{"status": "running"}`, 400, "invalid_request_error", "the moves are blocked, ready, todo, review, done, scheduled and archived"},
		{"todo for a ready card", "PATCH", card, `{"status": "todo"}`, 400, "invalid_request_error", "unblocks a blocked or triaged card"},
		{"a block without a reason", "PATCH", card, `{"status": "blocked"}`, 400, "invalid_request_error", "a block needs a reason"},
		{"an unknown block kind", "PATCH", card, `{"status": "blocked", "reason": "r", "kind": "bored"}`, 400, "invalid_request_error", "dependency, needs_input"},
		{"done out of review", "PATCH", card, `{"status": "done"}`, 400, "invalid_request_error", "not in review"},
		{"a schedule without a time", "PATCH", card, `{"status": "scheduled"}`, 400, "invalid_request_error", "a schedule needs a time"},
		{"an empty comment", "POST", card + "/comments", `{"text": " "}`, 400, "invalid_request_error", "an empty comment"},
		{"a complete without a summary", "POST", card + "/complete", `{}`, 400, "invalid_request_error", "needs a summary"},
		{"a wrong method", "DELETE", card, "", 405, "invalid_request_error", "use GET or PATCH"},
		{"a wrong method on the cards", "PUT", "/api/v1/kanban/boards/default/cards", "", 405, "invalid_request_error", "use GET or POST"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			status, body := f.do(t, tt.method, tt.path, tt.body, "Content-Type", "application/json")
			var e errorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q is not a JSON error: %v", body, err)
			}
			if status != tt.status || e.Error.Type != tt.typ || !strings.Contains(e.Error.Message, tt.says) {
				t.Errorf("got %d %s, want %d with type %s saying %q", status, body, tt.status, tt.typ, tt.says)
			}
		})
	}
	if got, _ := f.svc.Store.Card(context.Background(), k.ID); got.Status != kanban.StatusReady || got.Version != 1 {
		t.Errorf("the card after bad requests: %s v%d, want ready v1, unchanged", got.Status, got.Version)
	}
}

func TestKanbanNotFound(t *testing.T) {
	f := newKanbanFixture(t, nil)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/kanban/cards/t_00000000", ""},
		{"PATCH", "/api/v1/kanban/cards/t_00000000", `{"status": "archived"}`},
		{"POST", "/api/v1/kanban/cards/t_00000000/comments", `{"text": "hi"}`},
		{"POST", "/api/v1/kanban/cards/t_00000000/complete", `{"summary": "s"}`},
		{"POST", "/api/v1/kanban/cards/t_00000000/block", `{"reason": "r"}`},
		{"POST", "/api/v1/kanban/cards/t_00000000/heartbeat", ``},
	} {
		code, b := f.do(t, r.method, r.path, r.body)
		var e errorBody
		_ = json.Unmarshal(b, &e)
		if code != http.StatusNotFound || e.Error.Type != "not_found_error" || !strings.Contains(e.Error.Message, "no card t_00000000") {
			t.Errorf("%s %s: %d %s, want 404 naming the card", r.method, r.path, code, b)
		}
	}
}

func TestKanbanShow(t *testing.T) {
	f := newKanbanFixture(t, nil)
	ctx := context.Background()
	k := f.create(t, "default", `{"title": "shown"}`)
	f.create(t, "default", `{"title": "another"}`)
	if code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+k.ID+"/comments", `{"text": "first", "author": "ann"}`); code != http.StatusCreated {
		t.Fatalf("comment: %d %s", code, b)
	}
	f.claim(t, k.ID)
	claimed, _ := f.svc.Store.Card(ctx, k.ID)
	if _, err := f.svc.Release(ctx, k.ID, claimed.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeCrashed, Reason: "boom"}); err != nil {
		t.Fatal(err)
	}
	code, b := f.do(t, "GET", "/api/v1/kanban/cards/"+k.ID, "")
	if code != http.StatusOK {
		t.Fatalf("show: %d %s", code, b)
	}
	got := decodeCard(t, b)
	if got.ID != k.ID || got.Status != kanban.StatusReady || got.Failures != 1 {
		t.Errorf("card %s %s failures %d, want %s ready with 1 failure", got.ID, got.Status, got.Failures, k.ID)
	}
	if len(got.Comments) != 1 || got.Comments[0].Text != "first" || got.Comments[0].Author != "ann" {
		t.Errorf("comments = %+v", got.Comments)
	}
	var kinds []string
	for _, ev := range got.Events {
		if ev.Card != k.ID {
			t.Errorf("event %+v of another card", ev)
		}
		kinds = append(kinds, ev.Kind)
	}
	if diff := cmp.Diff([]string{"created", "commented", "claimed", "crashed"}, kinds); diff != "" {
		t.Errorf("event kinds (-want +got):\n%s", diff)
	}
	if len(got.Runs) != 1 || got.Runs[0].Outcome != kanban.OutcomeCrashed || got.Runs[0].Lane != "coder" {
		t.Errorf("runs = %+v", got.Runs)
	}

	// A card answers with its latest 100 events only, oldest first.
	many := f.create(t, "default", `{"title": "talked about"}`)
	for i := range 120 {
		if _, err := f.svc.Comment(ctx, many.ID, "bot", strings.Repeat("x", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	_, b = f.do(t, "GET", "/api/v1/kanban/cards/"+many.ID, "")
	got = decodeCard(t, b)
	if n := len(got.Events); n != 100 || got.Events[0].Text != strings.Repeat("x", 21) || got.Events[99].Text != strings.Repeat("x", 120) {
		t.Errorf("%d events, from %d to %d x's; want the latest 100 (21…120)", n, len(got.Events[0].Text), len(got.Events[n-1].Text))
	}
	if len(got.Comments) != 120 || got.Runs == nil {
		t.Errorf("%d comments, runs %v; want all 120 and an empty list", len(got.Comments), got.Runs)
	}
}

func TestKanbanPatch(t *testing.T) {
	f := newKanbanFixture(t, nil)
	ctx := context.Background()
	at := epoch.Add(time.Hour)
	tests := []struct {
		desc string
		// setup brings a new card to where the patch starts.
		setup     func(t *testing.T, id string)
		body      string
		status    kanban.Status
		check     func(t *testing.T, k cardAnswer)
		lastEvent string
	}{
		{
			desc: "priority", body: `{"priority": 9}`,
			status: kanban.StatusReady, lastEvent: kanban.EventPrioritized,
			check: func(t *testing.T, k cardAnswer) {
				if k.Priority != 9 {
					t.Errorf("priority %d, want 9", k.Priority)
				}
			},
		},
		{
			desc: "title and body", body: `{"title": "  the new title ", "body": "the new body"}`,
			status: kanban.StatusReady, lastEvent: kanban.EventEdited,
			check: func(t *testing.T, k cardAnswer) {
				if k.Title != "the new title" || k.Body != "the new body" {
					t.Errorf("title %q, body %q", k.Title, k.Body)
				}
			},
		},
		{
			desc: "title, body and priority of a running card", body: `{"title": "renamed", "body": "", "priority": 2}`,
			setup:  func(t *testing.T, id string) { f.claim(t, id) },
			status: kanban.StatusRunning, lastEvent: kanban.EventPrioritized,
			check: func(t *testing.T, k cardAnswer) {
				if k.Title != "renamed" || k.Body != "" || k.Priority != 2 || k.Claim == nil {
					t.Errorf("card %+v, want renamed, its body emptied, priority 2, still claimed", k)
				}
			},
		},
		{
			desc: "blocked with a reason and kind", body: `{"status": "blocked", "reason": "needs a key", "kind": "capability"}`,
			status: kanban.StatusBlocked, lastEvent: kanban.EventBlocked,
			check: func(t *testing.T, k cardAnswer) {
				if k.BlockKind != kanban.BlockCapability || k.BlockReason != "needs a key" {
					t.Errorf("blocked %s: %q", k.BlockKind, k.BlockReason)
				}
			},
		},
		{
			desc: "ready unblocks", body: `{"status": "ready"}`, status: kanban.StatusReady, lastEvent: kanban.EventUnblocked,
			setup: func(t *testing.T, id string) { f.block(t, id) },
		},
		{
			desc: "todo unblocks too, to ready when every parent is done", body: `{"status": "todo"}`, status: kanban.StatusReady, lastEvent: kanban.EventUnblocked,
			setup: func(t *testing.T, id string) { f.block(t, id) },
		},
		{
			desc: "assignee", body: `{"assignee": "Writer"}`, status: kanban.StatusReady, lastEvent: kanban.EventAssigned,
			check: func(t *testing.T, k cardAnswer) {
				if k.Assignee != "writer" {
					t.Errorf("assignee %q", k.Assignee)
				}
			},
		},
		{
			desc: "assignee and a move at once", body: `{"assignee": "writer", "status": "archived"}`, status: kanban.StatusArchived, lastEvent: kanban.EventArchived,
			check: func(t *testing.T, k cardAnswer) {
				if k.Assignee != "writer" {
					t.Errorf("assignee %q", k.Assignee)
				}
			},
		},
		{
			desc: "scheduled_at alone schedules", body: `{"scheduled_at": "` + at.Format(time.RFC3339) + `"}`, status: kanban.StatusScheduled, lastEvent: kanban.EventMoved,
			check: func(t *testing.T, k cardAnswer) {
				if !k.ScheduledAt.Equal(at) {
					t.Errorf("scheduled at %v, want %v", k.ScheduledAt, at)
				}
			},
		},
		{desc: "archived", body: `{"status": "archived"}`, status: kanban.StatusArchived, lastEvent: kanban.EventArchived},
		{desc: "review", body: `{"status": "review", "reason": "have a look"}`, status: kanban.StatusReview, lastEvent: kanban.EventReview},
		{
			desc: "done approves a card in review", body: `{"status": "done", "reason": "fine"}`, status: kanban.StatusDone, lastEvent: kanban.EventApproved,
			setup: func(t *testing.T, id string) { f.toReview(t, id) },
		},
		{
			desc: "ready sends a card in review back", body: `{"status": "ready", "reason": "add tests"}`, status: kanban.StatusReady, lastEvent: kanban.EventChanges,
			setup: func(t *testing.T, id string) { f.toReview(t, id) },
		},
		{desc: "the status it has is no change", body: `{"status": "ready"}`, status: kanban.StatusReady, lastEvent: kanban.EventCreated},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			k := f.create(t, "default", `{"title": "patched"}`)
			if tt.setup != nil {
				tt.setup(t, k.ID)
			}
			code, got, b := f.patch(t, k.ID, tt.body)
			if code != http.StatusOK {
				t.Fatalf("%d %s, want 200", code, b)
			}
			if got.Status != tt.status {
				t.Errorf("answered %s, want %s", got.Status, tt.status)
			}
			stored, err := f.svc.Store.Card(ctx, k.ID)
			if err != nil || stored.Status != tt.status || stored.Version != got.Version {
				t.Errorf("stored %s v%d (%v); the answer is v%d", stored.Status, stored.Version, err, got.Version)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
			evs, _ := f.svc.Store.Events(ctx, kanban.EventQuery{Board: "default", Card: k.ID})
			if last := evs[len(evs)-1]; last.Kind != tt.lastEvent || last.Actor != "api" && last.Kind != kanban.EventCreated {
				t.Errorf("last event %s by %q, want %s by api", last.Kind, last.Actor, tt.lastEvent)
			}
		})
	}

	t.Run("assignee while running", func(t *testing.T) {
		k := f.create(t, "default", `{"title": "running"}`)
		f.claim(t, k.ID)
		code, _, b := f.patch(t, k.ID, `{"assignee": "writer"}`)
		if code != http.StatusConflict || !strings.Contains(string(b), "is running") {
			t.Errorf("%d %s, want 409 saying it runs", code, b)
		}
	})
}

// block blocks card id as a person.
func (f *kanbanFixture) block(t *testing.T, id string) {
	t.Helper()
	if _, err := f.svc.Block(context.Background(), id, 0, kanban.BlockNeedsInput, "waiting", "test"); err != nil {
		t.Fatal(err)
	}
}

// toReview puts card id in review.
func (f *kanbanFixture) toReview(t *testing.T, id string) {
	t.Helper()
	if _, err := f.svc.RequestReview(context.Background(), id, 0, kanban.Result{Summary: "done"}, "test"); err != nil {
		t.Fatal(err)
	}
}

func TestKanbanComment(t *testing.T) {
	f := newKanbanFixture(t, nil)
	k := f.create(t, "default", `{"title": "talked about"}`)
	for _, tt := range []struct {
		desc, body, author string
	}{
		{"with an author", `{"text": "looks good", "author": "ann"}`, "ann"},
		{"without one", `{"text": "looks good"}`, "api"},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+k.ID+"/comments", tt.body)
			if code != http.StatusCreated {
				t.Fatalf("%d %s, want 201", code, b)
			}
			var cm kanban.Comment
			if err := json.Unmarshal(b, &cm); err != nil || cm.Card != k.ID || cm.Text != "looks good" || cm.Author != tt.author || cm.ID == "" {
				t.Errorf("comment %s (%v), want one by %s", b, err, tt.author)
			}
		})
	}
}

// kanbanStream is an open event stream of a board.
type kanbanStream struct {
	res    *http.Response
	events <-chan event
}

func (f *kanbanFixture) stream(t *testing.T, query string, header ...string) kanbanStream {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/kanban/boards/default/events"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return kanbanStream{res: res, events: readEvents(res.Body)}
}

// next returns the stream's next event, checking its id and name are
// the event's cursor and kind.
func (s kanbanStream) next(t *testing.T) kanban.Event {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("event stream ended")
		}
		var e kanban.Event
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatalf("event data %q: %v", ev.data, err)
		}
		if ev.id != e.Cursor || ev.name != e.Kind {
			t.Errorf("event id %q name %q; want the cursor %q and kind %q", ev.id, ev.name, e.Cursor, e.Kind)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return kanban.Event{}
}

func TestKanbanEvents(t *testing.T) {
	f := newKanbanFixture(t, nil)
	ctx := context.Background()
	a := f.create(t, "default", `{"title": "a"}`)
	if _, err := f.svc.Comment(ctx, a.ID, "ann", "hello"); err != nil {
		t.Fatal(err)
	}
	f.create(t, "ops", `{"title": "on another board"}`)
	evs, err := f.svc.Store.Events(ctx, kanban.EventQuery{Board: "default"})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %v, %v", evs, err)
	}
	created, commented := evs[0], evs[1]

	// The backlog after the cursor, then what is written after.
	s := f.stream(t, "?after="+created.Cursor)
	if ev := s.next(t); ev.Cursor != commented.Cursor || ev.Kind != kanban.EventCommented || ev.Text != "hello" {
		t.Errorf("first event %+v, want the comment", ev)
	}
	// Its poll timer and keep-alive ticker are armed before its first
	// read: the card below is written after that read.
	if err := f.clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	b := f.create(t, "default", `{"title": "b"}`)
	f.clk.Advance(500 * time.Millisecond)
	third := s.next(t)
	if third.Kind != kanban.EventCreated || third.Card != b.ID {
		t.Errorf("followed with %+v, want b's creation", third)
	}
	s.res.Body.Close()

	// A client that reconnects resumes after its last event; its
	// Last-Event-ID wins over the query's after.
	for _, tt := range []struct {
		desc   string
		query  string
		header []string
	}{
		{"Last-Event-ID", "", []string{"Last-Event-ID", commented.Cursor}},
		{"Last-Event-ID over after", "?after=" + created.Cursor, []string{"Last-Event-ID", commented.Cursor}},
		{"after", "?after=" + commented.Cursor, nil},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			s := f.stream(t, tt.query, tt.header...)
			if ev := s.next(t); ev.Cursor != third.Cursor {
				t.Errorf("resumed with %+v, want %s", ev, third.Cursor)
			}
			s.res.Body.Close()
		})
	}

	s = f.stream(t, "")
	if ev := s.next(t); ev.Cursor != created.Cursor {
		t.Errorf("from the start: %+v, want the first event", ev)
	}
}

// An idle event stream sends a keep-alive comment every KeepAlive of the
// API's clock.
func TestKanbanEventsKeepAlive(t *testing.T) {
	f := newKanbanFixture(t, nil)
	res, err := http.Get(f.srv.URL + "/api/v1/kanban/boards/quiet/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := f.clk.BlockUntil(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(api.DefaultKeepAlive)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ":") {
		t.Errorf("first line = %q, %v; want a comment", line, err)
	}
}

func TestKanbanWorkerRoutes(t *testing.T) {
	f := newKanbanFixture(t, func(o *api.Options) { o.APIKey = testKey })
	ctx := context.Background()
	asKey := []string{"Authorization", "Bearer " + testKey}
	create := func(title string) string {
		t.Helper()
		code, b := f.do(t, "POST", "/api/v1/kanban/boards/default/cards", `{"title": "`+title+`"}`, asKey...)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
		return decodeCard(t, b).ID
	}
	as := func(token string) []string { return []string{"Authorization", "Bearer " + token} }

	t.Run("a worker reports on its card with its token", func(t *testing.T) {
		id := create("worked")
		token := f.claim(t, id)
		f.clk.Advance(time.Minute)
		code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/heartbeat", `{"note": "half way"}`, as(token)...)
		if k := decodeCard(t, b); code != http.StatusOK || !k.Claim.Expires.Equal(f.clk.Now().Add(kanbanTTL)) {
			t.Errorf("heartbeat: %d %s, want the claim extended by the claim ttl", code, b)
		}
		code, b = f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/comments", `{"text": "a note", "author": "someone else"}`, as(token)...)
		var cm kanban.Comment
		if err := json.Unmarshal(b, &cm); code != http.StatusCreated || err != nil || cm.Author != "coder" {
			t.Errorf("comment: %d %s, want 201 by the worker's lane", code, b)
		}
		code, b = f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/complete", `{"summary": "all done", "result": "42"}`, as(token)...)
		k := decodeCard(t, b)
		if code != http.StatusOK || k.Status != kanban.StatusDone || k.Result == nil || k.Result.Result != "42" || k.Claim != nil {
			t.Errorf("complete: %d %s, want done with the result", code, b)
		}
		evs, _ := f.svc.Store.Events(ctx, kanban.EventQuery{Board: "default", Card: id})
		if last := evs[len(evs)-1]; last.Kind != kanban.EventCompleted || last.Actor != "coder" {
			t.Errorf("last event %s by %q, want completed by coder", last.Kind, last.Actor)
		}
	})

	t.Run("a worker blocks its card", func(t *testing.T) {
		id := create("stuck")
		token := f.claim(t, id)
		code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/block", `{"reason": "needs a password", "kind": "needs_input"}`, as(token)...)
		if k := decodeCard(t, b); code != http.StatusOK || k.Status != kanban.StatusBlocked || k.BlockReason != "needs a password" {
			t.Errorf("block: %d %s", code, b)
		}
	})

	t.Run("a token for another card", func(t *testing.T) {
		id, other := create("mine"), create("not mine")
		token := f.claim(t, other)
		f.claim(t, id)
		for _, action := range []string{"complete", "block", "heartbeat", "comments"} {
			code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/"+action, `{"summary": "s", "reason": "r", "text": "t"}`, as(token)...)
			if code != http.StatusForbidden || !strings.Contains(string(b), "permission_error") || !strings.Contains(string(b), "for card "+other) {
				t.Errorf("%s with another card's token: %d %s, want 403", action, code, b)
			}
		}
		if k, _ := f.svc.Store.Card(ctx, id); k.Status != kanban.StatusRunning {
			t.Errorf("the card is %s after another card's token, want running", k.Status)
		}
	})

	t.Run("a released claim", func(t *testing.T) {
		id := create("released")
		token := f.claim(t, id)
		k, _ := f.svc.Store.Card(ctx, id)
		if _, err := f.svc.Release(ctx, id, k.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeReclaimed, Reason: "gone quiet"}); err != nil {
			t.Fatal(err)
		}
		for _, action := range []string{"complete", "block", "heartbeat", "comments"} {
			code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/"+action, `{"summary": "s", "reason": "r", "text": "t"}`, as(token)...)
			if code != http.StatusConflict || !strings.Contains(string(b), "lease_lost_error") || !strings.Contains(string(b), "claim was released") {
				t.Errorf("%s after its claim was released: %d %s, want 409 saying so", action, code, b)
			}
		}
		if k, _ := f.svc.Store.Card(ctx, id); k.Status != kanban.StatusReady {
			t.Errorf("the card is %s, want ready as the release left it", k.Status)
		}
	})

	t.Run("without the key or a token", func(t *testing.T) {
		id := create("guarded")
		token := f.claim(t, id)
		forged := kanban.Tokens{Key: []byte("another gateway")}.Mint(id, 1)
		for _, tt := range []struct {
			desc         string
			method, path string
			header       []string
		}{
			{"no token", "POST", "/api/v1/kanban/cards/" + id + "/complete", nil},
			{"a token another gateway signed", "POST", "/api/v1/kanban/cards/" + id + "/complete", as(forged)},
			{"a wrong key", "POST", "/api/v1/kanban/cards/" + id + "/complete", as("nope")},
			{"a worker token on a route that is not a worker's", "GET", "/api/v1/kanban/cards/" + id, as(token)},
			{"a worker token on a patch", "PATCH", "/api/v1/kanban/cards/" + id, as(token)},
			{"a worker token on the board", "GET", "/api/v1/kanban/boards/default/cards", as(token)},
			{"a worker token on another route", "POST", "/api/v1/delegations", as(token)},
		} {
			t.Run(tt.desc, func(t *testing.T) {
				code, b := f.do(t, tt.method, tt.path, `{"summary": "s", "status": "archived"}`, tt.header...)
				if code != http.StatusUnauthorized || !strings.Contains(string(b), "authentication_error") {
					t.Errorf("%d %s, want 401", code, b)
				}
			})
		}
		if k, _ := f.svc.Store.Card(ctx, id); k.Status != kanban.StatusRunning {
			t.Errorf("the card is %s, want running", k.Status)
		}
	})

	t.Run("a person with the key", func(t *testing.T) {
		id := create("by hand")
		code, b := f.do(t, "POST", "/api/v1/kanban/cards/"+id+"/complete", `{"summary": "did it myself"}`, asKey...)
		if k := decodeCard(t, b); code != http.StatusOK || k.Status != kanban.StatusDone {
			t.Errorf("complete with the key: %d %s, want done", code, b)
		}
	})
}

func TestKanbanRoutesNeedTheKey(t *testing.T) {
	f := newKanbanFixture(t, func(o *api.Options) { o.APIKey = testKey })
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/kanban/boards"},
		{"GET", "/api/v1/kanban/boards/default/cards"},
		{"POST", "/api/v1/kanban/boards/default/cards"},
		{"GET", "/api/v1/kanban/boards/default/events"},
		{"GET", "/api/v1/kanban/cards/t_00000000"},
		{"PATCH", "/api/v1/kanban/cards/t_00000000"},
		{"POST", "/api/v1/kanban/cards/t_00000000/comments"},
	} {
		if code, b := f.do(t, r.method, r.path, `{"title": "t"}`); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the key: %d %s, want 401", r.method, r.path, code, b)
		}
	}
	if cards, _ := f.svc.Store.Cards(context.Background(), kanban.Query{Board: "default"}); len(cards) != 0 {
		t.Errorf("%d cards made without the key", len(cards))
	}
}

func TestKanbanRoutesOnlyWithAService(t *testing.T) {
	f := newFixture(t, nil)
	if code, _ := f.do(t, "GET", "/api/v1/kanban/boards", ""); code != http.StatusNotFound {
		t.Errorf("without a kanban service: %d, want 404", code)
	}
}
