package discord

import (
	"context"
	"errors"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Typing shows "herald is typing…" in t's channel or thread; Discord
// clears it after about 10 s or at the next message.
func (a *Adapter) Typing(ctx context.Context, t outbox.Target) error {
	const op = "discord.Typing"
	r, err := parseRoute(t)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	return errs.Wrap(op, errs.Unavailable, a.rest.ChannelTyping(r.dest(), discordgo.WithContext(ctx)))
}

// Status posts the status line to t when id is empty, else edits message
// id, and returns the line's message id.
func (a *Adapter) Status(ctx context.Context, t outbox.Target, id, text string) (string, error) {
	const op = "discord.Status"
	r, err := parseRoute(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	parts := chatfmt.RenderParts(text, chatfmt.DiscordMarkdown, chatfmt.DiscordLimit)
	if len(parts) == 0 {
		return "", errs.E(op, errs.Invalid, "empty status line")
	}
	var m *discordgo.Message
	if id == "" {
		m, err = a.rest.ChannelMessageSendComplex(r.dest(), &discordgo.MessageSend{Content: parts[0], AllowedMentions: noPings},
			discordgo.WithContext(ctx))
	} else {
		m, err = a.rest.ChannelMessageEdit(r.dest(), id, parts[0], discordgo.WithContext(ctx))
	}
	if err != nil {
		return "", errs.Wrap(op, errs.Unavailable, err)
	}
	return m.ID, nil
}

// ClearStatus deletes the status line id. One already gone (a moderator
// deleted it) is cleared, as on the other platforms.
func (a *Adapter) ClearStatus(ctx context.Context, t outbox.Target, id string) error {
	const op = "discord.ClearStatus"
	r, err := parseRoute(t)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	err = a.rest.ChannelMessageDelete(r.dest(), id, discordgo.WithContext(ctx))
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Message != nil && re.Message.Code == discordgo.ErrCodeUnknownMessage {
		return nil
	}
	return errs.Wrap(op, errs.Unavailable, err)
}
