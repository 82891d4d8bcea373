package telegram

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/outbox"
)

// Telegram's limits on what a bot uploads: a photo up to 10 MB, any
// other file up to 50 MB.
const (
	photoLimit  = 10_000_000
	uploadLimit = 50_000_000
)

// filePost is one sendPhoto or sendDocument.
type filePost struct {
	chat          any
	thread, reply int
	file          outbox.File
	caption       string
	mode          models.ParseMode
	photo         bool
	markup        models.ReplyMarkup // buttons under the file, or nil
}

// sendFile sends p's file as a photo when it is one (outbox.File.Photo)
// and within Telegram's photo limit, else as a document, with its
// caption, the rendered text, replying to its reply. A caption Telegram refuses to parse
// goes again as plain text, and a photo it refuses to process as a photo
// (its dimensions) goes again as a document.
func (a *Adapter) sendFile(ctx context.Context, p filePost) (string, adapters.SendResult) {
	f, chat := p.file, p.chat
	if len(f.Data) > uploadLimit {
		return "", adapters.SendResult{Outcome: adapters.Permanent,
			Reason: fmt.Sprintf("telegram: %s is %s, over the 50 MB Telegram takes from a bot", f.Name, adapters.Size(int64(len(f.Data))))}
	}
	caption := p.caption
	p.photo = f.Photo && len(f.Data) <= photoLimit
	if caption != "" {
		p.mode = models.ParseModeHTML
	}
	msg, err := a.postFile(ctx, p)
	if err != nil && p.mode != "" && badRequest(err, "can't parse entities") {
		a.log.Warn("Telegram refused a caption's formatting; resending it as plain text", "chat", chat, "err", a.redact(err))
		p.caption, p.mode = plainText(caption), ""
		msg, err = a.postFile(ctx, p)
	}
	if err != nil && p.photo && photoRefused(err) {
		a.log.Warn("Telegram refused an image as a photo; sending it as a document", "chat", chat, "file", f.Name, "err", a.redact(err))
		p.photo = false
		msg, err = a.postFile(ctx, p)
	}
	if err != nil {
		return "", a.classify(err)
	}
	return strconv.Itoa(msg.ID), adapters.SendResult{Outcome: adapters.Accepted}
}

// postFile makes one upload, the file's bytes in a multipart body.
func (a *Adapter) postFile(ctx context.Context, p filePost) (*models.Message, error) {
	upload := &models.InputFileUpload{Filename: p.file.Name, Data: bytes.NewReader(p.file.Data)}
	var rp *models.ReplyParameters
	if p.reply != 0 {
		rp = &models.ReplyParameters{MessageID: p.reply, AllowSendingWithoutReply: true}
	}
	if p.photo {
		return a.bot.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: p.chat, MessageThreadID: p.thread, Photo: upload,
			Caption: p.caption, ParseMode: p.mode, ReplyParameters: rp, ReplyMarkup: p.markup})
	}
	return a.bot.SendDocument(ctx, &bot.SendDocumentParams{ChatID: p.chat, MessageThreadID: p.thread, Document: upload,
		Caption: p.caption, ParseMode: p.mode, ReplyParameters: rp, ReplyMarkup: p.markup})
}

// photoRefused reports whether Telegram refused an image as a photo, for
// what it is rather than for the chat: its dimensions or its encoding.
func photoRefused(err error) bool {
	return badRequest(err, "photo_invalid_dimensions") || badRequest(err, "image_process_failed") ||
		badRequest(err, "photo_save_file_invalid")
}

// entityTooLarge reports whether Telegram answered 413: the upload is
// larger than it takes. The SDK has no error of its own for it, and
// words it "error response from telegram for method <m>, 413 <words>".
func entityTooLarge(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "error response from telegram") && strings.Contains(s, ", 413 ")
}
