package discord

import (
	"cmp"
	"context"
	"net/http"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

var _ adapters.Fetcher = (*Adapter)(nil)

// Fetch downloads a file a message carried from its attachment URL
// (Attachment.URL): Discord's CDN serves it without the bot token, which
// is not sent. Only Discord's CDN hosts, over https, and the host of the
// configured API URL are fetched from. Discord signs an attachment's URL
// for about a day; an expired one answers 404, which is NotFound.
func (a *Adapter) Fetch(ctx context.Context, att sessions.Attachment, max int64) ([]byte, error) {
	const op = "discord.Fetch"
	name := cmp.Or(att.Name, "the file")
	if att.URL == "" {
		return nil, errs.E(op, errs.Invalid, "%s has no Discord attachment URL", name)
	}
	if !adapters.Hosted(att.URL, a.opts.Config.APIURL, "cdn.discordapp.com", "media.discordapp.net") {
		return nil, errs.E(op, errs.Invalid, "%s is not on Discord's CDN", name)
	}
	if err := adapters.CheckSize(op, name, att.Size, max); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, att.URL, nil)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	return adapters.Download{Op: op, Platform: "Discord", Client: a.client}.Get(req, name, max)
}
