package sessions

import (
	"context"
	"encoding/json"
	"maps"
	"time"
)

// Keys of Inbound.Meta with which an adapter tells the router where in a
// group channel a message came from, so that a command typed in the
// channel (a Slack slash command, which carries no thread) acts on the
// conversation its user has with herald there, in a thread.
const (
	// MetaChannelUser names the sender in the group channel the message
	// came from, in a thread of it or not (adapters.ChannelUser). The
	// router keeps, under it, the conversation of the sender's latest
	// message there (ConvMetaLatest).
	MetaChannelUser = "herald.channel_user"
	// MetaLatest, on a command that carries MetaChannelUser, asks for the
	// sender's latest conversation in the channel: the command acts on it
	// instead of on the channel's own, and its answers say which.
	MetaLatest = "herald.latest"
	// MetaActsOn is what a command's answers say it acted on, set by the
	// router when it took the sender's latest conversation ("in the
	// thread of …"). The router drops it from what adapters deliver.
	MetaActsOn = "herald.acts_on"
)

// ConvMetaLatest, in the metadata kept under a MetaChannelUser key, is
// the sender's latest conversation in that channel (a Latest in JSON).
const ConvMetaLatest = "latest_conv"

// Latest is a user's latest conversation in a group channel.
type Latest struct {
	Conv   string    `json:"conv"`
	Target string    `json:"target,omitempty"` // where its replies go, when not Conv
	Text   string    `json:"text,omitempty"`   // the start of the first message seen in it
	At     time.Time `json:"at"`               // when that message came
}

// noteLatest keeps in's conversation as its sender's latest in the
// channel in.Meta[MetaChannelUser] names, when it is not already. A
// failed read or write costs only the command's reach into the thread.
func (r *Router) noteLatest(ctx context.Context, in Inbound) {
	key := in.Meta[MetaChannelUser]
	if key == "" || in.Meta[MetaLatest] != "" || in.Kind == KindSynthetic {
		return
	}
	if cur, ok := r.latest(ctx, key); ok && cur.Conv == in.Conv {
		return
	}
	l := Latest{Conv: in.Conv, Target: in.Meta[MetaTarget], Text: excerpt(in.Text), At: r.clock.Now()}
	b, _ := json.Marshal(l)
	if err := r.store.SetMeta(ctx, key, ConvMetaLatest, string(b)); err != nil {
		r.log.WarnContext(ctx, "keeping the sender's latest conversation failed", "conv", in.Conv, "err", err)
	}
}

// latest reads the latest conversation kept under key.
func (r *Router) latest(ctx context.Context, key string) (Latest, bool) {
	raw := r.meta(ctx, key)[ConvMetaLatest]
	var l Latest
	if raw == "" || json.Unmarshal([]byte(raw), &l) != nil || l.Conv == "" {
		return Latest{}, false
	}
	return l, true
}

// toLatest points a command that asks for it (MetaLatest) at its sender's
// latest conversation in the channel, when that is another than the
// command's own; its answers still go where the command was typed, and
// say which conversation it acted on.
func (r *Router) toLatest(ctx context.Context, in Inbound) Inbound {
	key := in.Meta[MetaChannelUser]
	if key == "" || in.Meta[MetaLatest] == "" {
		return in
	}
	l, ok := r.latest(ctx, key)
	if !ok || l.Conv == in.Conv {
		return in
	}
	target, err := ReplyTarget(in)
	if err != nil {
		return in
	}
	in.Meta = maps.Clone(in.Meta)
	in.Meta[MetaTarget] = target.String()
	in.Meta[MetaActsOn] = l.actsOn()
	in.Conv = l.Conv
	return in
}
