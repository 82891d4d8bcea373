package slack

import (
	"context"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

var _ adapters.Streamer = (*Adapter)(nil)

// StreamText shows the reply in progress (adapters.Streamer): posted with
// chat.postMessage into t's channel and thread, as the reply's first part
// would be, then updated with chat.update. Only the first part of text
// shows. replyTo is not needed: the target names the thread.
func (a *Adapter) StreamText(ctx context.Context, t outbox.Target, _, id, text string) (string, error) {
	const op = "slack.StreamText"
	channel, thread, err := route(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	parts := chatfmt.RenderParts(text, chatfmt.SlackMrkdwn, chatfmt.SlackLimit)
	if len(parts) == 0 {
		return "", errs.E(op, errs.Invalid, "nothing to show yet")
	}
	if id == "" {
		id, err = a.post(ctx, channel, thread, parts[0], false)
	} else {
		id, err = a.update(ctx, channel, id, parts[0], false)
	}
	if err != nil {
		return "", adapters.StreamError(op, classify(err))
	}
	return id, nil
}
