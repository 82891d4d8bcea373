package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// ControllerStates reads a conversation's controllers (controllers.Store
// is one).
type ControllerStates interface {
	// Controllers returns a conversation's states, by kind then id.
	Controllers(ctx context.Context, conv string) ([]controllers.State, error)
}

// ConversationSources are what the conversation list and a
// conversation's page read.
type ConversationSources struct {
	List sessions.Conversations
	// Controllers, when set, gives each conversation's goal, loops and
	// heartbeat.
	Controllers ControllerStates
	// Price, when set, prices the tokens (model.prices).
	Price delegation.Prices
}

// Conversation list sizes: a page without ?limit=, and how much of a
// conversation's history its page shows.
const (
	defaultConvLimit = 100
	convHistoryShown = 100
)

// ConversationRoutes are the operator's view of every conversation,
// whatever its platform: GET /api/v1/conversations lists them by last
// activity, GET /api/v1/conversations/{conv} shows one, where conv is a
// conversation key (telegram:42, path-escaped) or, without a colon, an
// API conversation's id. Both are live.
func ConversationRoutes(src ConversationSources) Routes { return conversationRoutes{src} }

type conversationRoutes struct{ src ConversationSources }

func (c conversationRoutes) mount(s *Server) {
	s.route("GET", "/api/v1/conversations", s.live(func(w http.ResponseWriter, r *http.Request) { c.list(s, w, r) }))
	s.route("GET", "/api/v1/conversations/{conv}", s.live(func(w http.ResponseWriter, r *http.Request) { c.show(s, w, r) }))
}

// convSummary is a conversation as the list shows it.
type convSummary struct {
	Key        string    `json:"key"`
	Platform   string    `json:"platform"`
	LastActive time.Time `json:"last_active"`
	Queued     int       `json:"queued"`
	Running    bool      `json:"running"`
	Worker     string    `json:"worker,omitempty"`
	Expires    time.Time `json:"expires,omitzero"`
	TokensIn   int       `json:"tokens_in"`
	TokensOut  int       `json:"tokens_out"`
	// Cost is in dollars, for the models model.prices prices; absent
	// when it prices none of them.
	Cost   *float64 `json:"cost,omitempty"`
	Cursor string   `json:"cursor"`
}

func (c conversationRoutes) summary(sum sessions.ConvSummary) convSummary {
	platform, _, _ := strings.Cut(sum.Conv, ":")
	out := convSummary{
		Key: sum.Conv, Platform: platform, LastActive: sum.LastActive.UTC(), Queued: sum.Queued,
		Running: sum.Worker != "", Worker: sum.Worker, Expires: sum.Expires.UTC(), Cursor: sum.Cursor,
	}
	var cost float64
	for model, n := range sessions.UsageByModel(sum.Meta) {
		out.TokensIn += n.Prompt
		out.TokensOut += n.Completion
		if c := c.src.Price.Cost(model, n.Prompt, n.Completion); c != nil {
			cost += *c
			out.Cost = &cost
		}
	}
	return out
}

// list answers a page of conversations, the one active last first:
// ?limit= (default 100, at most sessions.MaxConvList) and ?before=, the
// cursor of the page before's last (its "next").
func (c conversationRoutes) list(s *Server, w http.ResponseWriter, r *http.Request) {
	q := sessions.ConvQuery{Limit: defaultConvLimit, Before: r.URL.Query().Get("before")}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			writeError(w, http.StatusBadRequest, typeInvalid, fmt.Sprintf("limit %q is not a number", l))
			return
		}
		q.Limit = n
	}
	list, err := c.src.List.Conversations(r.Context(), q)
	if err != nil {
		s.failConversation(w, r, err)
		return
	}
	out := make([]convSummary, len(list))
	for i, sum := range list {
		out[i] = c.summary(sum)
	}
	page := map[string]any{"conversations": out}
	if len(list) == q.Limit {
		page["next"] = list[len(list)-1].Cursor
	}
	writeJSON(w, http.StatusOK, page)
}

// historyItem is one message of a conversation's history as its page
// shows it: the text as it is, and only the names of the tools called.
type historyItem struct {
	Role  string    `json:"role"`
	Text  string    `json:"text"`
	Tools []string  `json:"tools,omitempty"`
	Name  string    `json:"name,omitempty"` // a tool result's tool
	At    time.Time `json:"at,omitzero"`
}

// controllerView is one of a conversation's controllers.
type controllerView struct {
	Kind      controllers.Kind `json:"kind"`
	ID        string           `json:"id,omitempty"`
	DueAt     time.Time        `json:"due_at,omitzero"`
	UpdatedAt time.Time        `json:"updated_at,omitzero"`
	Data      json.RawMessage  `json:"data"`
}

// convDetail is a conversation's page.
type convDetail struct {
	Conversation convSummary      `json:"conversation"`
	History      []historyItem    `json:"history"`
	HistoryTotal int              `json:"history_total"`
	Controllers  []controllerView `json:"controllers"`
}

// show answers one conversation: its summary (its queue and the turn
// holding it among it), the last convHistoryShown messages of its
// history, and its controllers.
func (c conversationRoutes) show(s *Server, w http.ResponseWriter, r *http.Request) {
	conv := r.PathValue("conv")
	if !strings.Contains(conv, ":") {
		var err error
		if conv, err = conversation(conv); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx := r.Context()
	sum, err := c.src.List.Conversation(ctx, conv)
	if err != nil {
		s.failConversation(w, r, err)
		return
	}
	out := convDetail{Conversation: c.summary(sum), History: []historyItem{}, Controllers: []controllerView{}}
	hist, total, err := c.src.List.RecentHistory(ctx, conv, convHistoryShown)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out.HistoryTotal = total
	for _, m := range hist {
		it := historyItem{Role: m.Role, Text: m.Content, Name: m.Name, At: m.At.UTC()}
		for _, tc := range m.ToolCalls {
			it.Tools = append(it.Tools, tc.Name)
		}
		out.History = append(out.History, it)
	}
	if c.src.Controllers != nil {
		states, err := c.src.Controllers.Controllers(ctx, conv)
		if err != nil {
			s.failConversation(w, r, err)
			return
		}
		for _, st := range states {
			out.Controllers = append(out.Controllers, controllerView{
				Kind: st.Kind, ID: st.ID, DueAt: st.DueAt.UTC(), UpdatedAt: st.UpdatedAt.UTC(), Data: st.Data,
			})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// failConversation answers the errors of the conversation routes: those
// the API's other routes answer, and a conversation the store does not
// list.
func (s *Server) failConversation(w http.ResponseWriter, r *http.Request, err error) {
	if errs.Is(err, errs.NotFound) {
		writeError(w, http.StatusNotFound, typeNotFound, reason(err))
		return
	}
	s.fail(w, r, err)
}
