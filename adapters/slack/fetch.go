package slack

import (
	"cmp"
	"context"
	"mime"
	"net/http"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

var _ adapters.Fetcher = (*Adapter)(nil)

// Fetch downloads a file a message carried from its url_private
// (Attachment.URL), with the bot token as a bearer header: the URL holds
// no token, and the token goes only to Slack (an https host of slack.com
// or slack-gov.com) or to the configured API URL's host. Slack answers
// a caller that may not read the file (a bot without the files:read
// scope) with a redirect to its sign-in page, which is an error here,
// not the file.
func (a *Adapter) Fetch(ctx context.Context, att sessions.Attachment, max int64) ([]byte, error) {
	const op = "slack.Fetch"
	name := cmp.Or(att.Name, "the file")
	switch {
	case att.URL == "" && att.PlatformID != "":
		return nil, errs.E(op, errs.NotFound, "Slack gave no download address for %s (a file shared from another workspace, or hidden by the workspace's plan)", name)
	case att.URL == "":
		return nil, errs.E(op, errs.Invalid, "%s has no Slack download address", name)
	case !adapters.Hosted(att.URL, a.opts.Config.APIURL, ".slack.com", ".slack-gov.com"):
		return nil, errs.E(op, errs.Invalid, "%s is not on Slack: the bot token is sent to Slack only", name)
	}
	if err := adapters.CheckSize(op, name, att.Size, max); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, att.URL, nil)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.opts.Config.BotToken)
	d := adapters.Download{Op: op, Platform: "Slack", Client: a.opts.HTTPClient, Check: func(resp *http.Response) error {
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.Request != req && ct == "text/html" { // redirected
			return errs.E(op, errs.Invalid, "Slack sent its sign-in page instead of %s: the bot may not read the file (the app needs the files:read scope)", name)
		}
		return nil
	}}
	return d.Get(req, name, max)
}
