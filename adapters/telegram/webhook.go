package telegram

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/go-telegram/bot"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
)

// secretHeader carries the webhook's secret_token on Telegram's requests.
const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdateBytes bounds a webhook request body; an update is far smaller.
const maxUpdateBytes = 1 << 20

// webhookPath is the route herald serves the webhook on: the path of
// the public webhook URL, which Telegram posts to.
func webhookPath(cfg config.Telegram) (string, error) {
	if cfg.WebhookSecret == "" {
		return "", errors.New("platforms.telegram.webhook_secret must be set when mode is webhook")
	}
	u, err := url.Parse(cfg.WebhookURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("platforms.telegram.webhook_url must be an http(s) URL when mode is webhook")
	}
	if u.Path == "" || u.Path == "/" {
		return "", errors.New("platforms.telegram.webhook_url needs a path, e.g. https://bot.example/telegram/webhook")
	}
	return u.Path, nil
}

// Mount serves the webhook on mux in webhook mode, and does nothing when
// polling. A request without the configured secret gets 401 and delivers
// nothing. An update is answered 200 only once the inbox took it (or it
// is not for herald); any other answer makes Telegram send it again.
func (a *Adapter) Mount(mux *http.ServeMux, inbox adapters.Inbox) {
	if a.cfg.Mode != config.TelegramWebhook {
		return
	}
	mux.HandleFunc("POST "+a.hookPath, func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(secretHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.WebhookSecret)) != 1 {
			a.log.Warn("webhook request without the right secret refused", "remote", r.RemoteAddr)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpdateBytes))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if _, err := a.handle(r.Context(), inbox, body); err != nil {
			a.log.Warn("an update was not delivered; Telegram sends it again", "err", err)
			http.Error(w, "not delivered", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// setWebhook registers the webhook with its secret, retrying until
// Telegram takes it or ctx ends: without it no update arrives.
func (a *Adapter) setWebhook(ctx context.Context) {
	params := &bot.SetWebhookParams{URL: a.cfg.WebhookURL, SecretToken: a.cfg.WebhookSecret, AllowedUpdates: allowedUpdates}
	for fails := 1; ; fails++ {
		_, err := a.bot.SetWebhook(ctx, params)
		if err == nil {
			a.log.Info("telegram webhook set", "path", a.hookPath)
			return
		}
		if ctx.Err() != nil {
			return
		}
		wait := a.retry.Wait(fails)
		a.log.Warn("setWebhook failed; retrying", "err", a.redact(err), "retry_in_ms", wait.Milliseconds())
		if !clock.Sleep(ctx, wait) {
			return
		}
	}
}
