// Package discord is herald's Discord adapter, built on discordgo. Run
// holds one gateway connection (guild messages, DMs, message content and
// application commands) and turns what is addressed to herald into
// sessions.Inbound; Send posts replies over REST and tells the outbox how
// Discord answered. Send needs no gateway, so any process can deliver.
//
// Conversation keys: "discord:<guild>:<channel>" for a guild channel,
// "discord:<guild>:<channel>:<thread>" for a thread (the parent channel,
// then the thread's own id), "discord:dm:<channel>" for a DM. Read as
// outbox targets they are Chat=<guild>, Thread="<channel>[:<thread>]" and
// Chat="dm", Thread=<channel>.
package discord

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Platform is the adapter's name in conversation keys and targets.
const Platform = "discord"

// Options configure an Adapter.
type Options struct {
	Config        config.Discord
	Access        *adapters.Access
	GroupSessions string // adapters.Scope*; empty means auto
	Commands      []adapters.CommandInfo
	Logger        *slog.Logger // nil: slog.Default()

	// HTTPClient carries the REST calls; nil: one with a 30 s timeout. Its
	// transport is wrapped so that requests for Discord go to
	// Config.APIURL when that is set.
	HTTPClient *http.Client
	// Clock tells when an interaction's token has lapsed; nil: the wall
	// clock.
	Clock clock.Clock
	// RetryMin and RetryMax bound the backoff between attempts to open the
	// gateway and to register the commands; zero: 1 s and 2 min.
	RetryMin, RetryMax time.Duration
	// Cursors keeps where receiving got to per channel, for the backfill
	// a new gateway session makes (Config.BackfillWindow, default
	// config.DefaultDiscordBackfillWindow); nil: no backfill.
	Cursors adapters.Cursors
}

// Adapter is the Discord connection. Create it with New.
type Adapter struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	token string // the bot token with its "Bot " prefix, as discordgo sends it
	lease string // Exclusive's name
	retry adapters.Backoff
	// deliverRetry spaces the attempts to queue a received message
	// (deliverRetry the variable; tests shorten it).
	deliverRetry adapters.Backoff
	client       *http.Client
	cursors      *cursors           // where receiving got to, per channel (backfill.go)
	rest         *discordgo.Session // REST only; Run opens a gateway session of its own
	threads      *threadCache

	mu    sync.Mutex
	botID string // the bot's user id: from the token, then from READY
	appID string // the application id: the bot id until READY says
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Presence  = (*Adapter)(nil)
	_ adapters.Exclusive = (*Adapter)(nil)
	_ adapters.Masker    = (*Adapter)(nil)
)

// New checks the configuration and prepares the adapter; it does not
// connect. Errors: Invalid.
func New(opts Options) (*Adapter, error) {
	const op = "discord.New"
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(opts.Config.Token), "Bot "))
	if token == "" {
		return nil, errs.E(op, errs.Invalid, "platforms.discord.token is empty")
	}
	if opts.Access == nil {
		return nil, errs.E(op, errs.Invalid, "no access list")
	}
	switch opts.Config.GroupTrigger {
	case "", config.TriggerMention, config.TriggerAll:
	default:
		return nil, errs.E(op, errs.Invalid, "platforms.discord.group_trigger %q is neither %q nor %q",
			opts.Config.GroupTrigger, config.TriggerMention, config.TriggerAll)
	}
	common, err := adapters.Common{Access: opts.Access, Scope: opts.GroupSessions, Log: opts.Logger, Clock: opts.Clock}.
		Complete(Platform, opts.Config.AllowedUsers)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	opts.GroupSessions, opts.Clock = common.Scope, common.Clock
	client, err := newClient(opts.HTTPClient, opts.Config.APIURL)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(2*time.Minute, opts.RetryMin)
	}
	if opts.Config.BackfillWindow <= 0 {
		opts.Config.BackfillWindow = config.DefaultDiscordBackfillWindow
	}

	a := &Adapter{
		opts: opts, log: common.Log, clock: common.Clock, retry: adapters.Backoff{Min: opts.RetryMin, Max: opts.RetryMax},
		token: "Bot " + token, client: client, threads: newThreadCache(),
		deliverRetry: deliverRetry, cursors: newCursors(),
	}
	a.botID = botIDFromToken(token)
	a.appID = a.botID
	a.lease = "discord:gateway:" + a.botID
	if a.botID == "" {
		// Not a token of the usual shape: name the lease after a digest,
		// never after the token itself.
		sum := sha256.Sum256([]byte(token))
		a.lease = "discord:gateway:token-" + hex.EncodeToString(sum[:8])
	}
	a.rest = a.session()
	return a, nil
}

// session is a discordgo session on the adapter's client. Rate limits
// are the outbox's to wait out, and a 502 is not retried inside discordgo
// (a retried create could post a message twice); Send classifies both.
func (a *Adapter) session() *discordgo.Session {
	s, _ := discordgo.New(a.token) // New never fails
	s.Client = a.client
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	return s
}

// Platform is "discord".
func (a *Adapter) Platform() string { return Platform }

// Exclusive names the lease on the gateway connection: one per bot, since
// Discord delivers a shard's events to one connection only.
func (a *Adapter) Exclusive() string { return a.lease }

// ids returns the bot's user id and the application id.
func (a *Adapter) ids() (bot, app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID, a.appID
}

func (a *Adapter) setIDs(bot, app string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if bot != "" {
		a.botID = bot
	}
	if app != "" {
		a.appID = app
	} else if a.appID == "" {
		a.appID = a.botID
	}
}

// botIDFromToken reads the bot's user id from a bot token, whose first
// part is that id in base64; "" when the token has another shape.
func botIDFromToken(token string) string {
	first, _, _ := strings.Cut(token, ".")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(first); err == nil && isSnowflake(string(b)) {
			return string(b)
		}
	}
	return ""
}

// isSnowflake reports whether s is a Discord id: 1 to 20 digits.
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// newClient is base (or a default client) with a transport that sends
// Discord's API requests to apiURL instead, when that is set.
func newClient(base *http.Client, apiURL string) (*http.Client, error) {
	c := &http.Client{Timeout: 30 * time.Second}
	if base != nil {
		cp := *base
		c = &cp
	}
	if apiURL == "" {
		return c, nil
	}
	u, err := url.Parse(strings.TrimSpace(apiURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.E("discord.newClient", errs.Invalid, "platforms.discord.api_url %q is not an http(s) URL", apiURL)
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &rewrite{base: u, next: next}
	return c, nil
}

// discordHost is the host discordgo's endpoints name. Read, never
// changed: the endpoint variables are shared by every session in the
// process, so redirecting happens per client instead.
var discordHost = func() string {
	u, err := url.Parse(discordgo.EndpointDiscord)
	if err != nil {
		return "discord.com"
	}
	return u.Host
}()

// rewrite sends requests for Discord's host to base (scheme, host and path
// prefix); the gateway URL then comes from base's /api/v9/gateway.
type rewrite struct {
	base *url.URL
	next http.RoundTripper
}

func (r *rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != discordHost {
		return r.next.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	out.URL.Scheme = r.base.Scheme
	out.URL.Host = r.base.Host
	out.URL.Path = strings.TrimSuffix(r.base.Path, "/") + req.URL.Path
	out.URL.RawPath = ""
	out.Host = ""
	return r.next.RoundTrip(out)
}
