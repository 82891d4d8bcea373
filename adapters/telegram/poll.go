package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-telegram/bot"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// The long poll is herald's own loop rather than the SDK's bot.Start.
// Telegram confirms every update below the offset of the next getUpdates,
// and the SDK advances that offset as soon as it reads a batch, before
// its handlers run: an update in its buffer when the process dies is
// confirmed and lost. Here the offset moves past an update only after
// the inbox took it (Deliver returned nil) or it was found not to be for
// herald. The SDK has no public getUpdates, so this file makes that one
// call itself; every other method goes through the SDK.

// allowedUpdates are the update kinds herald asks for: new messages and
// presses of its buttons. Edits would make second turns of a message
// already answered.
var allowedUpdates = []string{"message", "callback_query"}

// apiError is a Bot API error answer.
type apiError struct {
	Status      int
	Description string
	RetryAfter  time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("telegram answered %d: %s", e.Status, e.Description)
}

// poll long-polls until ctx ends.
func (a *Adapter) poll(ctx context.Context, inbox adapters.Inbox) error {
	// getUpdates answers 409 while a webhook is set (mode was webhook
	// before); dropping it keeps the updates waiting behind it.
	if _, err := a.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil && ctx.Err() == nil {
		a.log.Warn("deleteWebhook failed; getUpdates fails while a webhook is set", "err", a.redact(err))
	}
	a.log.Info("telegram long polling started")
	var offset int64
	for fails := 0; ; {
		raws, err := a.getUpdates(ctx, offset)
		what := "getUpdates failed; retrying"
		if err == nil {
			offset, err = a.receive(ctx, inbox, raws, offset)
			what = "an update was not delivered; it is received again"
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			if fails > 0 {
				a.log.Info("receiving updates again", "after_failures", fails)
			}
			fails = 0
			continue
		}
		fails++
		wait := a.retry.Wait(fails)
		var ae *apiError
		if errors.As(err, &ae) && ae.RetryAfter > 0 {
			wait = ae.RetryAfter
		}
		log := a.log.With("err", a.redact(err), "failures", fails, "retry_in_ms", wait.Milliseconds())
		switch {
		case ae != nil && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusNotFound):
			log.Error("Telegram refuses the bot token; check platforms.telegram.token")
		case ae != nil && ae.Status == http.StatusConflict:
			log.Warn("getUpdates conflicts with another poller or a webhook of this bot; retrying")
		default:
			log.Warn(what)
		}
		if !clock.Sleep(ctx, wait) {
			return nil
		}
	}
}

// receive hands a batch to the inbox in order and returns the offset
// that confirms what was handled. It stops at the first update the inbox
// failed to take, which the next getUpdates serves again.
//
// An update without a readable update_id cannot be confirmed by itself;
// the next readable one's offset confirms it. When none follows, the
// batch counts as failed, so the poll backs off instead of fetching the
// same update again at once.
func (a *Adapter) receive(ctx context.Context, inbox adapters.Inbox, raws []json.RawMessage, offset int64) (int64, error) {
	unconfirmable := false
	for _, raw := range raws {
		id, err := a.handle(ctx, inbox, raw)
		switch {
		case err != nil:
			return offset, err
		case id == 0:
			unconfirmable = true
		case id >= offset:
			offset, unconfirmable = id+1, false
		}
	}
	if unconfirmable {
		return offset, errs.E("telegram.receive", errs.Invalid, "the batch ends in an update without a readable update_id")
	}
	return offset, nil
}

// getUpdates asks for the updates from offset on, waiting up to the poll
// timeout for one to come. It confirms every update below offset.
func (a *Adapter) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	const op = "telegram.getUpdates"
	// Only the owner of the bot's poll calls getUpdates: a process that
	// stalled past its lease while another took it makes no second poll.
	if err := adapters.CheckOwner(ctx); err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	body, err := json.Marshal(map[string]any{
		"offset":          offset,
		"timeout":         int(a.pollTimeout / time.Second),
		"allowed_updates": allowedUpdates,
	})
	if err != nil {
		return nil, errs.Wrap(op, errs.Internal, err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.pollTimeout+15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.apiURL+"/bot"+a.cfg.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, errs.E(op, errs.Invalid, "bad api_url")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, a.redact(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, a.redact(err))
	}
	var ans struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		// A proxy's error page rather than the Bot API's answer.
		return nil, errs.Wrap(op, errs.Unavailable, &apiError{Status: resp.StatusCode, Description: http.StatusText(resp.StatusCode)})
	}
	if !ans.OK {
		code := ans.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		return nil, errs.Wrap(op, errs.Unavailable, &apiError{Status: code, Description: ans.Description,
			RetryAfter: time.Duration(ans.Parameters.RetryAfter) * time.Second})
	}
	return ans.Result, nil
}

// redact keeps the bot token out of an error's text (a URL in a
// network error carries it); the error's chain stays for errors.Is.
func (a *Adapter) redact(err error) error {
	if err == nil || !strings.Contains(err.Error(), a.cfg.Token) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), a.cfg.Token, "<token>"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// handle reads one update and delivers it when it is for herald. It
// returns the update's id (0 for one it cannot read) and an error only
// when the update must be received again: the bot's identity is not
// known yet, or the inbox failed in a way a retry may mend.
func (a *Adapter) handle(ctx context.Context, inbox adapters.Inbox, raw []byte) (int64, error) {
	const op = "telegram.handle"
	me, err := a.whoAmI(ctx)
	if err != nil {
		return 0, err
	}
	p, err := parseUpdate(raw, reader{bot: me, trigger: a.cfg.GroupTrigger, scope: a.scope})
	if err != nil {
		a.log.Warn("unreadable update skipped", "err", err)
		return 0, nil
	}
	log := a.log.With("update_id", p.UpdateID)
	if p.Skip != "" {
		log.Debug("update not for herald", "why", p.Skip)
		return p.UpdateID, nil
	}
	if !a.access.Allows(p.In.Sender, p.UserName) {
		a.access.LogRefused(a.log, p.In.Sender, p.UserName)
		return p.UpdateID, nil
	}
	switch err := inbox.Deliver(ctx, p.In); {
	case err == nil:
		a.answerPress(ctx, p.Callback, pressTaken)
		return p.UpdateID, nil
	case adapters.Refused(err):
		log.Error("the router refused a message; it is dropped", "conv", p.In.Conv, "err", err)
		a.answerPress(ctx, p.Callback, "")
		return p.UpdateID, nil
	default:
		return p.UpdateID, errs.Wrap(op, errs.Unavailable, err)
	}
}

// pressTaken is what the person who pressed a button sees once herald
// took the press.
const pressTaken = "Got it"

// answerPress answers the callback query id (none for "") with text, a
// notice at the top of the chat, which ends the button's spinner. It is
// called once the press was delivered: a failed answer is logged, and
// the press stands.
func (a *Adapter) answerPress(ctx context.Context, id, text string) {
	if id == "" {
		return
	}
	if _, err := a.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: text}); err != nil {
		a.log.Warn("answering a button press failed; its spinner runs until Telegram gives up", "err", a.redact(err))
	}
}
