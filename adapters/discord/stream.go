package discord

import (
	"context"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

var _ adapters.Streamer = (*Adapter)(nil)

// StreamText shows the reply in progress (adapters.Streamer): posted to
// t's channel as the reply's first part would be, a reply to replyTo,
// then edited. Only the first part of text shows. An application
// command's answer is not shown in progress (Invalid): it goes as the
// interaction's follow-ups.
func (a *Adapter) StreamText(ctx context.Context, t outbox.Target, replyTo, id, text string) (string, error) {
	const op = "discord.StreamText"
	if _, ok := parseInteractionRef(replyTo); ok {
		return "", errs.E(op, errs.Invalid, "an application command's answer goes as its follow-ups")
	}
	r, err := parseRoute(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	parts := chatfmt.RenderParts(text, chatfmt.DiscordMarkdown, chatfmt.DiscordLimit)
	if len(parts) == 0 {
		return "", errs.E(op, errs.Invalid, "nothing to show yet")
	}
	if id == "" {
		ref := ""
		if isSnowflake(replyTo) {
			ref = replyTo
		}
		id, err = a.post(ctx, r, parts[0], ref, nil, nil)
	} else {
		id, err = a.edit(ctx, r, id, parts[0], nil)
	}
	if err != nil {
		return "", adapters.StreamError(op, classify(err))
	}
	return id, nil
}
