package approvals

import (
	"context"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Commands are /approve [once|session|always] [ID] and /deny [ID],
// answered at once (a turn waits on them). Without an ID they answer
// the conversation's latest pending approval; a press of a question's
// button is one of them, with the question's message id.
func (ap *Approver) Commands() []sessions.Command {
	return []sessions.Command{
		{
			Name: "approve", Args: "[once|session|always] [ID]", OutOfBand: true,
			Summary: "allow what herald waits to run: once (default), for this session, or always",
			Handle: func(ctx context.Context, call *sessions.CommandCall) error {
				d, id, ok := parseApprove(call.Args)
				if !ok {
					return call.Reply(ctx, usageText)
				}
				return ap.command(ctx, call, d, id)
			},
		},
		{
			Name: "deny", Args: "[ID]", OutOfBand: true,
			Summary: "refuse what herald waits to run",
			Handle: func(ctx context.Context, call *sessions.CommandCall) error {
				if len(strings.Fields(call.Args)) > 1 {
					return call.Reply(ctx, usageText)
				}
				return ap.command(ctx, call, Deny, strings.TrimSpace(call.Args))
			},
		},
	}
}

// parseApprove reads /approve's arguments: a decision (once when none)
// and an approval id (the latest pending one when none).
func parseApprove(args string) (Decision, string, bool) {
	f := strings.Fields(args)
	d := Once
	if len(f) > 0 {
		if parsed, ok := ParseDecision(f[0]); ok && parsed != Deny {
			d, f = parsed, f[1:]
		}
	}
	switch len(f) {
	case 0:
		return d, "", true
	case 1:
		return d, f[0], strings.HasPrefix(f[0], "ap_")
	}
	return "", "", false
}

// command answers approval id (the conversation's latest pending one
// when empty) with d, as the person who sent call.
func (ap *Approver) command(ctx context.Context, call *sessions.CommandCall, d Decision, id string) error {
	if id == "" {
		pending, err := ap.Pending(ctx, call.In.Conv)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return call.Reply(ctx, noPendingText)
		}
		id = pending[len(pending)-1].ID
	}
	a, err := ap.Approval(ctx, id)
	switch {
	case errs.Is(err, errs.NotFound):
		return call.Reply(ctx, "There is no approval "+id+".")
	case err != nil:
		return err
	}
	by := call.In.UserKey(call.Target.Platform)
	if !ap.MayAnswer(a, by, call.In.Conv) {
		return call.Reply(ctx, notYoursText)
	}
	if !a.Pending() {
		return call.Reply(ctx, decidedBeforeText(a))
	}
	// A press has the question say who decided what, in its place; a
	// typed answer in the question's chat is answered with that line
	// (every command is answered: the local API waits for it), and one
	// from another chat is answered there as the question's chat is told.
	pressed, replyTo := call.In.Meta[sessions.MetaPressed], ""
	if pressed == "" && call.In.Conv == a.Conv {
		replyTo = call.In.MessageID
	}
	a, err = ap.answer(ctx, id, d, by, pressed, replyTo)
	switch {
	case IsDecided(err):
		return call.Reply(ctx, decidedBeforeText(a))
	case err != nil:
		return err
	case pressed == "" && replyTo == "":
		return call.Reply(ctx, decidedText(a))
	}
	return nil
}
