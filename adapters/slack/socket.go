package slack

import (
	"context"
	"errors"
	"log"
	"net/http"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// runSocket receives over Socket Mode until ctx ends. The SDK reconnects
// by itself (on Slack's disconnect requests, dead connections and failed
// dials, with backoff); when its Run still gives up, this restarts it with
// a backoff of its own, unless Slack rejected the app token.
func (a *Adapter) runSocket(ctx context.Context, inbox adapters.Inbox) error {
	sm := socketmode.New(a.api, socketmode.OptionLog(log.New(slogWriter{a.log}, "", 0)))
	for fails := 1; ; fails++ {
		done := make(chan error, 1)
		go func() { done <- sm.RunContext(ctx) }()
		err := a.serveSocket(ctx, sm, inbox, done)
		if ctx.Err() != nil {
			return nil
		}
		if appTokenRejected(err) {
			return errs.E("slack.Run", errs.Invalid, "Slack rejected the app token: %v", err)
		}
		wait := retry.Wait(fails)
		a.log.Warn("Socket Mode stopped; reconnecting", "err", err, "wait_ms", wait.Milliseconds())
		if !clock.Sleep(ctx, wait) {
			return nil
		}
	}
}

// appTokenRejected reports whether Socket Mode gave up because Slack
// refused the app token (the SDK's 404 from apps.connections.open means
// the same).
func appTokenRejected(err error) bool {
	if authRejected(err) {
		return true
	}
	var sc slackapi.StatusCodeError
	return errors.As(err, &sc) && sc.Code == http.StatusNotFound
}

// serveSocket handles sm's events until its run (done) ends, and returns
// what it ended with. When ctx ends it waits for the run to stop.
func (a *Adapter) serveSocket(ctx context.Context, sm *socketmode.Client, inbox adapters.Inbox, done <-chan error) error {
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return <-done
		case ev := <-sm.Events:
			a.handleSocketEvent(ctx, sm, inbox, ev)
		}
	}
}

// handleSocketEvent acts on one Socket Mode event. Events are handled one
// at a time, so a conversation's messages reach the router in the order
// Slack sent them.
func (a *Adapter) handleSocketEvent(ctx context.Context, sm *socketmode.Client, inbox adapters.Inbox, ev socketmode.Event) {
	switch ev.Type {
	case socketmode.EventTypeConnected:
		a.log.Info("connected through Socket Mode")
	case socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError,
		socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
		a.log.Warn("Socket Mode trouble; the SDK retries", "event", ev.Type, "detail", ev.Data)
	case socketmode.EventTypeInvalidAuth:
		a.log.Error("Slack rejected the app token")
	case socketmode.EventTypeDisconnect:
		a.log.Info("Slack asked to reconnect")
	case socketmode.EventTypeEventsAPI:
		if ev.Request == nil {
			return
		}
		a.handleEnvelope(ctx, sm, inbox, ev.Request)
	case socketmode.EventTypeSlashCommand:
		c, ok := ev.Data.(slackapi.SlashCommand)
		if !ok || ev.Request == nil {
			return
		}
		var payload any
		if msg := a.takeCommand(ctx, inbox, c); msg != "" {
			payload = ephemeral(msg)
		}
		a.ack(ctx, sm, ev.Request.EnvelopeID, payload)
	case socketmode.EventTypeInteractive:
		if ev.Request == nil {
			return
		}
		// A press is acked once delivered; any other interaction (herald
		// offers no views) at once, which keeps Slack from showing the
		// user an error. A press whose delivery failed stays unacked:
		// Slack shows the failure, and the person presses again.
		if cb, ok := ev.Data.(slackapi.InteractionCallback); ok {
			if _, err := a.deliver(ctx, inbox, pressInbound(cb, a.opts.GroupSessions)); err != nil {
				return
			}
		}
		a.ack(ctx, sm, ev.Request.EnvelopeID, nil)
	}
}

// handleEnvelope delivers one events_api envelope and acks it once Deliver
// returned nil; unacked, Slack sends the event again.
func (a *Adapter) handleEnvelope(ctx context.Context, sm *socketmode.Client, inbox adapters.Inbox, req *socketmode.Request) {
	ev, err := parseEvent(req.Payload, a.bot(), a.opts.GroupSessions)
	if err != nil {
		// Slack would send the same bytes again; an ack ends it.
		a.log.Warn("unreadable events_api envelope", "envelope_id", req.EnvelopeID, "err", err)
	} else if _, err := a.deliver(ctx, inbox, ev); err != nil {
		return
	}
	a.ack(ctx, sm, req.EnvelopeID, nil)
}

func (a *Adapter) ack(ctx context.Context, sm *socketmode.Client, envelopeID string, payload any) {
	if err := sm.AckCtx(ctx, envelopeID, payload); err != nil && ctx.Err() == nil {
		a.log.Warn("Socket Mode ack failed", "envelope_id", envelopeID, "err", err)
	}
}
