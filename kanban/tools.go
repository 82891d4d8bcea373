package kanban

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

// The toolsets: Toolset is the main agent's (create, list, show,
// comment, link, unblock); WorkerToolset a card's worker's, whose
// reports (complete, block, heartbeat, request review) act on its own
// card under its claim.
const (
	Toolset       = "kanban"
	WorkerToolset = "kanban_worker"
)

// workerKey carries the card a worker agent works on.
type workerKey struct{}

// WorkerCard is the card a worker agent works on, and its claim.
type WorkerCard struct {
	Card  string
	Board string
	Token int64
}

// WithWorker returns ctx for a worker agent on w's card: the worker
// tools act on it, and the board tools see its board only.
func WithWorker(ctx context.Context, w WorkerCard) context.Context {
	return context.WithValue(ctx, workerKey{}, w)
}

// WorkerOf returns the card ctx's worker works on, if it is one.
func WorkerOf(ctx context.Context) (WorkerCard, bool) {
	w, ok := ctx.Value(workerKey{}).(WorkerCard)
	return w, ok
}

// RegisterTools registers the board tools (Toolset) and the worker tools
// (WorkerToolset) of svc; ttl is a heartbeat's claim extension.
func RegisterTools(reg *tools.Registry, svc *Service, ttl time.Duration) error {
	bt := boardTools{svc: svc, ttl: ttl}
	for _, t := range []tools.Tool{bt.create(), bt.list(), bt.show(), bt.comment(), bt.link(), bt.unblock()} {
		if err := reg.Register(Toolset, t); err != nil {
			return err
		}
	}
	for _, t := range []tools.Tool{bt.complete(), bt.block(), bt.heartbeat(), bt.requestReview()} {
		if err := reg.Register(WorkerToolset, t); err != nil {
			return err
		}
	}
	return nil
}

type boardTools struct {
	svc *Service
	ttl time.Duration
}

// board is the board a call acts on: a worker's own, else the one asked
// for (default when none).
func board(ctx context.Context, asked string) (string, error) {
	if w, ok := WorkerOf(ctx); ok {
		if asked != "" && asked != w.Board {
			return "", errs.E("kanban.tools", errs.Invalid, "a worker sees only its own board, %s", w.Board)
		}
		return w.Board, nil
	}
	if asked == "" {
		return DefaultBoard, nil
	}
	return asked, nil
}

// card reads the card id a call names (a worker's own when none),
// refusing one of another board than a worker's.
func (bt boardTools) card(ctx context.Context, id string) (Card, error) {
	const op = "kanban.tools"
	w, isWorker := WorkerOf(ctx)
	if id == "" {
		if !isWorker {
			return Card{}, errs.E(op, errs.Invalid, "card_id is required")
		}
		id = w.Card
	}
	k, err := bt.svc.read(ctx, op, id)
	if err != nil {
		return Card{}, err
	}
	if isWorker && k.Board != w.Board {
		return Card{}, errs.E(op, errs.NotFound, "no card %s on board %s", id, w.Board)
	}
	return k, nil
}

// worker is the calling worker's card and claim. Errors: Invalid (not
// a worker).
func worker(ctx context.Context) (WorkerCard, error) {
	w, ok := WorkerOf(ctx)
	if !ok {
		return WorkerCard{}, errs.E("kanban.tools", errs.Invalid, "only a card's worker reports on it")
	}
	return w, nil
}

// brief is a card as the tools show it.
func brief(k Card) map[string]any {
	b := map[string]any{"id": k.ID, "board": k.Board, "title": k.Title, "status": k.Status, "priority": k.Priority}
	if k.Assignee != "" {
		b["assignee"] = k.Assignee
	}
	if len(k.Parents) > 0 {
		b["parents"] = k.Parents
	}
	if len(k.Children) > 0 {
		b["children"] = k.Children
	}
	if k.BlockReason != "" && (k.Status == StatusBlocked || k.Status == StatusTriage) {
		b["block_reason"] = k.BlockReason
	}
	return b
}

func (bt boardTools) create() tools.Tool {
	type args struct {
		Title    string   `json:"title"`
		Body     string   `json:"body"`
		Assignee string   `json:"assignee"`
		Parents  []string `json:"parents"`
		Priority int      `json:"priority"`
		Board    string   `json:"board"`
	}
	return tools.Tool{
		Name:        "kanban_create",
		Description: "Create a card on a kanban board: a unit of work a worker lane picks up once every parent card is done.",
		Schema: json.RawMessage(`{"type":"object","properties":{
  "title":{"type":"string","description":"What is to be done, in a line."},
  "body":{"type":"string","description":"Everything a worker needs: it sees nothing else."},
  "assignee":{"type":"string","description":"The lane that works it (e.g. herald, or a configured CLI lane)."},
  "parents":{"type":"array","items":{"type":"string"},"description":"Cards that must be done first."},
  "priority":{"type":"integer","description":"Higher is picked first; default 0."},
  "board":{"type":"string","description":"The board's slug; default the default board."}},
  "required":["title"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, turn *tools.Turn, a args) (tools.Result, error) {
			b, err := board(ctx, a.Board)
			if err != nil {
				return tools.Result{}, err
			}
			spec := CreateSpec{Board: b, Title: a.Title, Body: a.Body, Assignee: a.Assignee, Parents: a.Parents, Priority: a.Priority, CreatedBy: "agent"}
			// A turn run again after a crash makes the same card, not a
			// second one.
			if turn != nil && turn.EntryID != "" {
				sum := sha256.Sum256([]byte(turn.Conv + "\x00" + turn.EntryID + "\x00" + a.Title))
				spec.IdempotencyKey = "turn:" + hex.EncodeToString(sum[:8])
				spec.CreatedBy = turn.User
			}
			if w, ok := WorkerOf(ctx); ok {
				spec.CreatedBy = "worker of " + w.Card
			}
			k, created, err := bt.svc.Create(ctx, spec)
			if err != nil {
				return tools.Result{}, err
			}
			status := "created"
			if !created {
				status = "exists"
			}
			return tools.JSON(map[string]any{"status": status, "card": brief(k)}), nil
		}),
	}
}

func (bt boardTools) list() tools.Tool {
	type args struct {
		Board    string   `json:"board"`
		Statuses []Status `json:"status"`
		Assignee string   `json:"assignee"`
	}
	return tools.Tool{
		Name:        "kanban_list",
		Description: "List a kanban board's cards, highest priority first.",
		Schema: json.RawMessage(`{"type":"object","properties":{
  "board":{"type":"string"},
  "status":{"type":"array","items":{"type":"string","enum":["triage","todo","scheduled","ready","running","blocked","review","done","archived"]}},
  "assignee":{"type":"string"}},"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			b, err := board(ctx, a.Board)
			if err != nil {
				return tools.Result{}, err
			}
			cards, err := bt.svc.Store.Cards(ctx, Query{Board: b, Statuses: a.Statuses, Assignee: LaneName(a.Assignee), Limit: 200})
			if err != nil {
				return tools.Result{}, err
			}
			out := make([]map[string]any, 0, len(cards))
			for _, k := range cards {
				out = append(out, brief(k))
			}
			return tools.JSON(map[string]any{"board": b, "cards": out}), nil
		}),
	}
}

func (bt boardTools) show() tools.Tool {
	type args struct {
		CardID string `json:"card_id"`
	}
	return tools.Tool{
		Name:        "kanban_show",
		Description: "Show a card: its body, links, result, comments, attachments (files, with their paths) and runs. A worker's own card when card_id is left out.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"card_id":{"type":"string"}},"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			k, err := bt.card(ctx, a.CardID)
			if err != nil {
				return tools.Result{}, err
			}
			out := brief(k)
			out["body"] = k.Body
			if k.Result != nil {
				out["result"] = k.Result
			}
			if cs, err := bt.svc.Store.Comments(ctx, k.ID); err == nil && len(cs) > 0 {
				out["comments"] = cs
			}
			if as, err := bt.svc.Attachments(ctx, k.ID); err == nil && len(as) > 0 {
				out["attachments"] = as
			}
			if rs, err := bt.svc.Store.Runs(ctx, k.ID); err == nil && len(rs) > 0 {
				out["runs"] = rs
			}
			return tools.JSON(out), nil
		}),
	}
}

func (bt boardTools) comment() tools.Tool {
	type args struct {
		CardID string `json:"card_id"`
		Text   string `json:"text"`
	}
	return tools.Tool{
		Name:        "kanban_comment",
		Description: "Add a comment to a card (a worker's own when card_id is left out).",
		Schema:      json.RawMessage(`{"type":"object","properties":{"card_id":{"type":"string"},"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, turn *tools.Turn, a args) (tools.Result, error) {
			k, err := bt.card(ctx, a.CardID)
			if err != nil {
				return tools.Result{}, err
			}
			author := "agent"
			if w, ok := WorkerOf(ctx); ok {
				author = "worker of " + w.Card
			} else if turn != nil && turn.User != "" {
				author = turn.User
			}
			cm, err := bt.svc.Comment(ctx, k.ID, author, a.Text)
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": "commented", "comment": cm.ID}), nil
		}),
	}
}

func (bt boardTools) link() tools.Tool {
	type args struct {
		Parent string `json:"parent"`
		Child  string `json:"child"`
	}
	return tools.Tool{
		Name:        "kanban_link",
		Description: "Make one card wait for another: the child is worked only once the parent is done. A link that would make a cycle is refused.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"parent":{"type":"string"},"child":{"type":"string"}},"required":["parent","child"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			for _, id := range []string{a.Parent, a.Child} {
				if _, err := bt.card(ctx, id); err != nil {
					return tools.Result{}, err
				}
			}
			k, err := bt.svc.Link(ctx, a.Parent, a.Child, "agent")
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": "linked", "child": brief(k)}), nil
		}),
	}
}

func (bt boardTools) unblock() tools.Tool {
	type args struct {
		CardID string `json:"card_id"`
	}
	return tools.Tool{
		Name:        "kanban_unblock",
		Description: "Send a blocked card back to work (ready, or todo while a parent is not done), once what it needed is there.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"card_id":{"type":"string"}},"required":["card_id"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			if _, err := bt.card(ctx, a.CardID); err != nil {
				return tools.Result{}, err
			}
			k, err := bt.svc.Unblock(ctx, a.CardID, "agent")
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": "unblocked", "card": brief(k)}), nil
		}),
	}
}

func (bt boardTools) complete() tools.Tool {
	type args struct {
		Summary      string            `json:"summary"`
		Result       string            `json:"result"`
		CreatedCards []string          `json:"created_cards"`
		Artifacts    []string          `json:"artifacts"`
		Metadata     map[string]string `json:"metadata"`
	}
	return tools.Tool{
		Name:        "kanban_complete",
		Description: "Finish your card: say what you did. Every card you created for follow-up work must be listed in created_cards.",
		Schema: json.RawMessage(`{"type":"object","properties":{
  "summary":{"type":"string","description":"What was done and found."},
  "result":{"type":"string","description":"The result itself, when there is one to hand on."},
  "created_cards":{"type":"array","items":{"type":"string"}},
  "artifacts":{"type":"array","items":{"type":"string"},"description":"Files or directories you made that outlive the workspace, relative to it or absolute."},
  "metadata":{"type":"object","additionalProperties":{"type":"string"},"description":"Facts about the result, for whoever reads it next (a PR number, a branch)."}},"required":["summary"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			w, err := worker(ctx)
			if err != nil {
				return tools.Result{}, err
			}
			k, err := bt.svc.Complete(ctx, w.Card, w.Token, Result{Summary: a.Summary, Result: a.Result, CreatedCards: a.CreatedCards, Artifacts: a.Artifacts, Metadata: a.Metadata}, "worker")
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": string(k.Status), "card": k.ID}), nil
		}),
	}
}

func (bt boardTools) block() tools.Tool {
	type args struct {
		Reason string    `json:"reason"`
		Kind   BlockKind `json:"kind"`
	}
	return tools.Tool{
		Name:        "kanban_block",
		Description: "Stop work on your card because something is missing: needs_input (a person must answer), capability (you cannot do it), transient (try later), dependency (another card must be done first).",
		Schema: json.RawMessage(`{"type":"object","properties":{
  "reason":{"type":"string","description":"What is missing, so a person can act on it."},
  "kind":{"type":"string","enum":["needs_input","capability","transient","dependency"]}},"required":["reason"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			w, err := worker(ctx)
			if err != nil {
				return tools.Result{}, err
			}
			k, err := bt.svc.Block(ctx, w.Card, w.Token, a.Kind, a.Reason, "worker")
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": string(k.Status), "card": k.ID}), nil
		}),
	}
}

func (bt boardTools) heartbeat() tools.Tool {
	type args struct {
		Note string `json:"note"`
	}
	return tools.Tool{
		Name:        "kanban_heartbeat",
		Description: "Say you are still working on your card, with a short note of progress.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}},"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			w, err := worker(ctx)
			if err != nil {
				return tools.Result{}, err
			}
			if _, err := bt.svc.Heartbeat(ctx, w.Card, w.Token, bt.ttl, strings.TrimSpace(a.Note)); err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": "ok"}), nil
		}),
	}
}

func (bt boardTools) requestReview() tools.Tool {
	type args struct {
		Summary string `json:"summary"`
	}
	return tools.Tool{
		Name:        "kanban_request_review",
		Description: "Hand your card to review instead of finishing it: say what to look at.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"],"additionalProperties":false}`),
		Handler: tools.Func(func(ctx context.Context, _ *tools.Turn, a args) (tools.Result, error) {
			w, err := worker(ctx)
			if err != nil {
				return tools.Result{}, err
			}
			k, err := bt.svc.RequestReview(ctx, w.Card, w.Token, Result{Summary: a.Summary}, "worker")
			if err != nil {
				return tools.Result{}, err
			}
			return tools.JSON(map[string]any{"status": string(k.Status), "card": k.ID}), nil
		}),
	}
}
