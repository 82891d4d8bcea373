package slackfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// SigningSecret is a signing secret for tests.
const SigningSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// Sign sets the headers Slack signs a request with: the timestamp at and
// the v0 HMAC-SHA256 of "v0:<timestamp>:<body>" under secret.
func Sign(h http.Header, secret string, at time.Time, body []byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
}

// SignedRequest is a POST of body to target, signed as Slack signs it at
// at with secret. contentType is "application/json" for the Events API,
// "application/x-www-form-urlencoded" for slash commands.
func SignedRequest(target, secret string, at time.Time, contentType string, body []byte) *http.Request {
	r, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		panic(err) // a test's own malformed URL
	}
	r.Header.Set("Content-Type", contentType)
	Sign(r.Header, secret, at, body)
	return r
}

// EventCallback is an Events API event_callback payload of team around
// the inner event, as Slack posts it to the events URL (and as Socket
// Mode carries it in an events_api envelope).
func EventCallback(team, eventID string, event map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "legacy-verification-token", "team_id": team, "api_app_id": "A0HERALD",
		"type": "event_callback", "event_id": eventID, "event_time": 1700000000,
		"event": event,
	})
	return b
}

// URLVerification is the payload Slack posts when the events URL is set.
func URLVerification(challenge string) []byte {
	b, _ := json.Marshal(map[string]any{"token": "legacy-verification-token", "type": "url_verification", "challenge": challenge})
	return b
}

// SlashCommand is the form Slack posts for a slash command.
type SlashCommand struct {
	Team, Channel, ChannelName, User, UserName, Command, Text, TriggerID string
}

// Form is the command as a form body.
func (c SlashCommand) Form() url.Values {
	return url.Values{
		"token": {"legacy-verification-token"}, "team_id": {c.Team}, "team_domain": {"herald-test"},
		"channel_id": {c.Channel}, "channel_name": {c.ChannelName}, "user_id": {c.User},
		"user_name": {c.UserName}, "command": {c.Command}, "text": {c.Text},
		"response_url": {"https://hooks.slack.invalid/commands/1"}, "trigger_id": {c.TriggerID},
		"api_app_id": {"A0HERALD"},
	}
}

// JSON is the command as Socket Mode carries it in a slash_commands
// envelope.
func (c SlashCommand) JSON() []byte {
	m := map[string]string{}
	for k, v := range c.Form() {
		m[k] = v[0]
	}
	b, _ := json.Marshal(m)
	return b
}
