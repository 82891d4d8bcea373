package approvals

import (
	"context"
	"slices"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// Herald is who decides an approval nobody answered (Timeout, Expired).
const Herald = "herald"

// Answer is a person's decision d on approval id: by is who decided
// (a user key, or "api"), message the platform's id of the question's
// message when a button of it was pressed ("" else). It decides it in
// the store, tells the gateway whose turn waits (SignalDecided, and
// this one's at once), adds the grant a session or always decision
// leaves, and has the question say who decided what.
// Errors: NotFound; Conflict with the approval as it was decided (or
// expired), so the caller can say by whom; the store's.
func (ap *Approver) Answer(ctx context.Context, id string, d Decision, by, message string) (Approval, error) {
	return ap.answer(ctx, id, d, by, message, "")
}

// answer is Answer; with replyTo set, the line saying who decided what
// is the answer to that message of the question's chat (a typed
// /approve), which the local API waits for.
func (ap *Approver) answer(ctx context.Context, id string, d Decision, by, message, replyTo string) (Approval, error) {
	a, err := ap.opts.Store.Decide(ctx, id, d, by, ap.opts.Clock.Now(), message)
	if err != nil {
		return a, err
	}
	if err := ap.opts.Signals.Signal(ctx, signals.Signal{Conv: a.Conv, Kind: SignalDecided, Target: a.ID}); err != nil {
		// The waiting turn reads the store again within Poll.
		ap.opts.Logger.Warn("telling the other gateways of a decision failed", "approval", a.ID, "err", err)
	}
	ap.wake(a.ID)
	ap.settle(ctx, a, replyTo)
	return a, nil
}

// settle does what a decision leaves: the grant of a session or always
// decision, and the line in the question's chat saying who decided
// what, which takes the place of the question where the platform can
// edit it, or answers replyTo, a message of that chat. That line carries
// the decision in its Meta, so the local API's timeline records it.
func (ap *Approver) settle(ctx context.Context, a Approval, replyTo string) {
	g := Grant{Pattern: a.Pattern, GrantedBy: a.DecidedBy, Approval: a.ID, At: a.DecidedAt}
	switch a.Decision {
	case Session:
		g.Conv, g.Session = a.Conv, a.Session
	case Always:
	default:
		g.Pattern = ""
	}
	if g.Pattern != "" {
		if err := ap.opts.Store.AddGrant(ctx, g); err != nil {
			ap.opts.Logger.Error("adding a grant failed", "approval", a.ID, "pattern", a.Pattern, "err", err)
		}
	}
	ap.opts.Logger.Info("approval decided", "approval", a.ID, "conv", a.Conv, "decision", a.Decision, "by", a.DecidedBy)
	if a.Target.Validate() != nil {
		return
	}
	m := outbox.Message{
		Target: a.Target, Conv: a.Conv, Kind: KindDecided, Text: decidedText(a), Edits: a.MessageID,
		IdempotencyKey: "approval-decided:" + a.ID,
		Meta:           map[string]string{MetaApproval: a.ID, MetaDecision: string(a.Decision), MetaDecider: a.DecidedBy},
	}
	if replyTo != "" {
		m.Kind, m.ReplyTo = sessions.KindCommand, replyTo
	}
	if _, _, err := ap.opts.Outbox.Enqueue(ctx, m); err != nil {
		ap.opts.Logger.Error("saying how an approval was decided failed", "approval", a.ID, "err", err)
	}
}

// Settled is told how a question's delivery ended (delivery's Settled):
// once accepted, the platform's id of its message is recorded, so an
// answer given by any means (a typed /approve, the API, the timeout)
// edits it in place and its buttons go, as a press's does.
func (ap *Approver) Settled(m outbox.Message, accepted bool, _ string) {
	id := m.Meta[outbox.MetaSentID]
	if m.Kind != KindQuestion || !accepted || m.Ref == "" || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if err := ap.opts.Store.SetMessage(ctx, m.Ref, id); err != nil {
		ap.opts.Logger.Warn("recording a question's message failed; its answer will not edit it", "approval", m.Ref, "err", err)
	}
}

// settleTimeout bounds Settled's store write.
const settleTimeout = 10 * time.Second

// MayAnswer reports whether user (a user key) may answer a, asked from
// conv: its Asker or an admin (approvals.admins); anyone in its own
// conversation when it names no Asker.
func (ap *Approver) MayAnswer(a Approval, user, conv string) bool {
	switch {
	case user != "" && slices.Contains(ap.opts.Admins, user):
		return true
	case a.Asker != "":
		return user == a.Asker
	}
	return conv == a.Conv
}

// Pending lists the pending approvals of conv (every conversation's
// when empty), oldest first.
func (ap *Approver) Pending(ctx context.Context, conv string) ([]Approval, error) {
	return ap.opts.Store.PendingApprovals(ctx, conv)
}

// Approval reads one. Errors: NotFound.
func (ap *Approver) Approval(ctx context.Context, id string) (Approval, error) {
	return ap.opts.Store.Approval(ctx, id)
}

// IsDecided tells a Conflict of Answer: the approval was decided before.
func IsDecided(err error) bool { return errs.Is(err, errs.Conflict) }
