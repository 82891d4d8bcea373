package adapters

import (
	"log/slog"
	"strings"

	"github.com/heraldgw/herald/sessions"
)

// Access is who an adapter serves: its platform's allow-list, or every
// sender when allow-all is on. With neither, nobody is served.
type Access struct {
	platform string
	allowed  map[string]bool // user ids, and names lower-cased without the @
	all      bool
}

// NewAccess reads a platform's allow-list (platforms.<p>.allowed_users)
// and platforms.allow_all_users. Entries are user ids or @names; names
// match case-insensitively.
func NewAccess(platform string, allowed []string, allowAll bool) *Access {
	a := &Access{platform: platform, allowed: make(map[string]bool, len(allowed)), all: allowAll}
	for _, s := range allowed {
		s = strings.TrimSpace(s)
		if name, ok := strings.CutPrefix(s, "@"); ok {
			a.allowed["@"+strings.ToLower(name)] = true
		} else if s != "" {
			a.allowed[s] = true
		}
	}
	return a
}

// Allows reports whether the sender with this id (and user name, without
// the @, where the platform has one) is served.
func (a *Access) Allows(userID, userName string) bool {
	if len(a.allowed) == 0 {
		return a.all
	}
	if userID != "" && a.allowed[userID] {
		return true
	}
	return userName != "" && a.allowed["@"+strings.ToLower(strings.TrimPrefix(userName, "@"))]
}

// LogStart says at startup whom the adapter serves, and why nobody when
// that is the case. log is the adapter's logger, which names the platform
// already; Access adds no platform of its own, so a line names it once.
func (a *Access) LogStart(log *slog.Logger) {
	switch {
	case len(a.allowed) > 0:
		log.Info("serving the allow-listed users", "allowed", len(a.allowed))
	case a.all:
		log.Warn("serving every user: allow_all_users is on and there is no allow-list")
	default:
		log.Warn("serving nobody: the allow-list is empty and allow_all_users is off; set platforms." + a.platform +
			".allowed_users or HERALD_ALLOW_ALL_USERS")
	}
}

// LogRefused records a sender who was not served, on the adapter's logger
// as LogStart. The message gets no turn.
func (a *Access) LogRefused(log *slog.Logger, userID, userName string) {
	log.Warn("refused a sender who is not allowed", "user_id", userID, "user_name", userName)
}

// Group session scopes; the values of platforms.group_sessions.
const (
	ScopeAuto    = "auto"     // shared in threads, per user in plain groups
	ScopeShared  = "shared"   // one session per chat or thread
	ScopePerUser = "per_user" // one session per user in each chat or thread
)

// GroupConv is the conversation key of a group message: base (the chat's
// or thread's key, e.g. "telegram:-100123:7") when the group shares a
// session, else base + ":user:" + the sender's id. Replies still go to
// base's chat: the adapter sets sessions.MetaTarget to it. DMs use their
// base key and never call this.
func GroupConv(scope, base string, inThread bool, userID string) string {
	shared := scope == ScopeShared || (scope != ScopePerUser && inThread)
	if shared || userID == "" {
		return base
	}
	return base + ":user:" + userID
}

// ChannelUser names user in the group channel whose key is channel
// (without a thread), whatever the session scope: a message there or in
// one of its threads carries it in sessions.MetaChannelUser, so that a
// command typed in the channel can act on the user's latest conversation
// there (sessions.MetaLatest).
func ChannelUser(channel, userID string) string {
	return channel + ":user:" + userID
}

// SetChannelUser marks in as a message of user in the group channel
// whose key is channel; latest asks, for a command typed in the channel
// itself, that it act on the user's latest conversation there.
func SetChannelUser(in *sessions.Inbound, channel, userID string, latest bool) {
	if userID == "" {
		return
	}
	if in.Meta == nil {
		in.Meta = map[string]string{}
	}
	in.Meta[sessions.MetaChannelUser] = ChannelUser(channel, userID)
	if latest {
		in.Meta[sessions.MetaLatest] = "1"
	}
}
