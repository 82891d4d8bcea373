package approvals

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/tools"
)

// DefaultPoll is how often a waiting turn reads its approval again, a
// backstop for a decision whose signal it missed.
const DefaultPoll = 5 * time.Second

// Options are what an Approver works with: approvals.* and
// delegation.subagent_*, and the stores a question and its answer go
// through.
type Options struct {
	Store Store
	// Outbox takes the questions and the lines that say how they were
	// answered; it wakes the delivery worker.
	Outbox outbox.Store
	// Signals tells the other gateways of a decision (SignalDecided).
	Signals signals.Store
	// Meta reads a conversation's metadata: its session
	// (sessions.ConvMetaSession), which a session grant holds within.
	Meta func(ctx context.Context, conv string) (map[string]string, error)

	Mode       string        // ModeManual or ModeOff
	Timeout    time.Duration // 0: DefaultTimeout
	Deny       []string      // RE2 patterns of commands never run
	Unattended string        // UnattendedDeny or UnattendedAllow
	// Admins are user keys ("telegram:42") who may answer any approval,
	// beside its Asker.
	Admins []string
	// SubagentAutoApprove runs a sub-agent's action without asking
	// (delegation.subagent_auto_approve); SubagentApprovals is
	// delegation.subagent_approvals.
	SubagentAutoApprove bool
	SubagentApprovals   string
	// Depth is how deep in sub-agents ctx runs (delegation.DepthOf): 0
	// for a conversation's own turn. nil: always 0.
	Depth func(ctx context.Context) int
	// Parent is, for a sub-agent, the conversation it works for and its
	// person (delegation.ParentOf): with SubagentApprovals SubagentAsk,
	// that person is asked in that conversation. nil or false: nobody.
	Parent func(ctx context.Context) (Parent, bool)
	// Redact masks herald's secrets in what a question shows.
	Redact func(string) string
	Clock  clock.Clock
	Poll   time.Duration // 0: DefaultPoll
	Logger *slog.Logger
}

// Approver is the tools' Gate: it asks a conversation's person before a
// dangerous action runs, and takes their answer (Answer) from a
// command, a button or the API, in this gateway or another.
type Approver struct {
	opts Options
	deny []*regexp.Regexp

	mu      sync.Mutex
	waiting map[string]chan struct{} // by approval id: the turns waiting here
}

var _ tools.Gate = (*Approver)(nil)

// New checks opts and returns the Approver.
// Errors: Invalid (a deny pattern that is not RE2).
func New(opts Options) (*Approver, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	ap := &Approver{opts: opts, waiting: map[string]chan struct{}{}}
	for i, p := range opts.Deny {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, errs.E("approvals.New", errs.Invalid, "approvals.deny[%d]: %q is not an RE2 regular expression: %v", i, p, err)
		}
		ap.deny = append(ap.deny, re)
	}
	return ap, nil
}

// Ask is the Gate: nil runs the action, an error is what the model
// reads. A command approvals.deny matches is refused whatever else
// holds; an action with no Reason runs; with approvals.mode off, or a
// grant of its pattern, it runs; where nobody can be asked
// approvals.unattended decides; otherwise the conversation's person is
// asked and the turn waits for the answer, approvals.timeout at most.
func (ap *Approver) Ask(ctx context.Context, turn *tools.Turn, req tools.ApprovalRequest) error {
	const op = "approvals.Ask"
	if req.Tool == "terminal" {
		for _, re := range ap.deny {
			if re.MatchString(req.Action) {
				return errs.E(op, errs.Invalid, "%s", refusedText(re.String()))
			}
		}
	}
	if req.Reason == "" || ap.opts.Mode == ModeOff {
		return nil
	}
	if turn == nil {
		turn = &tools.Turn{}
	}
	key := askKey(turn)
	who, unattended := ap.unattended(ctx, turn)
	if unattended && who == whoChild && !ap.opts.SubagentAutoApprove {
		if parent, ok := ap.parent(ctx, turn); ok {
			// The sub-agent's question goes to its parent conversation's
			// person, and grants are that conversation's.
			req.Reason = fmt.Sprintf("a sub-agent of this conversation (%s) asks; %s", strings.TrimPrefix(turn.Conv, "subagent:"), req.Reason)
			turn, unattended = parent, false
		}
	}
	session := ap.session(ctx, turn.Conv)
	granted, err := ap.granted(ctx, turn.Conv, session, req.Pattern)
	if err != nil {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	if granted {
		return nil
	}
	if unattended {
		if who == whoChild && ap.opts.SubagentAutoApprove || ap.opts.Unattended == UnattendedAllow {
			return nil
		}
		return errs.E(op, errs.Invalid, "%s", unattendedText(who, req))
	}
	a, err := ap.create(ctx, turn, key, session, req)
	if err != nil {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	return ap.wait(ctx, a)
}

// FirstSession names a conversation's session before its first /new
// (sessions.ConvMetaSession unset) in approvals and grants: a session
// grant names a session.
const FirstSession = "first"

// session is conv's current session: sessions.ConvMetaSession, else
// FirstSession (also when its metadata cannot be read).
func (ap *Approver) session(ctx context.Context, conv string) string {
	if ap.opts.Meta == nil || conv == "" {
		return FirstSession
	}
	meta, err := ap.opts.Meta(ctx, conv)
	if err != nil || meta[sessions.ConvMetaSession] == "" {
		return FirstSession
	}
	return meta[sessions.ConvMetaSession]
}

// granted reports a grant of pattern: always, or for conv's session.
func (ap *Approver) granted(ctx context.Context, conv, session, pattern string) (bool, error) {
	if conv == "" {
		session = ""
	}
	gs, err := ap.opts.Store.Grants(ctx, conv, session)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(gs, func(g Grant) bool { return g.Pattern == pattern }), nil
}

// Who has nobody to ask.
const (
	whoCron   = "cron"
	whoChild  = "child"
	whoNoChat = "nochat"
)

// unattended tells whether nobody can be asked about the turn's action,
// and why: a scheduled job's fire, a sub-agent (a kanban worker is
// one), or a turn with no chat to ask in.
func (ap *Approver) unattended(ctx context.Context, turn *tools.Turn) (string, bool) {
	switch {
	case ap.opts.Depth != nil && ap.opts.Depth(ctx) > 0:
		return whoChild, true
	case strings.HasPrefix(turn.Conv, "cron:"):
		return whoCron, true
	case turn.Origin.Validate() != nil:
		return whoNoChat, true
	}
	return "", false
}

// Parent is the conversation a sub-agent works for, as its delegation
// records it.
type Parent struct {
	Conv   string
	User   string
	Origin outbox.Target
}

// parent is the turn a sub-agent's question is asked in under
// delegation.subagent_approvals: ask: its parent conversation's, to
// its person, keyed by the sub-agent's own turn (askKey). false when
// the rule is deny or the sub-agent has no parent with a chat (a kanban
// worker's, a scheduled job's).
func (ap *Approver) parent(ctx context.Context, child *tools.Turn) (*tools.Turn, bool) {
	if ap.opts.SubagentApprovals != SubagentAsk || ap.opts.Parent == nil {
		return nil, false
	}
	p, ok := ap.opts.Parent(ctx)
	if !ok || p.Conv == "" || strings.HasPrefix(p.Conv, "cron:") || p.Origin.Validate() != nil {
		return nil, false
	}
	return &tools.Turn{Conv: p.Conv, User: p.User, Origin: p.Origin, EntryID: child.EntryID}, true
}

// askKey is an approval's Key: the asking turn's conversation and
// entry (a sub-agent's own, when its parent's person is asked). A turn
// with no entry is never run again: its key is its own, "".
func askKey(turn *tools.Turn) string {
	if turn.EntryID == "" {
		return ""
	}
	return turn.Conv + "/" + turn.EntryID
}

// create stores a new pending approval for the turn's action and sends
// its question with the four buttons, at once: the turn waits for it,
// so it cannot go with the turn's commit.
func (ap *Approver) create(ctx context.Context, turn *tools.Turn, key, session string, req tools.ApprovalRequest) (Approval, error) {
	now := ap.opts.Clock.Now()
	a := Approval{
		ID:        newID(),
		Conv:      turn.Conv,
		Key:       key,
		Session:   session,
		Target:    turn.Origin,
		Tool:      req.Tool,
		Action:    ap.opts.Redact(req.Action),
		Reason:    req.Reason,
		Pattern:   req.Pattern,
		Asker:     turn.User,
		CreatedAt: now,
		Deadline:  now.Add(ap.opts.Timeout),
	}
	if a.Key == "" {
		a.Key = a.ID
	}
	if err := ap.opts.Store.CreateApproval(ctx, a); err != nil {
		return Approval{}, err
	}
	// Waiting before the question goes out: an answer cannot come
	// before it is registered.
	ap.register(a.ID)
	m := outbox.Message{
		Target: a.Target, Conv: a.Conv, Kind: KindQuestion, Text: questionText(a, ap.opts.Timeout), Ref: a.ID,
		IdempotencyKey: "approval:" + a.ID, Meta: map[string]string{MetaApproval: a.ID},
	}
	for _, b := range Buttons {
		m.Buttons = append(m.Buttons, outbox.Button{Text: b.Text, Data: buttonData(b.Decision, a.ID)})
	}
	if _, _, err := ap.opts.Outbox.Enqueue(ctx, m); err != nil {
		ap.unregister(a.ID)
		return Approval{}, err
	}
	ap.opts.Logger.Info("asking approval", "approval", a.ID, "conv", a.Conv, "tool", a.Tool, "pattern", a.Pattern)
	return a, nil
}

// newID is a fresh approval id: "ap_" and 16 hex digits.
func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "ap_" + hex.EncodeToString(b)
}

// buttonData is what a press of d's button on approval id delivers: its
// text command (at most 64 bytes, Telegram's limit).
func buttonData(d Decision, id string) string {
	if d == Deny {
		return "/deny " + id
	}
	return "/approve " + string(d) + " " + id
}

// The outbox kinds of a question and of the line saying how it ended,
// and the Meta key naming their approval.
const (
	KindQuestion = "approval"
	KindDecided  = "approval_decided"
	MetaApproval = "approval"
	MetaDecision = "approval_decision"
	MetaDecider  = "approval_decided_by"
)
