package discord

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

var _ adapters.Fetcher = (*Adapter)(nil)

// cdnHosts serve Discord's attachments.
var cdnHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

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
	if !a.onCDN(att.URL) {
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

// onCDN reports whether rawURL is an attachment URL herald fetches.
func (a *Adapter) onCDN(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range cdnHosts {
		if u.Scheme == "https" && host == h {
			return true
		}
	}
	api, err := url.Parse(a.opts.Config.APIURL)
	return a.opts.Config.APIURL != "" && err == nil && u.Scheme == api.Scheme && strings.EqualFold(u.Host, api.Host)
}
