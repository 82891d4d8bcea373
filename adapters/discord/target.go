package discord

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// route is where a message goes on Discord.
type route struct {
	guild   string // "" for a DM
	channel string
	thread  string // "" outside a thread
}

// dest is the channel id to post to: the thread when there is one (a
// thread is a channel of its own on Discord).
func (r route) dest() string {
	if r.thread != "" {
		return r.thread
	}
	return r.channel
}

// parseRoute reads an outbox target back into a route. outbox.ParseTarget
// reads "discord:<guild>:<channel>:<thread>" as Chat=<guild>,
// Thread="<channel>:<thread>", and "discord:dm:<channel>" as Chat="dm",
// Thread=<channel>. A trailing ":user:<id>" (a per-user conversation key
// used as a target) names the same chat and is ignored. Errors: Invalid.
func parseRoute(t outbox.Target) (route, error) {
	const op = "discord.parseRoute"
	bad := func() (route, error) {
		return route{}, errs.E(op, errs.Invalid, "target %q is not discord:<guild>:<channel>[:<thread>] or discord:dm:<channel>", t.String())
	}
	if t.Platform != Platform {
		return bad()
	}
	parts := strings.Split(t.Thread, ":")
	if i := indexOf(parts, "user"); i >= 0 && i == len(parts)-2 {
		parts = parts[:i]
	}
	r := route{guild: t.Chat}
	if t.Chat == "dm" {
		r.guild = ""
		if len(parts) != 1 || !isSnowflake(parts[0]) {
			return bad()
		}
		r.channel = parts[0]
		return r, nil
	}
	if !isSnowflake(t.Chat) || len(parts) < 1 || len(parts) > 2 || !isSnowflake(parts[0]) {
		return bad()
	}
	r.channel = parts[0]
	if len(parts) == 2 {
		if !isSnowflake(parts[1]) {
			return bad()
		}
		r.thread = parts[1]
	}
	return r, nil
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// interactionPrefix marks an Inbound.MessageID (and so an outbox ReplyTo)
// that names an application command interaction.
const interactionPrefix = "ia:"

// interactionTTL is how long Discord accepts follow-ups with an
// interaction's token (15 minutes), less a margin for the request.
const interactionTTL = 15*time.Minute - 30*time.Second

// interactionRef is what a follow-up to an application command needs:
// the interaction's id, its application and its token.
//
// It travels as the command's Inbound.MessageID,
// "ia:<interaction id>:<application id>:<token>". The turn worker and the
// router copy MessageID into the ReplyTo of every answer to the command,
// and ReplyTo is stored with the outbox message, so the delivery worker
// of any process (not only the one holding the gateway) can post the
// answer as a follow-up. The id keeps the dedupe key unique per
// interaction (a redelivered interaction has the same token, so the same
// key). The conversation and the reply target stay the channel's, so
// later messages (background completions, cron) go to the channel, never
// to a token that lapses after 15 minutes.
type interactionRef struct {
	id, app, token string
}

func (r interactionRef) String() string {
	return interactionPrefix + r.id + ":" + r.app + ":" + r.token
}

// valid reports whether the parts can travel in the "ia:" form.
func (r interactionRef) valid() bool {
	if !isSnowflake(r.id) || !isSnowflake(r.app) || r.token == "" || len(r.token) > 1024 {
		return false
	}
	for _, c := range r.token {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// tokenPattern finds the interaction tokens in text: the last part of an
// "ia:" id, and the token in the REST paths that carry one (a follow-up's
// /webhooks/<app>/<token>, a response's /interactions/<id>/<token>), which
// a network error quotes with its URL. Group 1 is what stays.
var tokenPattern = regexp.MustCompile(`(\bia:\d{1,20}:\d{1,20}:|/webhooks/\d{1,20}/|/interactions/\d{1,20}/)[A-Za-z0-9._-]+`)

// Mask returns s with every interaction token replaced by "…", so an id
// such as "ia:<interaction id>:<application id>:<token>" is logged as
// "ia:<interaction id>:<application id>:…". The token answers the
// interaction for 15 minutes: it is a credential, and the router, the turn
// worker and the delivery worker log the ids that carry it.
func (a *Adapter) Mask(s string) string { return maskTokens(s) }

func maskTokens(s string) string {
	if !strings.Contains(s, interactionPrefix) && !strings.Contains(s, "/webhooks/") && !strings.Contains(s, "/interactions/") {
		return s // most log text: no regexp run
	}
	return tokenPattern.ReplaceAllString(s, "${1}…")
}

// parseInteractionRef reads a ReplyTo written by interactionRef.String.
func parseInteractionRef(s string) (interactionRef, bool) {
	rest, ok := strings.CutPrefix(s, interactionPrefix)
	if !ok {
		return interactionRef{}, false
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 {
		return interactionRef{}, false
	}
	r := interactionRef{id: parts[0], app: parts[1], token: parts[2]}
	return r, r.valid()
}

// expires is when the token is no longer worth using: the interaction's
// time, which its id carries, plus the token's lifetime.
func (r interactionRef) expires() time.Time {
	return snowflakeTime(r.id).Add(interactionTTL)
}

// discordEpoch is the first millisecond of 2015, where snowflakes count from.
const discordEpoch = 1420070400000

// snowflakeTime is the time a Discord id was made.
func snowflakeTime(id string) time.Time {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(n>>22) + discordEpoch)
}
