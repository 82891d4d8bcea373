package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/heraldgw/herald/adapters"
)

// Paths of the Events API routes on herald's HTTP server, to set as the
// app's Request URLs (and InteractivityPath).
const (
	EventsPath   = "/slack/events"
	CommandsPath = "/slack/commands"
)

// maxRequestBytes bounds a request body; Slack's events and commands are
// a few kilobytes.
const maxRequestBytes = 1 << 20

// Mount adds the Events API routes to mux. In Socket Mode it adds none:
// events come over the websocket, and Slack posts nothing to herald.
func (a *Adapter) Mount(mux *http.ServeMux, inbox adapters.Inbox) {
	if a.socket {
		return
	}
	mux.HandleFunc("POST "+EventsPath, func(w http.ResponseWriter, r *http.Request) { a.serveEvent(w, r, inbox) })
	mux.HandleFunc("POST "+CommandsPath, func(w http.ResponseWriter, r *http.Request) { a.serveCommand(w, r, inbox) })
	mux.HandleFunc("POST "+InteractivityPath, func(w http.ResponseWriter, r *http.Request) { a.serveInteraction(w, r, inbox) })
}

// serveEvent answers one Events API request: 200 once the event is
// delivered (or skipped, or refused), 500 when delivery failed in a way
// a retry may mend, so that Slack retries; the challenge for
// url_verification.
func (a *Adapter) serveEvent(w http.ResponseWriter, r *http.Request, inbox adapters.Inbox) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	ev, err := parseEvent(body, a.bot(), a.opts.GroupSessions)
	switch {
	case err != nil:
		http.Error(w, "unreadable event", http.StatusBadRequest)
		return
	case ev.Challenge != "":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(slackevents.ChallengeResponse{Challenge: ev.Challenge})
		return
	}
	if retry := r.Header.Get("X-Slack-Retry-Num"); retry != "" {
		// A retry carries the same channel and ts, so the router's
		// dedupe makes it no second turn.
		a.log.Debug("Slack retried an event", "retry", retry, "reason", r.Header.Get("X-Slack-Retry-Reason"), "message_id", ev.In.MessageID)
	}
	if _, err := a.deliver(r.Context(), inbox, ev); err != nil {
		http.Error(w, "not queued", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveCommand answers one slash command: an empty 200 once it is
// delivered (the answer follows in the channel), or 200 with an ephemeral
// line saying it failed, always within Slack's 3 s.
func (a *Adapter) serveCommand(w http.ResponseWriter, r *http.Request, inbox adapters.Inbox) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c, err := slackapi.SlashCommandParse(r)
	if err != nil {
		http.Error(w, "unreadable command", http.StatusBadRequest)
		return
	}
	if msg := a.takeCommand(r.Context(), inbox, c); msg != "" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ephemeral(msg))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// ephemeral is a slash command answer only its user sees.
func ephemeral(text string) map[string]string {
	return map[string]string{"response_type": "ephemeral", "text": text}
}

// verified reads the body and checks Slack's signature over it with the
// signing secret; a missing or bad signature, or a timestamp more than 5
// minutes off, gets 401 and nothing is read further.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		status := http.StatusBadRequest
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "unreadable body", status)
		return nil, false
	}
	sv, err := slackapi.NewSecretsVerifier(r.Header, a.opts.Config.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.log.Warn("refused a request without a valid Slack signature", "path", r.URL.Path, "err", err, "remote", r.RemoteAddr)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}
