package api

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// The boards' event stream and a card's answer.
const (
	// kanbanPoll is how often an event stream reads its board's log:
	// any process of the cluster may have written to it.
	kanbanPoll = 500 * time.Millisecond
	// kanbanEventPage is how many events one read of the log asks for.
	kanbanEventPage = 500
	// kanbanCardEvents is how many of its latest events a card's answer
	// carries.
	kanbanCardEvents = 100
)

// kanbanActor is who a change made with the API key is by, in the
// board's log.
const kanbanActor = Platform

// Error types of the kanban routes: a worker token used for another
// card than its own (403), and one whose claim was released (409), which
// a worker tells apart from other conflicts to stop its work.
const (
	typeForbidden = "permission_error"
	typeLeaseLost = "lease_lost_error"
)

// kanbanCardsPrefix starts every card route.
const kanbanCardsPrefix = "/api/v1/kanban/cards/"

// workerActions are the card routes (POST …/cards/{id}/<action>) a
// worker may call with its worker token instead of the API key.
var workerActions = []string{"complete", "block", "heartbeat", "comments"}

// KanbanRoutes are the boards' routes under /api/v1/kanban: every
// change goes through svc, every read through its Store. tokens checks
// the worker tokens (HERALD_KANBAN_TOKEN) with which a card's worker
// calls that card's worker routes instead of with the API key; with no
// Key, no token is good and workers need the API key like everyone
// else. claimTTL is how far a worker's heartbeat extends its claim
// (kanban.claim_ttl_seconds); zero means DefaultKanbanClaimTTL.
func KanbanRoutes(svc *kanban.Service, tokens kanban.Tokens, claimTTL time.Duration) Routes {
	if claimTTL <= 0 {
		claimTTL = DefaultKanbanClaimTTL
	}
	return &kanbanRoutes{svc: svc, tokens: tokens, claimTTL: claimTTL}
}

type kanbanRoutes struct {
	svc      *kanban.Service
	tokens   kanban.Tokens
	claimTTL time.Duration
}

func (k *kanbanRoutes) mount(s *Server) {
	s.kanban = k
	s.route("GET", "/api/v1/kanban/boards", s.live(s.listKanbanBoards))
	s.routeMethods("/api/v1/kanban/boards/{board}/cards", map[string]http.HandlerFunc{
		"GET":  s.listKanbanCards,
		"POST": s.createKanbanCard,
	})
	s.route("GET", "/api/v1/kanban/boards/{board}/events", s.kanbanEvents)
	s.routeMethods(kanbanCardsPrefix+"{id}", map[string]http.HandlerFunc{
		"GET":   s.getKanbanCard,
		"PATCH": s.patchKanbanCard,
	})
	s.route("POST", kanbanCardsPrefix+"{id}/comments", s.commentKanbanCard)
	s.routeMethods(kanbanCardsPrefix+"{id}/attachments", map[string]http.HandlerFunc{
		"GET":  s.listKanbanAttachments,
		"POST": s.attachKanbanCard,
	})
	s.route("GET", kanbanCardsPrefix+"{id}/attachments/{name}", s.kanbanAttachment)
	s.route("POST", kanbanCardsPrefix+"{id}/complete", s.completeKanbanCard)
	s.route("POST", kanbanCardsPrefix+"{id}/block", s.blockKanbanCard)
	s.route("POST", kanbanCardsPrefix+"{id}/heartbeat", s.heartbeatKanbanCard)
}

// cardJSON is a card as the API answers it.
type cardJSON struct {
	kanban.Card
}

func viewCard(k kanban.Card) cardJSON { return cardJSON{Card: k} }

// cardDetail is one card asked for, with what was said and done on it.
type cardDetail struct {
	cardJSON
	Comments    []kanban.Comment    `json:"comments"`
	Attachments []kanban.Attachment `json:"attachments"` // with their paths on this instance
	Events      []kanban.Event      `json:"events"`      // its latest, oldest first
	Runs        []kanban.Run        `json:"runs"`
}

// listKanbanBoards answers every board; the default board is listed
// whether or not it was ever written, as it exists from the start.
func (s *Server) listKanbanBoards(w http.ResponseWriter, r *http.Request) {
	bs, err := s.kanban.svc.Store.Boards(r.Context())
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	if !slices.ContainsFunc(bs, func(b kanban.Board) bool { return b.Slug == kanban.DefaultBoard }) {
		bs = append(bs, kanban.Board{Slug: kanban.DefaultBoard})
		slices.SortFunc(bs, func(a, b kanban.Board) int { return strings.Compare(a.Slug, b.Slug) })
	}
	writeJSON(w, http.StatusOK, map[string]any{"boards": bs})
}

// listKanbanCards answers a board's cards, by priority: ?status= (again,
// or comma-separated, for any of several; none: all but archived),
// ?assignee=, ?tenant=, ?archived=true (archived ones too) and ?limit=.
func (s *Server) listKanbanCards(w http.ResponseWriter, r *http.Request) {
	const op = "api.listKanbanCards"
	board := r.PathValue("board")
	if err := kanban.CheckSlug(op, board); err != nil {
		s.failKanban(w, r, err)
		return
	}
	v := r.URL.Query()
	q := kanban.Query{Board: board, Assignee: kanban.LaneName(v.Get("assignee")), Tenant: v.Get("tenant")}
	for _, st := range v["status"] {
		for st := range strings.SplitSeq(st, ",") {
			st := kanban.Status(strings.TrimSpace(st))
			if !st.Valid() {
				s.failKanban(w, r, errs.E(op, errs.Invalid, "status %q is not one of %s", st, statusList()))
				return
			}
			q.Statuses = append(q.Statuses, st)
		}
	}
	if a := v.Get("archived"); a != "" {
		var err error
		if q.Archived, err = strconv.ParseBool(a); err != nil {
			s.failKanban(w, r, errs.E(op, errs.Invalid, "archived %q is not true or false", a))
			return
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.failKanban(w, r, errs.E(op, errs.Invalid, "limit %q is not a positive number", l))
			return
		}
		q.Limit = n
	}
	cards, err := s.kanban.svc.Store.Cards(r.Context(), q)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	out := make([]cardJSON, 0, len(cards))
	for _, k := range cards {
		out = append(out, viewCard(k))
	}
	writeJSON(w, http.StatusOK, map[string]any{"cards": out})
}

func statusList() string {
	names := make([]string, len(kanban.Statuses))
	for i, st := range kanban.Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

type createCardRequest struct {
	Title             string           `json:"title"`
	Body              string           `json:"body"`
	Assignee          string           `json:"assignee"`
	Priority          int              `json:"priority"`
	Parents           []string         `json:"parents"`
	Status            kanban.Status    `json:"status"`
	ScheduledAt       time.Time        `json:"scheduled_at"`
	Review            bool             `json:"review"`
	CompletionCheck   string           `json:"completion_check"`
	Workspace         kanban.Workspace `json:"workspace"`
	MaxRuntimeSeconds int64            `json:"max_runtime_seconds"`
	MaxRetries        int              `json:"max_retries"`
	IdempotencyKey    string           `json:"idempotency_key"`
	Tenant            string           `json:"tenant"`
}

// createKanbanCard makes a card on the board: 201 with it, or 200 with
// the card its idempotency key (the body's, else the Idempotency-Key
// header) already named.
func (s *Server) createKanbanCard(w http.ResponseWriter, r *http.Request) {
	var req createCardRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	key := req.IdempotencyKey
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	}
	k, created, err := s.kanban.svc.Create(r.Context(), kanban.CreateSpec{
		Board:           r.PathValue("board"),
		Title:           req.Title,
		Body:            req.Body,
		Assignee:        req.Assignee,
		Priority:        req.Priority,
		Parents:         req.Parents,
		Status:          req.Status,
		ScheduledAt:     req.ScheduledAt,
		Workspace:       req.Workspace,
		MaxRuntime:      time.Duration(req.MaxRuntimeSeconds) * time.Second,
		MaxRetries:      req.MaxRetries,
		IdempotencyKey:  key,
		CreatedBy:       kanbanActor,
		Tenant:          req.Tenant,
		Review:          req.Review,
		CompletionCheck: req.CompletionCheck,
	})
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, viewCard(k))
}

// getKanbanCard answers a card with its comments, runs and latest
// events.
func (s *Server) getKanbanCard(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := s.kanban.svc.Store
	k, err := st.Card(ctx, r.PathValue("id"))
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	d := cardDetail{cardJSON: viewCard(k), Comments: []kanban.Comment{}, Attachments: []kanban.Attachment{}, Events: []kanban.Event{}, Runs: []kanban.Run{}}
	if cs, err := st.Comments(ctx, k.ID); err != nil {
		s.failKanban(w, r, err)
		return
	} else if cs != nil {
		d.Comments = cs
	}
	if as, err := s.kanban.svc.Attachments(ctx, k.ID); err != nil {
		s.failKanban(w, r, err)
		return
	} else if as != nil {
		d.Attachments = as
	}
	if rs, err := st.Runs(ctx, k.ID); err != nil {
		s.failKanban(w, r, err)
		return
	} else if rs != nil {
		d.Runs = rs
	}
	// The log reads oldest first: page through the card's events,
	// keeping the latest.
	q := kanban.EventQuery{Board: k.Board, Card: k.ID, Limit: kanbanEventPage}
	for {
		evs, err := st.Events(ctx, q)
		if err != nil {
			s.failKanban(w, r, err)
			return
		}
		d.Events = append(d.Events, evs...)
		if n := len(d.Events); n > kanbanCardEvents {
			d.Events = slices.Clone(d.Events[n-kanbanCardEvents:])
		}
		if len(evs) < q.Limit {
			break
		}
		q.After = evs[len(evs)-1].Cursor
	}
	writeJSON(w, http.StatusOK, d)
}

// cardPatch is a PATCH of a card. Every field is optional; see
// patchKanbanCard for what each does.
type cardPatch struct {
	Status      *kanban.Status   `json:"status"`
	Assignee    *string          `json:"assignee"`
	Title       *string          `json:"title"`
	Body        *string          `json:"body"`
	Priority    *int             `json:"priority"`
	Reason      string           `json:"reason"`
	Kind        kanban.BlockKind `json:"kind"`
	ScheduledAt time.Time        `json:"scheduled_at"`
}

// patchFields are cardPatch's fields; any other is refused, so that a
// change the API cannot make is not taken for one it made.
var patchFields = []string{"status", "assignee", "title", "body", "priority", "reason", "kind", "scheduled_at"}

// patchMoves names the statuses a PATCH may ask for.
const patchMoves = "blocked, ready, todo, review, done, scheduled and archived"

// patchKanbanCard changes a card, each field through its service
// operation, the assignee first, then the title, body and priority
// (Edit: one change), then the status; each is a change of its own. The
// moves a status may ask for:
//
//   - blocked (with reason, and kind: needs_input by default): Block,
//     from any status but done and archived; a running card's run ends.
//   - ready or todo: from blocked or triage, Unblock (ready when every
//     parent is done, else todo, whichever was asked); from review,
//     RequestChanges, with reason as what to change.
//   - review (reason: a summary): RequestReview.
//   - done (reason: a note): Approve, from review.
//   - scheduled (with scheduled_at; scheduled_at alone is the same):
//     Schedule.
//   - archived: Archive.
//
// A status the card has already is no change (blocked and scheduled
// excepted: they take the new reason or time). The assignee ("" to
// unassign) is Assign, refused with 409 while the card runs. Anything
// else is 400, naming what may be asked.
func (s *Server) patchKanbanCard(w http.ResponseWriter, r *http.Request) {
	const op = "api.patchKanbanCard"
	ctx := r.Context()
	svc := s.kanban.svc
	var raw json.RawMessage
	if err := s.decodeBody(w, r, &raw); err != nil {
		s.fail(w, r, err)
		return
	}
	var fields map[string]json.RawMessage
	var p cardPatch
	if err := json.Unmarshal(raw, &fields); err != nil {
		s.fail(w, r, errs.E(op, errs.Invalid, "a card's patch is a JSON object: %v", err))
		return
	}
	for f := range fields {
		if !slices.Contains(patchFields, f) {
			s.fail(w, r, errs.E(op, errs.Invalid, "%q cannot be changed; a patch may give %s", f, strings.Join(patchFields, ", ")))
			return
		}
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		s.fail(w, r, errs.E(op, errs.Invalid, "a card's patch: %v", err))
		return
	}
	if p.Status == nil && !p.ScheduledAt.IsZero() {
		scheduled := kanban.StatusScheduled
		p.Status = &scheduled
	}
	if p.Status == nil && p.Assignee == nil && p.Title == nil && p.Body == nil && p.Priority == nil {
		s.fail(w, r, errs.E(op, errs.Invalid, "nothing to change: give status (%s), assignee, title, body, priority or scheduled_at", patchMoves))
		return
	}
	id := r.PathValue("id")
	k, err := svc.Store.Card(ctx, id)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	if p.Assignee != nil {
		if k, err = svc.Assign(ctx, id, *p.Assignee, kanbanActor); err != nil {
			s.failKanban(w, r, err)
			return
		}
	}
	if p.Title != nil || p.Body != nil || p.Priority != nil {
		if k, err = svc.Edit(ctx, id, kanban.EditSpec{Title: p.Title, Body: p.Body, Priority: p.Priority}, kanbanActor); err != nil {
			s.failKanban(w, r, err)
			return
		}
	}
	if p.Status != nil {
		if k, err = s.moveCard(ctx, k, *p.Status, p); err != nil {
			s.failKanban(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, viewCard(k))
}

// moveCard makes the move to status to that patch p asks of card k (see
// patchKanbanCard).
func (s *Server) moveCard(ctx context.Context, k kanban.Card, to kanban.Status, p cardPatch) (kanban.Card, error) {
	const op = "api.moveCard"
	svc := s.kanban.svc
	if to == k.Status && to != kanban.StatusBlocked && to != kanban.StatusScheduled {
		return k, nil
	}
	switch to {
	case kanban.StatusBlocked:
		return svc.Block(ctx, k.ID, 0, p.Kind, p.Reason, kanbanActor)
	case kanban.StatusReady, kanban.StatusTodo:
		switch k.Status {
		case kanban.StatusBlocked, kanban.StatusTriage:
			return svc.Unblock(ctx, k.ID, kanbanActor)
		case kanban.StatusReview:
			return svc.RequestChanges(ctx, k.ID, 0, p.Reason, kanbanActor)
		}
		return kanban.Card{}, errs.E(op, errs.Invalid, "%s is %s: %s unblocks a blocked or triaged card, or sends one in review back (reason: what to change)", k.ID, k.Status, to)
	case kanban.StatusReview:
		return svc.RequestReview(ctx, k.ID, 0, kanban.Result{Summary: p.Reason}, kanbanActor)
	case kanban.StatusDone:
		return svc.Approve(ctx, k.ID, 0, p.Reason, kanbanActor)
	case kanban.StatusScheduled:
		return svc.Schedule(ctx, k.ID, p.ScheduledAt, kanbanActor)
	case kanban.StatusArchived:
		return svc.Archive(ctx, k.ID, kanbanActor)
	}
	return kanban.Card{}, errs.E(op, errs.Invalid, "status %q cannot be asked for; the moves are %s", to, patchMoves)
}

type commentRequest struct {
	Text   string `json:"text"`
	Author string `json:"author"`
}

// commentKanbanCard adds a comment: 201 with it. With the API key its
// author is the body's (default "api"); with a worker token it is the
// worker's lane, and only while its claim holds.
func (s *Server) commentKanbanCard(w http.ResponseWriter, r *http.Request) {
	var req commentRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	c, ok := s.cardCaller(w, r)
	if !ok {
		return
	}
	author := c.actor
	if c.token == 0 && strings.TrimSpace(req.Author) != "" {
		author = strings.TrimSpace(req.Author)
	}
	cm, err := s.kanban.svc.Comment(r.Context(), r.PathValue("id"), author, req.Text)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, cm)
}

// listKanbanAttachments answers a card's attachments, oldest first,
// with their paths on this instance.
func (s *Server) listKanbanAttachments(w http.ResponseWriter, r *http.Request) {
	as, err := s.kanban.svc.Attachments(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	if as == nil {
		as = []kanban.Attachment{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"attachments": as})
}

// attachKanbanCard keeps the raw body as the card's attachment ?name=:
// 201 with it, 409 when the card has one of that name, 413 (reading no
// further) when it is over kanban.attachment_max_bytes.
func (s *Server) attachKanbanCard(w http.ResponseWriter, r *http.Request) {
	const op = "api.attachKanbanCard"
	svc := s.kanban.svc
	limit := svc.AttachmentLimit()
	if r.ContentLength > limit {
		s.fail(w, r, errs.E(op, errs.TooLarge, "the attachment is %d bytes, over the limit of %d bytes (kanban.attachment_max_bytes)", r.ContentLength, limit))
		return
	}
	// One byte past the limit gets through, for the service to see the
	// body is over it and refuse it whole.
	body := http.MaxBytesReader(w, r.Body, limit+1)
	a, err := svc.Attach(r.Context(), r.PathValue("id"), r.URL.Query().Get("name"), body, kanbanActor)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// kanbanAttachment answers the file of the card's attachment {name}:
// an instance has the files attached through it, and 404 for others.
func (s *Server) kanbanAttachment(w http.ResponseWriter, r *http.Request) {
	const op = "api.kanbanAttachment"
	a, err := s.kanban.svc.Attachment(r.Context(), r.PathValue("id"), r.PathValue("name"))
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	f, err := os.Open(a.Path)
	if errors.Is(err, fs.ErrNotExist) {
		err = errs.E(op, errs.NotFound, "the file of %s's attachment %s is not on this instance, only on the one it was attached through", a.Card, a.Name)
	}
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": a.Name}))
	http.ServeContent(w, r, a.Name, a.CreatedAt, f)
}

// completeKanbanCard is a worker's complete (kanban.Service.Complete):
// the card goes to review or done. With the API key it is a person's.
func (s *Server) completeKanbanCard(w http.ResponseWriter, r *http.Request) {
	var res kanban.Result
	if err := s.decodeBody(w, r, &res); err != nil {
		s.fail(w, r, err)
		return
	}
	c, ok := s.cardCaller(w, r)
	if !ok {
		return
	}
	k, err := s.kanban.svc.Complete(r.Context(), r.PathValue("id"), c.token, res, c.actor)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewCard(k))
}

type blockRequest struct {
	Reason string           `json:"reason"`
	Kind   kanban.BlockKind `json:"kind"`
}

// blockKanbanCard is a worker's block (kanban.Service.Block): its run
// ends and the card waits. With the API key it is a person's.
func (s *Server) blockKanbanCard(w http.ResponseWriter, r *http.Request) {
	var req blockRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	c, ok := s.cardCaller(w, r)
	if !ok {
		return
	}
	k, err := s.kanban.svc.Block(r.Context(), r.PathValue("id"), c.token, req.Kind, req.Reason, c.actor)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewCard(k))
}

type heartbeatRequest struct {
	Note string `json:"note"`
}

// heartbeatKanbanCard extends the card's claim by KanbanClaimTTL, with
// an optional note of progress (kanban.Service.Heartbeat). The body may
// be empty.
func (s *Server) heartbeatKanbanCard(w http.ResponseWriter, r *http.Request) {
	var req heartbeatRequest
	if r.ContentLength != 0 {
		if err := s.decodeBody(w, r, &req); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	c, ok := s.cardCaller(w, r)
	if !ok {
		return
	}
	k, err := s.kanban.svc.Heartbeat(r.Context(), r.PathValue("id"), c.token, s.kanban.claimTTL, req.Note)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewCard(k))
}

// caller is who calls a card's route: a worker holding a claim of it
// (token, the claim's, > 0), or a person with the API key (token 0).
type caller struct {
	token int64
	actor string // as the board's log names it: the worker's lane, or "api"
}

// kanbanWorker reports whether r is a worker's call of one of the worker
// routes (POST …/cards/{id}/complete, block, heartbeat or comments) with
// a worker token this gateway signed, which stands in for the API key
// there. That the token is for that card, and its claim still held, is
// the route's to check (cardCaller), on the id the mux parsed.
func (s *Server) kanbanWorker(r *http.Request) bool {
	if s.kanban == nil || r.Method != http.MethodPost {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, kanbanCardsPrefix)
	id, action, _ := strings.Cut(rest, "/")
	if !ok || id == "" || !slices.Contains(workerActions, action) {
		return false
	}
	token, ok := bearer(r)
	if !ok {
		return false
	}
	_, _, err := s.kanban.tokens.Check(token)
	return err == nil
}

// cardCaller returns who calls r's card route. A worker token must be
// for the card (else 403) and its claim still held (else 409); a request
// without one got past the API key, and is a person's. When it reports
// false it has answered.
func (s *Server) cardCaller(w http.ResponseWriter, r *http.Request) (caller, bool) {
	const op = "api.cardCaller"
	token, _ := bearer(r)
	if _, _, err := s.kanban.tokens.Check(token); err != nil {
		return caller{actor: kanbanActor}, true
	}
	id := r.PathValue("id")
	n, err := s.kanban.tokens.ForCard(token, id)
	if err != nil {
		writeError(w, http.StatusForbidden, typeForbidden, reason(err))
		return caller{}, false
	}
	k, err := s.kanban.svc.Store.Card(r.Context(), id)
	if err == nil && (k.Claim == nil || k.Claim.Token != n) {
		err = errs.E(op, errs.LeaseLost, "%s is not held by claim %d any more", id, n)
	}
	if err != nil {
		s.failKanban(w, r, err)
		return caller{}, false
	}
	actor := k.Claim.Lane
	if actor == "" {
		actor = "worker"
	}
	return caller{token: n, actor: actor}, true
}

// kanbanEvents streams a board's log as server-sent events, from after
// the cursor ?after= or Last-Event-ID (which wins, as a reconnecting
// client sends it) on: each event with its cursor as the id and its kind
// as the event name, then each new one as it is written, by whichever
// process. It ends when the client goes.
func (s *Server) kanbanEvents(w http.ResponseWriter, r *http.Request) {
	const op = "api.kanbanEvents"
	board := r.PathValue("board")
	if err := kanban.CheckSlug(op, board); err != nil {
		s.failKanban(w, r, err)
		return
	}
	q := kanban.EventQuery{Board: board, After: r.URL.Query().Get("after"), Limit: kanbanEventPage}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		q.After = id
	}
	// A bad cursor is refused with a status while one can still be sent.
	evs, err := s.kanban.svc.Store.Events(r.Context(), q)
	if err != nil {
		s.failKanban(w, r, err)
		return
	}
	clearWriteDeadline(w)
	out := newSSE(w)
	err = s.followBoard(r.Context(), q, evs, out)
	if err != nil && r.Context().Err() == nil && !errors.Is(err, context.Canceled) && !errs.Is(err, errs.Closed) {
		s.log.Warn("kanban event stream ended", "board", board, "err", err)
	}
}

// followBoard sends evs, then what q's board logs after them, reading
// every kanbanPoll on the API's clock, with a keep-alive comment every
// KeepAlive, until ctx ends or the adapter stops. A read that fails is
// tried again at the next poll.
func (s *Server) followBoard(ctx context.Context, q kanban.EventQuery, evs []kanban.Event, out *sse) error {
	poll := s.opts.Clock.NewTimer(kanbanPoll)
	defer poll.Stop()
	alive := s.opts.Clock.NewTicker(s.opts.KeepAlive)
	defer alive.Stop()
	failing := false
	for {
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if err := out.raw("id: " + ev.Cursor + "\nevent: " + ev.Kind + "\ndata: " + string(b) + "\n\n"); err != nil {
				return err
			}
			q.After = ev.Cursor
		}
		// A full page means more are written already: read on at once.
		if len(evs) < q.Limit {
			if err := s.nextPoll(ctx, poll, kanbanPoll, alive, out); err != nil {
				return err
			}
		}
		var err error
		evs, err = s.kanban.svc.Store.Events(ctx, q)
		switch {
		case err == nil:
			failing = false
		case ctx.Err() != nil:
			return ctx.Err()
		case errs.Is(err, errs.Invalid):
			return err
		default:
			if !failing {
				s.log.Warn("kanban event read failed; polling on", "board", q.Board, "err", err)
			}
			failing = true
		}
	}
}

// failKanban answers the errors of the kanban routes: those the API's
// other routes answer, and a missing card, a change the board's state
// refuses, and a worker's claim that was released, which only these
// have.
func (s *Server) failKanban(w http.ResponseWriter, r *http.Request, err error) {
	switch errs.CodeOf(err) {
	case errs.NotFound:
		writeError(w, http.StatusNotFound, typeNotFound, reason(err))
	case errs.Conflict:
		writeError(w, http.StatusConflict, typeConflict, reason(err))
	case errs.LeaseLost:
		writeError(w, http.StatusConflict, typeLeaseLost, "this worker's claim was released, so nothing was written: "+reason(err))
	default:
		s.fail(w, r, err)
	}
}
