package kanban_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/tools"
)

func (h *harness) tools() *tools.Set {
	h.t.Helper()
	reg := tools.NewRegistry()
	if err := kanban.RegisterTools(reg, h.svc, time.Minute); err != nil {
		h.t.Fatal(err)
	}
	set, err := reg.Set([]string{kanban.Toolset, kanban.WorkerToolset})
	if err != nil {
		h.t.Fatal(err)
	}
	return set
}

func call(ctx context.Context, set *tools.Set, turn *tools.Turn, name, args string) tools.Result {
	return set.Call(ctx, turn, chat.ToolCall{ID: "c1", Name: name, Arguments: args})
}

func TestTools(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		set := h.tools()
		turn := &tools.Turn{Conv: "telegram:1", User: "telegram:42", EntryID: "e-1"}
		res := call(h.ctx, set, turn, "kanban_create", `{"title":"write the report","assignee":"Herald"}`)
		if res.IsError || !strings.Contains(res.Content, `"created"`) {
			t.Fatalf("kanban_create = %+v", res)
		}
		// The same turn run again makes no second card.
		if again := call(h.ctx, set, turn, "kanban_create", `{"title":"write the report"}`); !strings.Contains(again.Content, `"exists"`) {
			t.Errorf("a re-run turn's create = %+v, want the card that exists", again)
		}
		cards := mustCards(t, h, kanban.StatusReady)
		if len(cards) != 1 || cards[0].Assignee != "herald" || cards[0].CreatedBy != "telegram:42" {
			t.Fatalf("cards = %+v", cards)
		}
		k := cards[0]
		if res := call(h.ctx, set, turn, "kanban_create", `{"title":"x","parents":["t_nothere"]}`); !res.IsError || !strings.Contains(res.Content, "t_nothere") {
			t.Errorf("a create with an unknown parent = %+v, want an error naming it", res)
		}
		if res := call(h.ctx, set, turn, "kanban_complete", `{"summary":"done"}`); !res.IsError || !strings.Contains(res.Content, "worker") {
			t.Errorf("kanban_complete outside a worker = %+v, want refused", res)
		}
		if res := call(h.ctx, set, turn, "kanban_link", `{"parent":"`+k.ID+`","child":"`+k.ID+`"}`); !res.IsError {
			t.Errorf("a self-link = %+v, want refused", res)
		}

		// A worker reports on its own card, under its claim, and sees
		// only its board.
		claimed := h.claim(k.ID)
		other := h.create(kanban.CreateSpec{Title: "elsewhere", Board: "ops"})
		wctx := kanban.WithWorker(h.ctx, kanban.WorkerCard{Card: k.ID, Board: k.Board, Token: claimed.Claim.Token})
		if res := call(wctx, set, nil, "kanban_show", `{"card_id":"`+other.ID+`"}`); !res.IsError {
			t.Errorf("a worker read another board's card: %+v", res)
		}
		if res := call(wctx, set, nil, "kanban_heartbeat", `{"note":"halfway"}`); res.IsError {
			t.Errorf("kanban_heartbeat = %+v", res)
		}
		if res := call(wctx, set, nil, "kanban_comment", `{"text":"found the data"}`); res.IsError {
			t.Errorf("kanban_comment = %+v", res)
		}
		if res := call(wctx, set, nil, "kanban_complete", `{"summary":"wrote it"}`); res.IsError || !strings.Contains(res.Content, `"done"`) {
			t.Fatalf("kanban_complete = %+v", res)
		}
		// The claim ended: a second report is refused.
		if res := call(wctx, set, nil, "kanban_block", `{"reason":"x"}`); !res.IsError {
			t.Errorf("a report after the claim ended = %+v", res)
		}
		if cs, _ := h.svc.Store.Comments(h.ctx, k.ID); len(cs) != 1 {
			t.Errorf("comments = %+v", cs)
		}
	})
}
