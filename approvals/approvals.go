// Package approvals is how a dangerous action waits for a person: a
// terminal command on the dangerous list, or a tool named in
// approvals.tools, asks the conversation's person with four buttons
// (Allow once, Allow this session, Always allow, Deny) and the turn
// waits, holding its lease, for the answer or approvals.timeout. The
// question, the decision and the grants it leaves (a session's, the
// shared allowlist) are kept in the store, so a press on any gateway
// reaches the turn waiting on another (the signal bus), and a restart
// asks again.
package approvals

import (
	"context"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
)

// Decision is a person's answer, or how an approval ended without one.
type Decision string

// The decisions. Once, Session and Always run the action; Session also
// lets the same pattern run without asking until /new, Always until it
// is revoked, on every gateway. Deny, Timeout and Expired do not run it.
const (
	Once    Decision = "once"
	Session Decision = "session"
	Always  Decision = "always"
	Deny    Decision = "deny"
	// Timeout: no answer within approvals.timeout.
	Timeout Decision = "timeout"
	// Expired: the turn that asked ended (a restart runs it again and
	// asks anew), so a press on its message comes too late.
	Expired Decision = "expired"
)

// Allows reports whether d runs the action.
func (d Decision) Allows() bool { return d == Once || d == Session || d == Always }

// ParseDecision reads a decision a person gives (/approve's argument, a
// button, the API's "decision"): once, session, always or deny.
func ParseDecision(s string) (Decision, bool) {
	switch d := Decision(s); d {
	case Once, Session, Always, Deny:
		return d, true
	}
	return "", false
}

// The buttons' words, in their order.
var Buttons = []struct {
	Text     string
	Decision Decision
}{
	{"Allow once", Once},
	{"Allow this session", Session},
	{"Always allow", Always},
	{"Deny", Deny},
}

// Approval is one question to a person and, once answered, its answer.
type Approval struct {
	ID   string `json:"id"`
	Conv string `json:"conv"`
	// Key names what asked within its conversation: the asking turn's
	// conversation and entry (a sub-agent's own, asking its parent
	// conversation's person). A turn runs its tools one at a time, so
	// it waits on one approval at most; run again (a restart), it asks
	// under the same key, which expires the earlier question. Not the
	// tool call's id: a model names the calls it makes again anew.
	Key string `json:"key"`
	// Session is the conversation's session it was asked in (a session
	// grant holds within it).
	Session string `json:"session,omitempty"`
	// Target is where the question was sent.
	Target outbox.Target `json:"target"`
	// Tool is the tool that asks: "terminal" for a command.
	Tool string `json:"tool"`
	// Action is what would run, shown to the person: the command, or the
	// tool and its arguments, secrets masked.
	Action string `json:"action"`
	// Reason is why it asks: the dangerous-command pattern it matched, or
	// approvals.tools naming the tool.
	Reason string `json:"reason"`
	// Pattern is what a session or always grant allows: the command's
	// matched dangerous pattern, or the tool's name.
	Pattern string `json:"pattern"`
	// Asker is who may answer: the user whose message started the turn
	// (a platform user id); empty: anyone the conversation serves.
	Asker string `json:"asker,omitempty"`

	Decision  Decision  `json:"decision,omitempty"` // empty while pending
	DecidedBy string    `json:"decided_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Deadline  time.Time `json:"deadline"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// MessageID is the platform's id of the question's message, once
	// known (a press carries it): its buttons go when it is answered.
	MessageID string `json:"message_id,omitempty"`
}

// Pending reports whether the approval waits for an answer.
func (a Approval) Pending() bool { return a.Decision == "" }

// Grant is a pattern that runs without asking: for one session of one
// conversation, or (Conv empty) always, everywhere.
type Grant struct {
	Pattern   string    `json:"pattern"`
	Conv      string    `json:"conv,omitempty"`
	Session   string    `json:"session,omitempty"`
	GrantedBy string    `json:"granted_by"`
	Approval  string    `json:"approval,omitempty"` // the approval it came from
	At        time.Time `json:"at"`
}

// Store keeps approvals and grants, shared by every gateway.
type Store interface {
	// CreateApproval stores a pending approval, and expires every other
	// pending approval of its conversation under the same Key.
	// Errors: Invalid (no ID, Conv or Key), Conflict (the ID exists).
	CreateApproval(ctx context.Context, a Approval) error
	// Approval reads one. Errors: NotFound.
	Approval(ctx context.Context, id string) (Approval, error)
	// Decide answers a pending approval: d, by whom, at; message, when
	// not empty, sets MessageID. An approval already decided is returned
	// as it is with a Conflict error, so the caller can say who decided
	// it. Errors: NotFound, Conflict.
	Decide(ctx context.Context, id string, d Decision, by string, at time.Time, message string) (Approval, error)
	// SetMessage records message, the platform's id of the question's
	// message once it was sent, so the question can be edited when it is
	// answered, however it is. Errors: Invalid (an empty id or message),
	// NotFound.
	SetMessage(ctx context.Context, id, message string) error
	// PendingApprovals lists the pending approvals of conv (all
	// conversations' when conv is empty), oldest first.
	PendingApprovals(ctx context.Context, conv string) ([]Approval, error)
	// Decided lists the decided approvals of conv (every conversation's
	// when empty), newest first, at most limit.
	Decided(ctx context.Context, conv string, limit int) ([]Approval, error)

	// AddGrant adds g; the same pattern for the same scope is one grant
	// (the later replaces the earlier).
	AddGrant(ctx context.Context, g Grant) error
	// Grants lists the grants of conv's session (Conv and Session set)
	// and the always grants (both empty lists only those).
	Grants(ctx context.Context, conv, session string) ([]Grant, error)
	// Revoke removes the always grant of pattern; false when there was
	// none.
	Revoke(ctx context.Context, pattern string) (bool, error)
}

// SignalDecided tells the gateway whose turn waits on an approval that
// it was decided: Target is the approval's id.
const SignalDecided signals.Kind = "approvals.decided"

// Config is approvals.* as the approver reads it.
const (
	ModeManual = config.ApprovalsManual
	ModeOff    = config.ApprovalsOff
	// UnattendedDeny refuses what would ask when nobody can be asked.
	UnattendedDeny = config.ApprovalsUnattendedDeny
	// UnattendedAllow runs it.
	UnattendedAllow = config.ApprovalsUnattendedAllow
	// SubagentDeny and SubagentAsk are delegation.subagent_approvals.
	SubagentDeny = config.SubagentApprovalsDeny
	SubagentAsk  = config.SubagentApprovalsAsk
)

// DefaultTimeout is approvals.timeout's default.
const DefaultTimeout = config.DefaultApprovalTimeout
