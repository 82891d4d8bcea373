package telegram

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/go-telegram/bot"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

var _ adapters.Fetcher = (*Adapter)(nil)

// Fetch downloads a file a message carried, by its file id
// (Attachment.PlatformID, as attachments put it): getFile tells the
// file's path, and the bytes come from <api_url>/file/bot<token>/<path>.
// That URL holds the bot token, so it is made here, used once and
// never kept or shown; no error names it. Telegram serves a bot files up
// to 20 MB: getFile refuses a larger one, a TooLarge error like any
// file over max.
func (a *Adapter) Fetch(ctx context.Context, att sessions.Attachment, max int64) ([]byte, error) {
	const op = "telegram.Fetch"
	name := cmp.Or(att.Name, "the file")
	if att.PlatformID == "" {
		return nil, errs.E(op, errs.Invalid, "%s has no Telegram file id", name)
	}
	if err := adapters.CheckSize(op, name, att.Size, max); err != nil {
		return nil, err
	}
	f, err := a.bot.GetFile(ctx, &bot.GetFileParams{FileID: att.PlatformID})
	if err != nil {
		return nil, a.getFileError(op, name, err)
	}
	if err := adapters.CheckSize(op, name, f.FileSize, max); err != nil {
		return nil, err
	}
	if f.FilePath == "" {
		return nil, errs.E(op, errs.NotFound, "Telegram gave no path to download %s from", name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.bot.FileDownloadLink(f), nil)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, a.redact(err))
	}
	data, err := adapters.Download{Op: op, Platform: "Telegram", Client: a.client}.Get(req, name, max)
	return data, a.redact(err)
}

// getFileError is the Fetch error of a failed getFile, in the kinds
// adapters.Fetcher names, with Telegram's words: "file is too big" is
// TooLarge; any other Bad Request is about the file id (a wrong one, or
// a file Telegram no longer has), NotFound; a refused token (401, or 404
// for the method) and a 403 are Invalid, no retry mends them; the rest
// may pass.
func (a *Adapter) getFileError(op, name string, err error) error {
	var tooMany *bot.TooManyRequestsError
	switch {
	case badRequest(err, "file is too big"):
		return errs.E(op, errs.TooLarge, "%s is over the 20 MB Telegram lets a bot download", name)
	case errors.Is(err, bot.ErrorBadRequest):
		return errs.E(op, errs.NotFound, "Telegram cannot give %s: %s", name, words(err, bot.ErrorBadRequest))
	case errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound):
		return errs.E(op, errs.Invalid, "Telegram refuses the bot token; check platforms.telegram.token")
	case errors.Is(err, bot.ErrorForbidden):
		return errs.E(op, errs.Invalid, "Telegram refuses to give %s: %s", name, words(err, bot.ErrorForbidden))
	case errors.As(err, &tooMany):
		return errs.E(op, errs.Unavailable, "Telegram asks to wait %d s before getFile", tooMany.RetryAfter)
	}
	return errs.E(op, errs.Unavailable, "getFile failed for %s: %v", name, a.redact(err))
}
