package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	hchat "github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/sqlite"
)

// convJSON, convListJSON and convDetailJSON are the conversation routes' answers
// as a client reads them.
type convJSON struct {
	Key        string    `json:"key"`
	Platform   string    `json:"platform"`
	LastActive time.Time `json:"last_active"`
	Queued     int       `json:"queued"`
	Running    bool      `json:"running"`
	Worker     string    `json:"worker"`
	TokensIn   int       `json:"tokens_in"`
	TokensOut  int       `json:"tokens_out"`
	Cost       *float64  `json:"cost"`
	Cursor     string    `json:"cursor"`
}

type convListJSON struct {
	Conversations []convJSON `json:"conversations"`
	Next          string     `json:"next"`
}

type convDetailJSON struct {
	Conversation convJSON `json:"conversation"`
	History      []struct {
		Role  string   `json:"role"`
		Text  string   `json:"text"`
		Tools []string `json:"tools"`
	} `json:"history"`
	HistoryTotal int `json:"history_total"`
	Controllers  []struct {
		Kind string          `json:"kind"`
		Data json.RawMessage `json:"data"`
	} `json:"controllers"`
}

// convFixture serves the conversation routes over a SQLite store on a
// fake clock.
type convFixture struct {
	*fixture
	clk *clock.Fake
	db  *sqlite.DB
}

func newConvFixture(t *testing.T) *convFixture {
	t.Helper()
	clk := clock.NewFake(epoch)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	price := func(model string) (float64, float64, bool) {
		if model == "priced" {
			return 1, 2, true // dollars per million tokens in, out
		}
		return 0, 0, false
	}
	f := newFixture(t, func(o *api.Options) {
		o.Clock = clk
		o.Routes = []api.Routes{api.ConversationRoutes(api.ConversationSources{
			List: db.Conversations(), Controllers: db.Controllers(), Price: price,
		})}
	})
	return &convFixture{fixture: f, clk: clk, db: db}
}

func (f *convFixture) get(t *testing.T, path string, v any) int {
	t.Helper()
	status, body := f.do(t, "GET", path, "")
	if status == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
	}
	return status
}

// The list names every conversation, whatever its platform, the one
// active last first, with its queue, the turn holding it and its
// tokens; a conversation's page adds its history's last messages and
// its controllers. Bad input is a 400, an unknown conversation a 404.
func TestConversationRoutes(t *testing.T) {
	f := newConvFixture(t)
	ctx := context.Background()
	ss := f.db.Sessions()
	if _, err := ss.Append(ctx, sessions.Inbound{Conv: "telegram:42", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second)
	_, turn, err := ss.AppendClaim(ctx, sessions.Inbound{Conv: "api:web", Text: "what time is it?"}, "w1", time.Minute)
	if err != nil || turn == nil {
		t.Fatalf("AppendClaim: %v, %v", turn, err)
	}
	history := []hchat.Message{
		{Role: "user", Content: "what time is it?"},
		{Role: "assistant", ToolCalls: []hchat.ToolCall{{ID: "c1", Name: "clock"}}},
		{Role: "tool", Name: "clock", Content: "noon"},
		{Role: "assistant", Content: "Noon."},
	}
	if err := ss.AppendHistory(ctx, turn.Lease, history...); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		sessions.UsagePrefix + "prompt_tokens.priced":     "1000",
		sessions.UsagePrefix + "completion_tokens.priced": "500",
		sessions.UsagePrefix + "prompt_tokens.other":      "10",
		sessions.UsagePrefix + "completion_tokens.other":  "5",
		"mode": "queue",
	} {
		if err := ss.SetMeta(ctx, "api:web", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.Controllers().PutController(ctx, controllers.State{Conv: "api:web", Kind: controllers.KindGoal, Data: json.RawMessage(`{"goal":"tell the time"}`)}); err != nil {
		t.Fatal(err)
	}

	var list convListJSON
	if status := f.get(t, "/api/v1/conversations", &list); status != http.StatusOK {
		t.Fatalf("list: %d", status)
	}
	if len(list.Conversations) != 2 || list.Conversations[0].Key != "api:web" || list.Conversations[1].Key != "telegram:42" {
		t.Fatalf("list = %+v, want api:web then telegram:42", list.Conversations)
	}
	web, tg := list.Conversations[0], list.Conversations[1]
	if !web.Running || web.Worker != "w1" || web.Queued != 1 || web.Platform != "api" || !web.LastActive.Equal(epoch.Add(time.Second)) {
		t.Errorf("api:web = %+v, want running on w1, one queued, active a second in", web)
	}
	if web.TokensIn != 1010 || web.TokensOut != 505 || web.Cost == nil || *web.Cost != (1000*1+500*2)/1e6 {
		t.Errorf("api:web tokens = %d in, %d out, cost %v; want 1010, 505, $0.002", web.TokensIn, web.TokensOut, web.Cost)
	}
	if tg.Running || tg.Queued != 1 || tg.Platform != "telegram" || tg.Cost != nil || tg.TokensIn != 0 {
		t.Errorf("telegram:42 = %+v, want one queued, none running, no tokens", tg)
	}

	// Pages: one at a time, the next from the first's cursor.
	var page convListJSON
	f.get(t, "/api/v1/conversations?limit=1", &page)
	if len(page.Conversations) != 1 || page.Next == "" {
		t.Fatalf("first page = %+v", page)
	}
	f.get(t, "/api/v1/conversations?limit=1&before="+page.Next, &page)
	if len(page.Conversations) != 1 || page.Conversations[0].Key != "telegram:42" {
		t.Fatalf("second page = %+v", page)
	}

	// A conversation by its API id, or by its key.
	var detail convDetailJSON
	for _, path := range []string{"/api/v1/conversations/web", "/api/v1/conversations/api:web"} {
		if status := f.get(t, path, &detail); status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, status)
		}
		if detail.Conversation.Key != "api:web" || detail.HistoryTotal != 4 || len(detail.History) != 4 {
			t.Fatalf("GET %s = %+v", path, detail)
		}
	}
	if h := detail.History[1]; h.Role != "assistant" || len(h.Tools) != 1 || h.Tools[0] != "clock" {
		t.Errorf("a tool call shows as %+v, want the tool's name", h)
	}
	if h := detail.History[3]; h.Text != "Noon." {
		t.Errorf("the reply shows as %+v", h)
	}
	if len(detail.Controllers) != 1 || detail.Controllers[0].Kind != "goal" || !strings.Contains(string(detail.Controllers[0].Data), "tell the time") {
		t.Errorf("controllers = %+v, want the goal", detail.Controllers)
	}

	// A long history shows its last 100 messages.
	tgTurn, err := ss.Claim(ctx, "w2", time.Minute)
	if err != nil || tgTurn == nil || tgTurn.Lease.Conv != "telegram:42" {
		t.Fatalf("Claim: %+v, %v", tgTurn, err)
	}
	var long []hchat.Message
	for i := range 150 {
		long = append(long, hchat.Message{Role: "user", Content: fmt.Sprint("h", i)})
	}
	if err := ss.AppendHistory(ctx, tgTurn.Lease, long...); err != nil {
		t.Fatal(err)
	}
	f.get(t, "/api/v1/conversations/telegram:42", &detail)
	if len(detail.History) != 100 || detail.HistoryTotal != 150 || detail.History[0].Text != "h50" || detail.History[99].Text != "h149" {
		t.Errorf("a history of 150 shows %d of %d, from %+v", len(detail.History), detail.HistoryTotal, detail.History[0])
	}

	for _, tc := range []struct {
		desc, path string
		status     int
	}{
		{"limit 0", "/api/v1/conversations?limit=0", http.StatusBadRequest},
		{"limit over the most", "/api/v1/conversations?limit=100000", http.StatusBadRequest},
		{"limit not a number", "/api/v1/conversations?limit=ten", http.StatusBadRequest},
		{"a cursor the store did not make", "/api/v1/conversations?before=nonsense", http.StatusBadRequest},
		{"unknown conversation", "/api/v1/conversations/slack:T1:C9", http.StatusNotFound},
		{"a bad API id", "/api/v1/conversations/a%20b", http.StatusBadRequest},
	} {
		if status, body := f.do(t, "GET", tc.path, ""); status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.desc, status, body, tc.status)
		}
	}
	// A key with a slash, escaped, is one conversation's.
	if _, err := ss.Append(ctx, sessions.Inbound{Conv: "slack:T1/C2", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if status := f.get(t, "/api/v1/conversations/slack:T1%2FC2", &detail); status != http.StatusOK || detail.Conversation.Key != "slack:T1/C2" {
		t.Errorf("GET of an escaped key: %d %+v", status, detail.Conversation)
	}
}

// The list streamed to a dashboard shows a conversation that becomes
// active, at the next read on the API's clock.
func TestConversationListIsLive(t *testing.T) {
	f := newConvFixture(t)
	next := f.stream(t, "/api/v1/conversations")
	if ev := next(); ev != `{"conversations":[]}` {
		t.Fatalf("first event %s", ev)
	}
	waitArmed(t, f.clk, 2) // the poll and the keep-alive
	if _, err := f.db.Sessions().Append(context.Background(), sessions.Inbound{Conv: "discord:7", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(500 * time.Millisecond)
	if ev := next(); !strings.Contains(ev, `"key":"discord:7"`) || !strings.Contains(ev, `"queued":1`) {
		t.Fatalf("after an append: %s", ev)
	}
}
