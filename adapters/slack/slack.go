// Package slack is herald's Slack adapter, built on slack-go/slack. It
// receives through Socket Mode when an app token is configured, else
// through the Events API and slash commands posted to herald's HTTP server
// (each request verified with the signing secret), and it sends with
// chat.postMessage.
//
// herald answers DMs and app mentions. A mention in a channel starts (or
// continues) a thread, and the thread is the conversation:
// "slack:<team>:<channel>:<thread_ts>", where a top-level message's
// thread_ts is its own ts. A DM is one conversation,
// "slack:<team>:<dm channel>", answered in the DM (in a thread only when
// the user wrote in one). Slash commands reach the shared command handler
// as the text "/name args" and are answered in their channel.
//
// The dedupe key of a message is its channel and ts, so Slack's retries
// and the app_mention and message events of one post make one turn.
package slack

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Platform is this adapter's name in conversation keys and outbox targets.
const Platform = "slack"

// Options configure the adapter.
type Options struct {
	Config config.Slack
	// Access is who is served; nil reads Config.AllowedUsers with
	// allow-all off.
	Access *adapters.Access
	// GroupSessions is the session scope in channels (adapters.Scope*);
	// empty means adapters.ScopeAuto. Every channel conversation is a
	// thread, so auto shares it.
	GroupSessions string
	// Commands are the chat commands, listed at start so the operator can
	// add them as slash commands to the Slack app (Slack has no API to
	// register them). Any command Slack posts is routed, listed or not.
	Commands []adapters.CommandInfo
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// HTTPClient makes the Web API calls; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Clock is the adapter's time; nil means the wall clock.
	Clock clock.Clock
}

// Adapter is one Slack app connection. It implements adapters.Adapter,
// Presence, Exclusive and Mounter.
type Adapter struct {
	opts   Options
	log    *slog.Logger
	api    *slackapi.Client
	socket bool                     // Socket Mode (an app token is set), else the Events API
	self   atomic.Pointer[identity] // the bot, once auth.test answered
	// commandDeadline bounds a slash command's delivery (commandDeadline
	// the constant; tests shorten it).
	commandDeadline time.Duration
}

// identity is the bot's own ids, to tell its messages from the users'.
type identity struct {
	UserID string // the bot user, as mentions name it
	BotID  string
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Presence  = (*Adapter)(nil)
	_ adapters.Exclusive = (*Adapter)(nil)
	_ adapters.Mounter   = (*Adapter)(nil)
)

// New checks the configuration and builds the adapter; nothing is
// contacted until Run or Send. Errors: Invalid (no bot token; neither an
// app token nor a signing secret; an unknown group session scope).
func New(opts Options) (*Adapter, error) {
	const op = "slack.New"
	c := opts.Config
	switch {
	case c.BotToken == "":
		return nil, errs.E(op, errs.Invalid, "platforms.slack.bot_token is required")
	case c.AppToken == "" && c.SigningSecret == "":
		return nil, errs.E(op, errs.Invalid, "platforms.slack needs an app_token (Socket Mode) or a signing_secret (Events API)")
	}
	common, err := adapters.Common{Access: opts.Access, Scope: opts.GroupSessions, Log: opts.Logger, Clock: opts.Clock}.
		Complete(Platform, c.AllowedUsers)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	opts.Access, opts.GroupSessions, opts.Clock = common.Access, common.Scope, common.Clock
	lg := common.Log
	apiOpts := []slackapi.Option{
		// The SDK logs only in debug mode, which herald leaves off; this
		// keeps anything it does log in herald's log.
		slackapi.OptionLog(log.New(slogWriter{lg}, "", 0)),
	}
	if c.APIURL != "" {
		// The SDK appends the method name to the URL as it is.
		apiOpts = append(apiOpts, slackapi.OptionAPIURL(strings.TrimRight(c.APIURL, "/")+"/"))
	}
	if opts.HTTPClient != nil {
		apiOpts = append(apiOpts, slackapi.OptionHTTPClient(opts.HTTPClient))
	}
	if c.AppToken != "" {
		apiOpts = append(apiOpts, slackapi.OptionAppLevelToken(c.AppToken))
	}
	a := &Adapter{
		opts:   opts,
		log:    lg,
		api:    slackapi.New(c.BotToken, apiOpts...),
		socket: c.AppToken != "",

		commandDeadline: commandDeadline,
	}
	return a, nil
}

// Platform is "slack".
func (a *Adapter) Platform() string { return Platform }

// Exclusive is empty: the Events API is served by every instance behind
// the load balancer, and in Socket Mode Slack spreads events over all of
// an app's open connections (up to ten), each event to one of them, so
// every instance may hold one.
func (a *Adapter) Exclusive() string { return "" }

// Run learns the bot's identity, then receives events until ctx ends: in
// Socket Mode over the websocket, else it only waits, since the Events API
// arrives through Mount. It returns nil when ctx ends, and an Invalid error
// when Slack rejects the tokens.
func (a *Adapter) Run(ctx context.Context, inbox adapters.Inbox) error {
	a.opts.Access.LogStart(a.log)
	if len(a.opts.Commands) > 0 {
		names := make([]string, len(a.opts.Commands))
		for i, c := range a.opts.Commands {
			names[i] = "/" + c.Name
		}
		a.log.Info("slash commands are added in the Slack app's settings; herald routes any it receives", "commands", strings.Join(names, " "))
	}
	if err := a.identify(ctx); err != nil {
		return err
	}
	if !a.socket {
		a.log.Info("receiving through the Events API at /slack/events and /slack/commands")
		<-ctx.Done()
		return nil
	}
	return a.runSocket(ctx, inbox)
}

// identify asks auth.test for the bot's ids, retrying with backoff until
// Slack answers. Errors: Invalid when Slack rejects the bot token.
func (a *Adapter) identify(ctx context.Context) error {
	for fails := 1; ; fails++ {
		res, err := a.api.AuthTestContext(ctx)
		if err == nil {
			a.self.Store(&identity{UserID: res.UserID, BotID: res.BotID})
			a.log.Info("connected to Slack", "team_id", res.TeamID, "bot_user", res.UserID)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if authRejected(err) {
			return errs.E("slack.Run", errs.Invalid, "Slack rejected the bot token: %v", err)
		}
		wait := retry.Wait(fails)
		a.log.Warn("auth.test failed; retrying", "err", err, "wait_ms", wait.Milliseconds())
		if !clock.Sleep(ctx, wait) {
			return nil
		}
	}
}

// authRejected reports whether err is Slack refusing a token, which no
// retry mends.
func authRejected(err error) bool {
	var se slackapi.SlackErrorResponse
	return errors.As(err, &se) && tokenRefused(se.Err)
}

// tokenRefused reports whether a Slack error string says the token is
// bad: fixed in the config, never by a retry of the same call.
func tokenRefused(code string) bool {
	switch code {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return true
	}
	return false
}

// retry spaces the attempts to reach Slack: 1 s doubling to a minute.
var retry = adapters.Backoff{Min: time.Second, Max: time.Minute}

// slogWriter carries the SDK's log lines into herald's log.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug("slack sdk", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}
