package telegram

import (
	"context"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

var _ adapters.Streamer = (*Adapter)(nil)

// StreamText shows the reply in progress (adapters.Streamer): posted with
// sendMessage as the reply's first part would be, replying to replyTo,
// then edited with editMessageText. Only the first part of text shows.
func (a *Adapter) StreamText(ctx context.Context, t outbox.Target, replyTo, id, text string) (string, error) {
	const op = "telegram.StreamText"
	chat, thread, err := chatAndThread(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	parts := chatfmt.RenderParts(text, dialect, chatfmt.TelegramLimit)
	if len(parts) == 0 {
		return "", errs.E(op, errs.Invalid, "nothing to show yet")
	}
	var res adapters.SendResult
	if id == "" {
		id, res = a.sendPart(ctx, chat, thread, replyID(replyTo, t.Chat), parts[0], nil)
	} else {
		id, res = a.editPart(ctx, chat, id, parts[0], nil)
	}
	return id, adapters.StreamError(op, res)
}
