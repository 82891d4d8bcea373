package kanban

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// DefaultFailureLimit is how many failed runs in a row give a card up
// (kanban.failure_limit) when neither the service nor the card says.
const DefaultFailureLimit = 2

// maxAttempts bounds how often an operation reads again after a
// conflict before it gives up with it.
const maxAttempts = 16

// Service is every change a board takes: the CLI, the tools, /kanban,
// the HTTP API and the dispatcher all go through it, so a rule holds
// the same for each. Each operation reads what it needs, decides, and
// writes with Store.Apply; when another writer changed a card first, it
// reads again and decides again.
type Service struct {
	Store        Store
	FailureLimit int // kanban.failure_limit; 0: DefaultFailureLimit
	// CrashGrace holds a card whose run crashed (its worker's exit, or
	// a dead worker released) back this long before it runs again
	// (kanban.crash_grace_seconds); 0: none.
	CrashGrace time.Duration
	// Root is the board home ($HERALD_HOME/kanban): scratch workspaces,
	// promoted artifacts and run logs (see workspace.go). "": none, and
	// a scratch card cannot run here.
	Root string
	// AttachmentMaxBytes bounds one attachment
	// (kanban.attachment_max_bytes); 0: DefaultAttachmentMaxBytes.
	AttachmentMaxBytes int64
	// Repository is the git repository of a worktree card that names
	// none (tools.workspace).
	Repository string
	// Check runs a card's completion check (its command) in dir, the
	// card's workspace ("" when it has none here), and returns its
	// output and whether it passed; nil: a card with a check cannot be
	// completed.
	Check func(ctx context.Context, k Card, dir string) (output string, ok bool, err error)
	// Ready, when set, is told after a change made a card ready (or
	// put it in review): the dispatcher of this process looks at once.
	Ready func()
	// Redact masks herald's secrets in what a worker or a person says
	// of a card before it is kept: a comment, a result, a block's or a
	// release's reason, a review's note, a heartbeat's note, a stop's
	// reason, a completion check's output. What is kept is read by the
	// next worker's model, shown in chats, the dashboard and the CLI.
	// Nil keeps them as they are.
	Redact func(string) string

	// recent is the cards this service wrote last, to decide their next
	// change on (see recent).
	recent recent
}

// CreateSpec is a card to create.
type CreateSpec struct {
	Board    string // "": the default board
	Title    string
	Body     string
	Assignee string
	Priority int
	Parents  []string
	// Status is "" (ready when every parent is done, else todo), or an
	// explicit triage, todo, blocked or scheduled (with ScheduledAt).
	Status          Status
	ScheduledAt     time.Time
	Workspace       Workspace
	MaxRuntime      time.Duration
	MaxRetries      int
	IdempotencyKey  string
	CreatedBy       string
	Tenant          string
	Review          bool
	CompletionCheck string
}

// change is one decision: the change to apply and the card the caller
// is told of.
type change struct {
	Change
	card Card
	// remember says card is the card as the change writes it, for the
	// service to decide its next change on (see recent).
	remember bool
}

// apply runs decide until its change applies without a conflict, and
// returns the card decide named, as written.
func (s *Service) apply(ctx context.Context, op string, decide func(now time.Time) (change, error)) (Card, error) {
	return s.applyAt(ctx, op, false, decide)
}

// applyStamped is apply with the store stamping the change with its
// clock inside the write (Change.Stamp): decide sees StampBase, and no
// call reads the clock first.
func (s *Service) applyStamped(ctx context.Context, op string, decide func(now time.Time) (change, error)) (Card, error) {
	return s.applyAt(ctx, op, true, decide)
}

func (s *Service) applyAt(ctx context.Context, op string, stamp bool, decide func(now time.Time) (change, error)) (Card, error) {
	for range maxAttempts {
		now := StampBase
		if !stamp {
			var err error
			if now, err = s.Store.Now(ctx); err != nil {
				return Card{}, err
			}
		}
		c, err := decide(now)
		if err != nil {
			return Card{}, err
		}
		c.Stamp = stamp
		evs, err := s.Store.Apply(ctx, c.Change)
		if errs.Is(err, errs.Conflict) {
			continue
		} else if err != nil {
			return Card{}, err
		}
		s.readied(c.Change)
		s.recent.forget(c.Cards)
		written := false
		for _, w := range c.Cards {
			if w.Card.ID == c.card.ID {
				c.card.Version, written = w.From+1, true
			}
		}
		k := c.card
		if stamp {
			if k, err = s.stamped(ctx, k, c.Change, evs); err != nil {
				return Card{}, err
			}
		}
		if c.remember && written {
			s.recent.remember(k)
		}
		return k, nil
	}
	return Card{}, errs.E(op, errs.Conflict, "the board kept changing under this change; try again")
}

// stamped is k, decided for the stamped change sent, with the instants
// the store wrote: the stamp its events returned (got) carry, else the
// store's clock now.
func (s *Service) stamped(ctx context.Context, k Card, sent Change, got []Event) (Card, error) {
	now, ok := stampOf(sent, got)
	if !ok {
		var err error
		if now, err = s.Store.Now(ctx); err != nil {
			return Card{}, err
		}
	}
	return StampCard(k, now), nil
}

// Create makes a card, or returns the one its idempotency key names
// (created false). Errors: Invalid (no title, an unknown or foreign
// parent, a status a card cannot start in).
func (s *Service) Create(ctx context.Context, spec CreateSpec) (k Card, created bool, err error) {
	const op = "kanban.Create"
	spec.Board = strings.TrimSpace(spec.Board)
	if spec.Board == "" {
		spec.Board = DefaultBoard
	}
	spec.Title = strings.TrimSpace(spec.Title)
	switch {
	case spec.Title == "":
		return Card{}, false, errs.E(op, errs.Invalid, "a card needs a title")
	case spec.Status == StatusScheduled && spec.ScheduledAt.IsZero():
		return Card{}, false, errs.E(op, errs.Invalid, "a scheduled card needs the time it becomes ready")
	case spec.MaxRuntime < 0 || spec.MaxRetries < 0:
		return Card{}, false, errs.E(op, errs.Invalid, "max_runtime_seconds and max_retries may not be negative")
	}
	switch spec.Status {
	case "", StatusTriage, StatusTodo, StatusBlocked, StatusScheduled:
	default:
		return Card{}, false, errs.E(op, errs.Invalid, "a card starts as triage, todo, blocked or scheduled, or is made ready when its parents are done; not %q", spec.Status)
	}
	if err := CheckSlug(op, spec.Board); err != nil {
		return Card{}, false, err
	}
	if spec.Workspace.Kind == "" {
		spec.Workspace.Kind = WorkspaceScratch
	}
	if spec.Workspace.Kind == WorkspaceWorktree && spec.Workspace.Path == "" {
		spec.Workspace.Path = s.Repository
	}
	if err := checkWorkspace(op, spec.Workspace); err != nil {
		return Card{}, false, err
	}
	for range maxAttempts {
		// A new id each try: a card made first under the same id (one
		// in 2^32 per card) is a Conflict too.
		id := NewCardID()
		if spec.IdempotencyKey != "" {
			k, err := s.Store.CardByKey(ctx, spec.Board, spec.IdempotencyKey)
			if err == nil {
				return k, false, nil
			}
			if !errs.Is(err, errs.NotFound) {
				return Card{}, false, err
			}
		}
		// The store stamps the card's times inside its write.
		now := StampBase
		c := Change{Stamp: true}
		allDone := true
		for _, pid := range dedupe(spec.Parents) {
			p, err := s.Store.Card(ctx, pid)
			if errs.Is(err, errs.NotFound) || (err == nil && p.Board != spec.Board) {
				return Card{}, false, errs.E(op, errs.Invalid, "parent %s is not a card of board %s", pid, spec.Board)
			}
			if err != nil {
				return Card{}, false, err
			}
			allDone = allDone && p.Status == StatusDone
			// The parent is written, as a link makes it: a card's
			// version covers its links (see recent).
			p.UpdatedAt = now
			c.Cards = append(c.Cards, CardWrite{Card: p, From: p.Version})
			c.Link = append(c.Link, Link{Parent: p.ID, Child: id})
		}
		k = Card{
			ID: id, Board: spec.Board, Title: spec.Title, Body: spec.Body,
			Assignee: LaneName(spec.Assignee), Priority: spec.Priority, Status: spec.Status,
			Workspace: spec.Workspace, MaxRuntime: Seconds(spec.MaxRuntime.Truncate(time.Second)), MaxRetries: spec.MaxRetries,
			IdempotencyKey: spec.IdempotencyKey, CreatedBy: spec.CreatedBy, Tenant: spec.Tenant,
			Review: spec.Review, CompletionCheck: spec.CompletionCheck, ScheduledAt: spec.ScheduledAt,
			CreatedAt: now, UpdatedAt: now,
		}
		switch {
		case k.Status != "":
		case allDone:
			k.Status, k.ReadyAt = StatusReady, now
		default:
			k.Status = StatusTodo
		}
		c.Cards = append([]CardWrite{{Card: k}}, c.Cards...)
		c.Events = []Event{{Board: k.Board, Card: k.ID, Kind: EventCreated, To: k.Status, Actor: spec.CreatedBy, Text: k.Title, At: now}}
		evs, err := s.Store.Apply(ctx, c)
		if errs.Is(err, errs.Conflict) {
			continue // a parent moved on, or another made the key's card first
		}
		if err != nil {
			return Card{}, false, err
		}
		s.readied(c)
		s.recent.forget(c.Cards)
		if k, err = s.stamped(ctx, k, c, evs); err != nil {
			return Card{}, false, err
		}
		k.Version = 1
		for _, l := range c.Link {
			k.Parents = append(k.Parents, l.Parent)
		}
		s.recent.remember(k)
		return k, true, nil
	}
	return Card{}, false, errs.E(op, errs.Conflict, "the board kept changing under this create; try again")
}

// readied tells Ready when c made a card claimable.
func (s *Service) readied(c Change) {
	if s.Ready == nil {
		return
	}
	// A move into ready or review is one; a write of a card that stays
	// there (a dispatcher's note of why it waits) is not, or two
	// instances would wake each other for ever.
	for _, ev := range c.Events {
		if ev.From != ev.To && (ev.To == StatusReady || ev.To == StatusReview) {
			s.Ready()
			return
		}
	}
}

// LaneName is a lane's name as cards carry it: trimmed, lower-cased.
func LaneName(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

func checkWorkspace(op string, w Workspace) error {
	switch w.Kind {
	case WorkspaceScratch:
	case WorkspaceDir:
		if w.Path == "" {
			return errs.E(op, errs.Invalid, "a dir workspace needs its directory")
		}
	case WorkspaceWorktree:
		if w.Path == "" {
			return errs.E(op, errs.Invalid, "a worktree workspace needs the git repository to branch from: give its path, or set tools.workspace")
		}
	default:
		return errs.E(op, errs.Invalid, "workspace %q: scratch, worktree or dir", w.Kind)
	}
	if w.Kind != WorkspaceScratch && !filepath.IsAbs(w.Path) {
		return errs.E(op, errs.Invalid, "the workspace's directory %q is not an absolute path", w.Path)
	}
	return nil
}

func dedupe(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// read returns the card id. Errors: NotFound, saying so.
func (s *Service) read(ctx context.Context, op, id string) (Card, error) {
	k, err := s.Store.Card(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return Card{}, errs.E(op, errs.NotFound, "no card %s", id)
	}
	return k, err
}

// move is k moved to status to at now, with its event.
func move(k Card, to Status, now time.Time, ev Event) (Card, Event) {
	ev.Board, ev.Card, ev.From, ev.To, ev.At = k.Board, k.ID, k.Status, to, now
	if ev.Kind == "" {
		ev.Kind = EventMoved
	}
	k.Status, k.UpdatedAt = to, now
	if to == StatusReady || to == StatusReview {
		k.ReadyAt = now
	}
	return k, ev
}

// Link makes parent a parent of child. Errors: NotFound, Invalid (a
// self-link, cards of two boards, a link that makes a cycle, named).
func (s *Service) Link(ctx context.Context, parent, child, actor string) (Card, error) {
	const op = "kanban.Link"
	if parent == child {
		return Card{}, errs.E(op, errs.Invalid, "card %s cannot be its own parent", parent)
	}
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		p, err := s.read(ctx, op, parent)
		if err != nil {
			return change{}, err
		}
		k, err := s.read(ctx, op, child)
		if err != nil {
			return change{}, err
		}
		if p.Board != k.Board {
			return change{}, errs.E(op, errs.Invalid, "%s is on board %s and %s on %s: links stay within a board", p.ID, p.Board, k.ID, k.Board)
		}
		if slices.Contains(k.Parents, p.ID) {
			return change{card: k}, nil
		}
		// A cycle is a path from the child down to the parent; every card
		// on the walk is checked unchanged, so two links made at once
		// cannot close one between them.
		path, walked, err := s.pathDown(ctx, k, p.ID)
		if err != nil {
			return change{}, err
		}
		if path != nil {
			return change{}, errs.E(op, errs.Invalid, "linking %s → %s would make a cycle: %s → %s", p.ID, k.ID, p.ID, strings.Join(path, " → "))
		}
		c := change{Change: Change{Check: walked, Link: []Link{{Parent: p.ID, Child: k.ID}}}}
		p.UpdatedAt = now
		nk := k
		var evs []Event
		if p.Status != StatusDone && (k.Status == StatusReady) {
			var ev Event
			nk, ev = move(k, StatusTodo, now, Event{Text: "waits for " + p.ID})
			evs = append(evs, ev)
		}
		nk.UpdatedAt = now
		c.Cards = []CardWrite{{Card: p, From: p.Version}, {Card: nk, From: k.Version}}
		c.Events = append([]Event{{Board: k.Board, Card: k.ID, Kind: EventLinked, Actor: actor, Text: p.ID + " → " + k.ID, At: now}}, evs...)
		nk.Parents = append(slices.Clone(k.Parents), p.ID)
		c.card = nk
		return c, nil
	})
}

// pathDown walks from k down its children looking for target, and
// returns the route from k to target (both included) when there is one,
// and every card it read with its version.
func (s *Service) pathDown(ctx context.Context, k Card, target string) ([]string, []Version, error) {
	type step struct {
		id    string
		route []string // from k to id's parent
	}
	var walked []Version
	seen := map[string]bool{k.ID: true}
	var queue []step
	for _, c := range k.Children {
		queue = append(queue, step{id: c, route: []string{k.ID}})
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		if seen[st.id] {
			continue
		}
		seen[st.id] = true
		if st.id == target {
			return append(st.route, target), walked, nil
		}
		c, err := s.Store.Card(ctx, st.id)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		walked = append(walked, Version{ID: c.ID, Version: c.Version})
		for _, next := range c.Children {
			queue = append(queue, step{id: next, route: append(slices.Clone(st.route), c.ID)})
		}
	}
	return nil, walked, nil
}

// Unlink takes parent away from child's parents; a todo child whose
// remaining parents are done becomes ready. Errors: NotFound.
func (s *Service) Unlink(ctx context.Context, parent, child, actor string) (Card, error) {
	const op = "kanban.Unlink"
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, child)
		if err != nil {
			return change{}, err
		}
		if !slices.Contains(k.Parents, parent) {
			return change{}, errs.E(op, errs.NotFound, "%s is not a parent of %s", parent, child)
		}
		c := change{Change: Change{Unlink: []Link{{Parent: parent, Child: child}}}}
		c.Events = []Event{{Board: k.Board, Card: k.ID, Kind: EventUnlinked, Actor: actor, Text: parent + " → " + child, At: now}}
		rest := slices.DeleteFunc(slices.Clone(k.Parents), func(p string) bool { return p == parent })
		nk := k
		nk.UpdatedAt = now
		if k.Status == StatusTodo {
			done, checks, err := s.parentsDone(ctx, rest)
			if err != nil {
				return change{}, err
			}
			c.Check = checks
			if done {
				var ev Event
				nk, ev = move(nk, StatusReady, now, Event{Kind: EventPromoted})
				c.Events = append(c.Events, ev)
			}
		}
		c.Cards = []CardWrite{{Card: nk, From: k.Version}}
		if p, err := s.Store.Card(ctx, parent); err == nil {
			p.UpdatedAt = now
			c.Cards = append(c.Cards, CardWrite{Card: p, From: p.Version})
		}
		nk.Parents = rest
		c.card = nk
		return c, nil
	})
}

// parentsDone reports whether every one of ids is done, with the
// versions it read.
func (s *Service) parentsDone(ctx context.Context, ids []string) (bool, []Version, error) {
	var checks []Version
	done := true
	for _, id := range ids {
		p, err := s.Store.Card(ctx, id)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			return false, nil, err
		}
		checks = append(checks, Version{ID: p.ID, Version: p.Version})
		done = done && p.Status == StatusDone
	}
	return done, checks, nil
}

// Comment adds a comment to a card. Errors: NotFound, Invalid (empty).
func (s *Service) Comment(ctx context.Context, id, author, text string) (Comment, error) {
	const op = "kanban.Comment"
	text = strings.TrimSpace(text)
	if text == "" {
		return Comment{}, errs.E(op, errs.Invalid, "an empty comment")
	}
	text = s.mask(text)
	k, err := s.read(ctx, op, id)
	if err != nil {
		return Comment{}, err
	}
	now, err := s.Store.Now(ctx)
	if err != nil {
		return Comment{}, err
	}
	cm := Comment{ID: "cm_" + randomHex(8), Card: k.ID, Author: author, Text: text, At: now}
	_, err = s.Store.Apply(ctx, Change{
		Comments: []Comment{cm},
		Events:   []Event{{Board: k.Board, Card: k.ID, Kind: EventCommented, Actor: author, Text: text, At: now}},
	})
	return cm, err
}

// mask is text with herald's secrets masked (Redact).
func (s *Service) mask(text string) string {
	if s.Redact == nil || text == "" {
		return text
	}
	return s.Redact(text)
}

// maskResult is res with its texts masked: the summary, the result and
// the metadata's values.
func (s *Service) maskResult(res Result) Result {
	if s.Redact == nil {
		return res
	}
	res.Summary, res.Result = s.mask(res.Summary), s.mask(res.Result)
	if len(res.Metadata) > 0 {
		md := make(map[string]string, len(res.Metadata))
		for k, v := range res.Metadata {
			md[k] = s.mask(v)
		}
		res.Metadata = md
	}
	return res
}

// Assign gives a card to a lane ("" unassigns). A running card is not
// reassigned: its worker is the lane's. Errors: NotFound, Conflict
// (running).
func (s *Service) Assign(ctx context.Context, id, lane, actor string) (Card, error) {
	const op = "kanban.Assign"
	lane = LaneName(lane)
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		if k.Status == StatusRunning {
			on := k.Assignee
			if k.Claim != nil && k.Claim.Lane != "" {
				on = k.Claim.Lane
			}
			return change{}, errs.E(op, errs.Conflict, "%s is running on lane %s; it is reassigned once its run ends (or reclaim it first)", k.ID, on)
		}
		from := k.Version
		k.Assignee, k.UpdatedAt = lane, now
		return change{card: k, Change: Change{
			Cards:  []CardWrite{{Card: k, From: from}},
			Events: []Event{{Board: k.Board, Card: k.ID, Kind: EventAssigned, Actor: actor, Text: lane, At: now}},
		}}, nil
	})
}

// Prioritize sets a card's priority (higher is claimed first), in any
// status but archived; a running card keeps its run. Errors: NotFound,
// Invalid (archived).
func (s *Service) Prioritize(ctx context.Context, id string, priority int, actor string) (Card, error) {
	return s.Edit(ctx, id, EditSpec{Priority: &priority}, actor)
}

// Block blocks a card: a dependency sends it back to todo, any other kind
// to blocked, where it stays until unblocked; blocked a second time for
// the same reason after an unblock, it goes to triage for a person. A
// worker's block names its claim's token (and ends its run); a person's
// names none (0). Errors: NotFound, Invalid (an unknown kind, no
// reason, a card already done or archived), LeaseLost (token is not the
// card's claim).
func (s *Service) Block(ctx context.Context, id string, token int64, kind BlockKind, reason, actor string) (Card, error) {
	const op = "kanban.Block"
	reason = strings.TrimSpace(reason)
	if kind == "" {
		kind = BlockNeedsInput
	}
	if !slices.Contains(BlockKinds, kind) {
		return Card{}, errs.E(op, errs.Invalid, "block kind %q: dependency, needs_input, capability or transient", kind)
	}
	if reason == "" {
		return Card{}, errs.E(op, errs.Invalid, "a block needs a reason")
	}
	reason = s.mask(reason)
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return change{}, err
		}
		if k.Status == StatusDone || k.Status == StatusArchived {
			return change{}, errs.E(op, errs.Invalid, "%s is %s", k.ID, k.Status)
		}
		from := k.Version
		c := change{}
		endClaim(&k, &c.Change, now, OutcomeBlocked, reason, "")
		to := StatusBlocked
		switch {
		case kind == BlockDependency:
			to = StatusTodo
		case k.BlockReason == reason && k.Status != StatusBlocked:
			// The same block again after an unblock: a person looks.
			k.Reblocks++
			to = StatusTriage
		default:
			k.Reblocks = 0
		}
		k.BlockKind, k.BlockReason = kind, reason
		var ev Event
		k, ev = move(k, to, now, Event{Kind: EventBlocked, Actor: actor, Text: reason, Data: map[string]any{"kind": string(kind)}})
		c.Cards = []CardWrite{{Card: k, From: from}}
		c.Events = []Event{ev}
		c.card = k
		return c, nil
	})
}

// Unblock sends a blocked (or triaged) card back: ready when every
// parent is done, else todo; its failure count starts again. Errors:
// NotFound, Invalid (not blocked or in triage).
func (s *Service) Unblock(ctx context.Context, id, actor string) (Card, error) {
	return s.letGo(ctx, "kanban.Unblock", id, []Status{StatusBlocked, StatusTriage}, Event{Kind: EventUnblocked, Actor: actor})
}

// Admit lets a card held in triage since it was made (while its
// attachments were added) go on as a new card does: ready when every
// parent is done, else todo. Its event is promoted, not unblocked:
// nothing blocked it, and nobody is told it was. Errors: NotFound,
// Invalid (not in triage).
func (s *Service) Admit(ctx context.Context, id, actor string) (Card, error) {
	return s.letGo(ctx, "kanban.Admit", id, []Status{StatusTriage}, Event{Kind: EventPromoted, Actor: actor})
}

// letGo moves a card in one of from to ready (every parent done) or
// todo, with ev, its failure count started again.
func (s *Service) letGo(ctx context.Context, op, id string, from []Status, ev Event) (Card, error) {
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		if !slices.Contains(from, k.Status) {
			return change{}, errs.E(op, errs.Invalid, "%s is %s, not %s", k.ID, k.Status, orList(from))
		}
		done, checks, err := s.parentsDone(ctx, k.Parents)
		if err != nil {
			return change{}, err
		}
		version := k.Version
		to := StatusTodo
		if done {
			to = StatusReady
		}
		k.Failures, k.LastError, k.BlockKind, k.RetryAt = 0, "", "", time.Time{}
		var moved Event
		k, moved = move(k, to, now, ev)
		return change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: version}}, Check: checks, Events: []Event{moved}}}, nil
	})
}

// orList is statuses as words: "blocked or triage".
func orList(statuses []Status) string {
	words := make([]string, len(statuses))
	for i, st := range statuses {
		words[i] = string(st)
	}
	return strings.Join(words, " or ")
}

// held reads the card id for a write that names token, refusing it
// (checkToken) when token is not the card's claim.
func (s *Service) held(ctx context.Context, op, id string, token int64) (Card, error) {
	k, err := s.read(ctx, op, id)
	if err != nil {
		return Card{}, err
	}
	return k, checkToken(op, k, token)
}

// checkToken refuses, with LeaseLost, a worker's write (token > 0) about
// a card its claim no longer holds.
func checkToken(op string, k Card, token int64) error {
	if token == 0 {
		return nil
	}
	if k.Claim == nil || k.Claim.Token != token {
		return errs.E(op, errs.LeaseLost, "%s is not held by claim %d any more (it was released or taken by another worker)", k.ID, token)
	}
	return nil
}

// endClaim ends k's claim, when it has one: the run it started is
// added to c, ended now with outcome, and its id returned ("" for none).
func endClaim(k *Card, c *Change, now time.Time, outcome Outcome, errText, summary string) string {
	cl := k.Claim
	if cl == nil {
		return ""
	}
	k.Claim = nil
	started := cl.Started
	if started.IsZero() {
		started = now
	}
	c.Runs = append(c.Runs, Run{ID: cl.Run, Card: k.ID, Board: k.Board, Lane: cl.Lane, Owner: cl.Owner, Review: cl.Review,
		Started: started, Ended: now, Outcome: outcome, Error: errText, Summary: summary})
	return cl.Run
}

// failureLimit is how many failures in a row give k up.
func (s *Service) failureLimit(k Card) int {
	switch {
	case k.MaxRetries > 0:
		return k.MaxRetries
	case s.FailureLimit > 0:
		return s.FailureLimit
	}
	return DefaultFailureLimit
}
