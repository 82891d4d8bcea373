package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/outbox"
)

// Replies are rendered as Telegram HTML rather than MarkdownV2: HTML
// reserves three characters (<, > and &) where MarkdownV2 reserves
// eighteen, each of which must be escaped everywhere outside code, so a
// reply is far less likely to be refused for its formatting, and a
// refused one is easy to read back as plain text (plain.go).
const dialect = chatfmt.TelegramHTML

// Send sends m as one sendMessage per part, in order: the first replies
// to m.ReplyTo, all go to the topic when the target has a thread. A part
// Telegram refuses to parse is resent as plain text. m's files follow,
// one sendPhoto or sendDocument each (sendFile), the first with the text
// as its caption when the text fits one. A retry goes on after the parts
// an earlier attempt got through (m.Parts), recorded as each is
// accepted (adapters.KeepParts).
func (a *Adapter) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	return a.send(ctx, m, "")
}

// SendStreamed sends m as Send does, its first part edited into message
// over, the reply in progress (adapters.Streamer). A refused edit posts
// the part anew and deletes over once every part went.
func (a *Adapter) SendStreamed(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	return a.send(ctx, m, over)
}

// captionLimit is a photo's or a document's caption limit, in UTF-16
// code units. Telegram counts the text without its markup; the rendered
// HTML is measured here, which keeps within it.
const captionLimit = 1024

// layOut is how m goes out in parts: its text rendered in Telegram HTML,
// then its files.
func layOut(m outbox.Message) adapters.Layout {
	render := func(limit int) []string { return chatfmt.RenderParts(m.Text, dialect, limit) }
	return adapters.LayOut(m, render, chatfmt.TelegramLimit, captionLimit)
}

func (a *Adapter) send(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	chat, thread, err := chatAndThread(m.Target)
	if err != nil {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: err.Error()}
	}
	if m.Edits != "" {
		return a.replace(ctx, m, chat)
	}
	l := layOut(m)
	if l.Len() == 0 {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "the message is empty"}
	}
	sent, firstID := adapters.ResumeAt(m, l.Len()), m.Parts.First
	if why := l.Missing(sent); why != "" {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "telegram: " + why}
	}
	// unstreamed: Telegram refused to edit the reply in progress into the
	// first part, which is posted anew, or that part is a file, which no
	// edit makes of a text message; kept with the parts once one went,
	// so the attempt that sends the last deletes it.
	unstreamed := m.Parts.Unstreamed || (over != "" && len(l.Text) == 0)
	for sent < l.Len() {
		reply := 0
		if sent == 0 {
			reply = replyID(m.ReplyTo, m.Target.Chat)
		}
		// The buttons go under the last part.
		var markup models.ReplyMarkup
		if sent == l.Len()-1 {
			markup = keyboard(m.Buttons)
		}
		var id string
		var res adapters.SendResult
		if f, caption, ok := l.File(sent); ok {
			id, res = a.sendFile(ctx, filePost{chat: chat, thread: thread, reply: reply, file: f, caption: caption, markup: markup})
		} else if sent == 0 && over != "" && !unstreamed {
			id, res = a.editPart(ctx, chat, over, l.Text[0], markup)
			if res.Outcome == adapters.Permanent {
				a.log.Warn("Telegram refused to edit the reply in progress; sending the reply anew", "chat", chat, "reason", res.Reason)
				unstreamed = true
				continue
			}
		} else {
			id, res = a.sendPart(ctx, chat, thread, reply, l.Text[sent], markup)
		}
		if res.Outcome != adapters.Accepted {
			if l.Len() > 1 {
				res.Reason = fmt.Sprintf("part %d of %d: %s", sent+1, l.Len(), res.Reason)
			}
			return res
		}
		if sent == 0 {
			firstID = id
		}
		sent++
		if sent < l.Len() {
			if err := adapters.KeepParts(ctx, outbox.Parts{Done: sent, First: firstID, Unstreamed: unstreamed}); err != nil {
				return adapters.PartsNotKept("telegram", err)
			}
		}
	}
	if unstreamed && over != "" {
		if err := a.ClearStatus(ctx, m.Target, over); err != nil {
			a.log.Warn("deleting the reply in progress failed; it stays above the reply", "chat", chat, "err", err)
		}
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: firstID}
}

// sendPart sends one rendered part and returns Telegram's id for it.
func (a *Adapter) sendPart(ctx context.Context, chat any, thread, reply int, part string, markup models.ReplyMarkup) (string, adapters.SendResult) {
	params := &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: part, ParseMode: models.ParseModeHTML, ReplyMarkup: markup}
	if reply != 0 {
		// Without a reply when the message replied to is gone: the answer
		// matters more than the thread line.
		params.ReplyParameters = &models.ReplyParameters{MessageID: reply, AllowSendingWithoutReply: true}
	}
	msg, err := a.bot.SendMessage(ctx, params)
	if err != nil && badRequest(err, "can't parse entities") {
		a.log.Warn("Telegram refused a part's formatting; resending it as plain text", "chat", chat, "err", a.redact(err))
		params.Text, params.ParseMode = plainText(part), ""
		msg, err = a.bot.SendMessage(ctx, params)
	}
	if err != nil {
		return "", a.classify(err)
	}
	return strconv.Itoa(msg.ID), adapters.SendResult{Outcome: adapters.Accepted}
}

// editPart edits message id of chat to one rendered part with markup
// under it (none when nil), as sendPart sends one: a part Telegram
// refuses to parse goes as plain text, and an edit to the text the
// message already has is done.
func (a *Adapter) editPart(ctx context.Context, chat any, id, part string, markup models.ReplyMarkup) (string, adapters.SendResult) {
	mid, err := strconv.Atoi(id)
	if err != nil {
		return "", adapters.SendResult{Outcome: adapters.Permanent, Reason: fmt.Sprintf("telegram: %q is not a message id", id)}
	}
	params := &bot.EditMessageTextParams{ChatID: chat, MessageID: mid, Text: part, ParseMode: models.ParseModeHTML, ReplyMarkup: markup}
	_, err = a.bot.EditMessageText(ctx, params)
	if err != nil && badRequest(err, "can't parse entities") {
		params.Text, params.ParseMode = plainText(part), ""
		_, err = a.bot.EditMessageText(ctx, params)
	}
	if err != nil && !badRequest(err, "message is not modified") {
		return "", a.classify(err)
	}
	return id, adapters.SendResult{Outcome: adapters.Accepted}
}

// keyboard is the inline keyboard of buttons, one row each so that no
// label is cut short, in order; nil for none.
func keyboard(buttons []outbox.Button) models.ReplyMarkup {
	if len(buttons) == 0 {
		return nil
	}
	rows := make([][]models.InlineKeyboardButton, len(buttons))
	for i, b := range buttons {
		rows[i] = []models.InlineKeyboardButton{{Text: b.Text, CallbackData: b.Data}}
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: rows}
}

// noKeyboard is an empty inline keyboard: an edit that carries it
// removes the message's buttons.
var noKeyboard = &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}}

// replace edits message m.Edits into m's text, without buttons. A text
// that does not fit one message, or a message Telegram refuses to edit
// (deleted, too old, not the bot's), goes as a new message instead.
func (a *Adapter) replace(ctx context.Context, m outbox.Message, chat any) adapters.SendResult {
	l := layOut(m)
	if len(l.Text) == 1 && len(l.Files) == 0 {
		id, res := a.editPart(ctx, chat, m.Edits, l.Text[0], noKeyboard)
		if res.Outcome != adapters.Permanent {
			res.MessageID = id
			return res
		}
		a.log.Warn("Telegram refused to edit a message; sending its new text as a new message", "chat", chat, "reason", res.Reason)
	}
	m.Edits = ""
	return a.send(ctx, m, "")
}

// classify turns a Bot API error into a send outcome: 429 waits the
// retry_after Telegram gives; 403 (blocked, kicked), 400 (chat not
// found, message too long, …) and 413 (a file too large) are final,
// with Telegram's words; the rest (5xx, an answer that is not the Bot API's, network errors, and a
// 401 or 404 that says the token is wrong) may pass, and are retried.
func (a *Adapter) classify(err error) adapters.SendResult {
	var tooMany *bot.TooManyRequestsError
	var migrated *bot.MigrateError
	switch {
	case errors.As(err, &tooMany):
		return adapters.SendResult{Outcome: adapters.RateLimited, RetryAfter: time.Duration(tooMany.RetryAfter) * time.Second,
			Reason: "telegram: " + strings.TrimPrefix(tooMany.Message, bot.ErrorTooManyRequests.Error()+", ")}
	case errors.As(err, &migrated):
		return adapters.SendResult{Outcome: adapters.Permanent,
			Reason: fmt.Sprintf("telegram: the group is now the supergroup %d; send to that chat", migrated.MigrateToChatID)}
	case errors.Is(err, bot.ErrorForbidden):
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: description(err, bot.ErrorForbidden)}
	case errors.Is(err, bot.ErrorBadRequest):
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: description(err, bot.ErrorBadRequest)}
	case entityTooLarge(err):
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "telegram: " + a.redact(err).Error()}
	}
	return adapters.SendResult{Outcome: adapters.Transient, Reason: "telegram: " + a.redact(err).Error()}
}

// description is Telegram's own words in an SDK error "<kind>, <words>",
// as a send's reason.
func description(err, kind error) string {
	return "telegram: " + words(err, kind)
}

// words is Telegram's own words in an SDK error "<kind>, <words>".
func words(err, kind error) string {
	return strings.TrimPrefix(err.Error(), kind.Error()+", ")
}

// chatAndThread reads an outbox target: the chat as sendMessage's
// chat_id (a number, or a channel's @name) and the topic's thread id.
func chatAndThread(t outbox.Target) (chat any, thread int, err error) {
	switch {
	case strings.HasPrefix(t.Chat, "@") && len(t.Chat) > 1:
		chat = t.Chat
	default:
		id, perr := strconv.ParseInt(t.Chat, 10, 64)
		if perr != nil {
			return nil, 0, fmt.Errorf("telegram: %q is not a chat id", t.Chat)
		}
		chat = id
	}
	if t.Thread != "" {
		thread, err = strconv.Atoi(t.Thread)
		if err != nil || thread <= 0 {
			return nil, 0, fmt.Errorf("telegram: %q is not a topic id", t.Thread)
		}
	}
	return chat, thread, nil
}

// replyID reads the message id out of an inbound's MessageID
// ("<chat>:<message_id>"), or a bare message id. A message of another
// chat than the one sent to cannot be replied to: 0.
func replyID(replyTo, chat string) int {
	if replyTo == "" {
		return 0
	}
	id := replyTo
	if i := strings.LastIndexByte(replyTo, ':'); i >= 0 {
		if replyTo[:i] != chat {
			return 0
		}
		id = replyTo[i+1:]
	}
	n, err := strconv.Atoi(id)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
