// Package telegram is herald's Telegram adapter, over the Bot API through
// github.com/go-telegram/bot. It receives messages by long polling (the
// default) or by webhook, turns those meant for herald into
// sessions.Inbound, and sends outbox messages back as HTML, split under
// Telegram's 4,096-unit limit.
//
// Conversation keys are "telegram:<chat>", and "telegram:<chat>:<topic>"
// for a forum topic. A DM is always for herald; a group message only
// when it mentions the bot, replies to it or is a command, unless
// group_trigger is "all".
package telegram

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Platform is this adapter's name in conversation keys and outbox targets.
const Platform = "telegram"

// DefaultAPIURL is the public Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// Defaults for Options.
const (
	// DefaultPollTimeout is how long one getUpdates waits for an update:
	// long enough to cost little, short enough that a dead connection is
	// noticed.
	DefaultPollTimeout = 30 * time.Second
	DefaultBackoffMin  = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// Options configure an Adapter.
type Options struct {
	Config config.Telegram
	// Access is who is served; nil means Config.AllowedUsers alone.
	Access *adapters.Access
	// GroupSessions is the group session scope (adapters.Scope*); empty
	// means auto.
	GroupSessions string
	// Commands are registered as the bot's command menu at Run start.
	Commands []adapters.CommandInfo
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// HTTPClient makes every Bot API call; nil means a client whose
	// timeout outlasts a long poll.
	HTTPClient *http.Client
	// Clock ages the progress kept for replies sent in parts; default
	// the wall clock.
	Clock clock.Clock
	// PollTimeout is getUpdates' timeout; default DefaultPollTimeout.
	PollTimeout time.Duration
	// BackoffMin and BackoffMax bound the waits after failed Bot API
	// calls while receiving: BackoffMin after the first, doubling up to
	// BackoffMax. 0 means the defaults.
	BackoffMin, BackoffMax time.Duration
}

// Adapter is one Telegram bot.
type Adapter struct {
	cfg         config.Telegram
	access      *adapters.Access
	scope       string
	commands    []adapters.CommandInfo
	log         *slog.Logger // with the platform
	client      *http.Client
	apiURL      string
	bot         *bot.Bot
	pollTimeout time.Duration
	retry       adapters.Backoff // after failed Bot API calls while receiving
	hookPath    string           // the webhook route, in webhook mode

	self atomic.Pointer[identity] // from getMe; nil until it answered

}

// identity is the bot as getMe describes it: what mentions and replies
// to the bot are recognised by.
type identity struct {
	ID       int64
	Username string
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Presence  = (*Adapter)(nil)
	_ adapters.Exclusive = (*Adapter)(nil)
	_ adapters.Mounter   = (*Adapter)(nil)
)

// New checks opts and builds the adapter; it makes no network call.
// Errors: Invalid for a bad config.
func New(opts Options) (*Adapter, error) {
	const op = "telegram.New"
	cfg := opts.Config
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errs.E(op, errs.Invalid, "platforms.telegram.token is empty")
	}
	if cfg.Mode == "" {
		cfg.Mode = config.TelegramPolling
	}
	if cfg.GroupTrigger == "" {
		cfg.GroupTrigger = config.TriggerMention
	}
	if cfg.GroupTrigger != config.TriggerMention && cfg.GroupTrigger != config.TriggerAll {
		return nil, errs.E(op, errs.Invalid, "unknown platforms.telegram.group_trigger %q (mention or all)", cfg.GroupTrigger)
	}
	common, err := adapters.Common{Access: opts.Access, Scope: opts.GroupSessions, Log: opts.Logger, Clock: opts.Clock}.
		Complete(Platform, cfg.AllowedUsers)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	a := &Adapter{
		cfg:         cfg,
		access:      common.Access,
		scope:       common.Scope,
		commands:    opts.Commands,
		log:         common.Log,
		client:      opts.HTTPClient,
		apiURL:      strings.TrimRight(cfg.APIURL, "/"),
		pollTimeout: orDefault(opts.PollTimeout, DefaultPollTimeout),
		retry:       adapters.Backoff{Min: orDefault(opts.BackoffMin, DefaultBackoffMin), Max: orDefault(opts.BackoffMax, DefaultBackoffMax)},
	}
	// getUpdates takes whole seconds, and 0 would not wait at all.
	a.pollTimeout = max(a.pollTimeout, time.Second)
	if a.client == nil {
		// One timeout for every call, longer than a long poll's wait.
		a.client = &http.Client{Timeout: a.pollTimeout + 30*time.Second}
	}
	if a.apiURL == "" {
		a.apiURL = DefaultAPIURL
	}
	if u, err := url.Parse(a.apiURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.E(op, errs.Invalid, "platforms.telegram.api_url is not an http(s) URL")
	}
	switch cfg.Mode {
	case config.TelegramPolling:
	case config.TelegramWebhook:
		path, err := webhookPath(cfg)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		a.hookPath = path
	default:
		return nil, errs.E(op, errs.Invalid, "unknown platforms.telegram.mode %q (polling or webhook)", cfg.Mode)
	}
	b, err := bot.New(cfg.Token,
		bot.WithServerURL(a.apiURL),
		bot.WithHTTPClient(a.pollTimeout, a.client),
		// getMe is Run's business, retried there: New makes no call.
		bot.WithSkipGetMe(),
		bot.WithErrorsHandler(func(err error) { a.log.Warn("telegram client error", "err", err) }),
	)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	a.bot = b
	return a, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Platform is "telegram".
func (a *Adapter) Platform() string { return Platform }

// Exclusive names the lease for a long poll: Telegram serves getUpdates
// to one caller per bot, so only one process may poll. It names the bot
// by its id (the token's first part), or by a hash of the token, never
// by the token. A webhook runs on every process: "".
func (a *Adapter) Exclusive() string {
	if a.cfg.Mode == config.TelegramWebhook {
		return ""
	}
	return "telegram:polling:" + botKey(a.cfg.Token)
}

func botKey(token string) string {
	id, _, _ := strings.Cut(token, ":")
	if _, err := strconv.ParseUint(id, 10, 64); err == nil {
		return id
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:8])
}

// Run receives updates until ctx ends: first it learns who the bot is
// (getMe, retried until it answers) and registers the command menu; then
// it long-polls, or in webhook mode registers the webhook and waits while
// Mount's handler receives. It returns nil when ctx ends.
func (a *Adapter) Run(ctx context.Context, inbox adapters.Inbox) error {
	a.access.LogStart(a.log)
	if _, ok := a.identify(ctx); !ok {
		return nil
	}
	a.registerCommands(ctx)
	if a.cfg.Mode == config.TelegramWebhook {
		a.setWebhook(ctx)
		<-ctx.Done()
		return nil
	}
	return a.poll(ctx, inbox)
}

// identify asks getMe until it answers; ok is false when ctx ended first.
func (a *Adapter) identify(ctx context.Context) (identity, bool) {
	for fails := 0; ; fails++ {
		me, err := a.whoAmI(ctx)
		if err == nil {
			return me, true
		}
		if ctx.Err() != nil {
			return identity{}, false
		}
		wait := a.retry.Wait(fails + 1)
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			a.log.Error("Telegram refuses the bot token; check platforms.telegram.token", "err", a.redact(err), "retry_in_ms", wait.Milliseconds())
		} else {
			a.log.Warn("getMe failed; retrying", "err", a.redact(err), "retry_in_ms", wait.Milliseconds())
		}
		if !clock.Sleep(ctx, wait) {
			return identity{}, false
		}
	}
}

// whoAmI returns the bot's identity, asking getMe once if it is not
// known yet.
func (a *Adapter) whoAmI(ctx context.Context) (identity, error) {
	if me := a.self.Load(); me != nil {
		return *me, nil
	}
	u, err := a.bot.GetMe(ctx)
	if err != nil {
		return identity{}, errs.Wrap("telegram.getMe", errs.Unavailable, err)
	}
	me := identity{ID: u.ID, Username: u.Username}
	a.self.Store(&me)
	a.log.Info("telegram bot identified", "bot_id", me.ID, "username", me.Username)
	return me, nil
}
