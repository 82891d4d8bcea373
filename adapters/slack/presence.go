package slack

import (
	"context"
	"errors"

	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Typing does nothing: Slack's Web API has no typing indicator for bots
// (assistant.threads.setStatus works only in an AI app's assistant
// threads), so a running turn shows as its status line alone.
func (a *Adapter) Typing(context.Context, outbox.Target) error { return nil }

// Status posts a status line into t's channel and thread when id is
// empty, else edits the line with ts id (chat.update), and returns its ts.
// Errors: Invalid (bad target), Unavailable (Slack refused or could not
// be reached).
func (a *Adapter) Status(ctx context.Context, t outbox.Target, id, text string) (string, error) {
	const op = "slack.Status"
	channel, thread, err := route(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	parts := chatfmt.RenderParts(text, chatfmt.SlackMrkdwn, chatfmt.SlackLimit)
	if len(parts) == 0 {
		return "", errs.E(op, errs.Invalid, "empty status line")
	}
	if id == "" {
		ts, err := a.post(ctx, channel, thread, parts[0], false)
		return ts, errs.Wrap(op, errs.Unavailable, err)
	}
	_, _, _, err = a.api.UpdateMessageContext(ctx, channel, id, slackapi.MsgOptionText(parts[0], false))
	if err != nil {
		return "", errs.Wrap(op, errs.Unavailable, err)
	}
	return id, nil
}

// ClearStatus deletes the status line id (chat.delete); one already gone
// is no error. Errors: Invalid (bad target), Unavailable.
func (a *Adapter) ClearStatus(ctx context.Context, t outbox.Target, id string) error {
	const op = "slack.ClearStatus"
	channel, _, err := route(t)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	_, _, err = a.api.DeleteMessageContext(ctx, channel, id)
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "message_not_found" {
		return nil
	}
	return errs.Wrap(op, errs.Unavailable, err)
}
