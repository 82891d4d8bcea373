package telegram

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Typing shows "typing…" in t's chat, in its topic when t has one.
func (a *Adapter) Typing(ctx context.Context, t outbox.Target) error {
	const op = "telegram.Typing"
	chat, thread, err := chatAndThread(t)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	_, err = a.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chat, MessageThreadID: thread, Action: models.ChatActionTyping})
	return a.presenceErr(op, err)
}

// Status posts the status line as plain text (silently: it is no news)
// when id is empty, else edits the line with that id.
func (a *Adapter) Status(ctx context.Context, t outbox.Target, id, text string) (string, error) {
	const op = "telegram.Status"
	chat, thread, err := chatAndThread(t)
	if err != nil {
		return "", errs.Wrap(op, errs.Invalid, err)
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return "", errs.E(op, errs.Invalid, "empty status text")
	}
	if parts := chatfmt.Split(text, chatfmt.TelegramLimit, chatfmt.UTF16); len(parts) > 1 {
		text = parts[0]
	}
	if id == "" {
		msg, err := a.bot.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: text, DisableNotification: true})
		if err != nil {
			return "", a.presenceErr(op, err)
		}
		return strconv.Itoa(msg.ID), nil
	}
	mid, err := strconv.Atoi(id)
	if err != nil {
		return "", errs.E(op, errs.Invalid, "status id %q is not a message id", id)
	}
	_, err = a.bot.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: mid, Text: text})
	if err != nil && badRequest(err, "message is not modified") {
		err = nil // the line already says it
	}
	return id, a.presenceErr(op, err)
}

// ClearStatus deletes the status line id. One already gone is cleared.
func (a *Adapter) ClearStatus(ctx context.Context, t outbox.Target, id string) error {
	const op = "telegram.ClearStatus"
	chat, _, err := chatAndThread(t)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	mid, err := strconv.Atoi(id)
	if err != nil {
		return errs.E(op, errs.Invalid, "status id %q is not a message id", id)
	}
	_, err = a.bot.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chat, MessageID: mid})
	if err != nil && badRequest(err, "message to delete not found") {
		return nil
	}
	return a.presenceErr(op, err)
}

// presenceErr gives a Bot API error its code: Invalid for what Telegram
// refuses (400, 403), Unavailable for what may pass.
func (a *Adapter) presenceErr(op string, err error) error {
	if err == nil {
		return nil
	}
	err = a.redact(err)
	if errors.Is(err, bot.ErrorBadRequest) || errors.Is(err, bot.ErrorForbidden) {
		return errs.Wrap(op, errs.Invalid, err)
	}
	return errs.Wrap(op, errs.Unavailable, err)
}

// badRequest reports a 400 answer whose description contains words.
func badRequest(err error, words string) bool {
	return errors.Is(err, bot.ErrorBadRequest) && strings.Contains(strings.ToLower(err.Error()), words)
}
