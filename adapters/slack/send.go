package slack

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Send posts m to its channel (and thread) with chat.postMessage: the
// text rendered as mrkdwn and split under chatfmt.SlackLimit, one post per
// part, in order. m's files follow, one upload each (upload), the first
// with the text as its comment when the text is one part. A retry of a
// message goes on from the first part not yet accepted. m.ReplyTo is not
// needed: the target names the thread.
func (a *Adapter) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	return a.send(ctx, m, "")
}

// SendStreamed sends m as Send does, its first part put into message
// over, the reply in progress, with chat.update (adapters.Streamer). A
// refused update posts the part anew and deletes over once every part
// went.
func (a *Adapter) SendStreamed(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	return a.send(ctx, m, over)
}

func (a *Adapter) send(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	channel, thread, err := route(m.Target)
	if err != nil {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: err.Error()}
	}
	if m.Edits != "" {
		return a.replace(ctx, m, channel)
	}
	p := resume(m)
	if p.l.Len() == 0 {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "the message is empty"}
	}
	if why := p.l.Missing(p.sent); why != "" {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: why}
	}
	// A first part that is a file is not put into the reply in progress:
	// the file is posted, and the message in progress deleted.
	p.unstreamed = p.unstreamed || (over != "" && len(p.l.Text) == 0)
	for p.sent < p.l.Len() {
		var ts string
		f, comment, isFile := p.l.File(p.sent)
		// The buttons go under the last text part: a file's post takes
		// none, and resume gives the text parts of its own.
		var extra []slackapi.MsgOption
		if !isFile && p.sent == len(p.l.Text)-1 && len(m.Buttons) > 0 {
			extra = append(extra, slackapi.MsgOptionBlocks(blocks(p.l.Text[p.sent], p.plain, m.Buttons)...))
		}
		switch {
		case isFile:
			ts, err = a.upload(ctx, channel, thread, f, comment)
		case p.sent == 0 && over != "" && !p.unstreamed:
			ts, err = a.update(ctx, channel, over, p.l.Text[0], p.plain, extra...)
			if err != nil && !formattingRejected(err) && classify(err).Outcome == adapters.Permanent {
				a.log.Warn("Slack refused to update the reply in progress; posting the reply anew", "target", m.Target.String(), "err", err)
				p.unstreamed = true
				continue
			}
		default:
			ts, err = a.post(ctx, channel, thread, p.l.Text[p.sent], p.plain, extra...)
		}
		if err != nil && !isFile && !p.plain && formattingRejected(err) {
			a.log.Warn("Slack refused the formatting; resending as plain text", "target", m.Target.String(), "err", err)
			p.toPlain(m.Text)
			continue
		}
		if err != nil {
			return classify(err)
		}
		if p.first == "" {
			p.first = ts
		}
		p.sent++
		if p.sent < p.l.Len() {
			if err := adapters.KeepParts(ctx, p.record()); err != nil {
				return adapters.PartsNotKept("slack", err)
			}
		}
	}
	if p.unstreamed && over != "" {
		if err := a.ClearStatus(ctx, m.Target, over); err != nil {
			a.log.Warn("deleting the reply in progress failed; it stays above the reply", "target", m.Target.String(), "err", err)
		}
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: p.first}
}

// resume is m's progress: where an earlier attempt stopped (m.Parts), or
// a fresh rendering. The text's parts go first, then the files.
func resume(m outbox.Message) *progress {
	render := func(limit int) []string { return chatfmt.RenderParts(m.Text, chatfmt.SlackMrkdwn, limit) }
	// A message with buttons keeps its text out of a file's comment:
	// the buttons go under the text.
	captionLimit := chatfmt.SlackLimit
	if len(m.Buttons) > 0 {
		captionLimit = 0
	}
	p := &progress{l: adapters.LayOut(m, render, chatfmt.SlackLimit, captionLimit)}
	p.sent, p.first = adapters.ResumeAt(m, p.l.Len()), m.Parts.First
	p.unstreamed = m.Parts.Unstreamed
	if m.Parts.Mode == modePlain {
		p.toPlain(m.Text)
	}
	return p
}

// upload shares one file to the channel (and thread) with files upload
// v2: files.getUploadURLExternal, the bytes to the URL it gives, then
// files.completeUploadExternal with comment as the initial comment. It
// returns the file's id: Slack names no message for it.
func (a *Adapter) upload(ctx context.Context, channel, thread string, f outbox.File, comment string) (string, error) {
	sum, err := a.api.UploadFileContext(ctx, slackapi.UploadFileParameters{
		Reader: bytes.NewReader(f.Data), FileSize: len(f.Data), Filename: f.Name, Title: f.Name,
		Channel: channel, ThreadTimestamp: thread, InitialComment: comment,
	})
	if err != nil {
		return "", err
	}
	return sum.ID, nil
}

// post sends one part; plain turns Slack's markup off, and extra are
// further options (the blocks of buttons).
func (a *Adapter) post(ctx context.Context, channel, thread, text string, plain bool, extra ...slackapi.MsgOption) (string, error) {
	opts := append([]slackapi.MsgOption{slackapi.MsgOptionText(text, false)}, extra...)
	if plain {
		opts = append(opts, slackapi.MsgOptionDisableMarkdown())
	}
	if thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(thread))
	}
	_, ts, err := a.api.PostMessageContext(ctx, channel, opts...)
	return ts, err
}

// update replaces the text of message ts with one part, as post sends
// one, and returns ts.
func (a *Adapter) update(ctx context.Context, channel, ts, text string, plain bool, extra ...slackapi.MsgOption) (string, error) {
	opts := append([]slackapi.MsgOption{slackapi.MsgOptionText(text, false)}, extra...)
	if plain {
		opts = append(opts, slackapi.MsgOptionDisableMarkdown())
	}
	if _, _, _, err := a.api.UpdateMessageContext(ctx, channel, ts, opts...); err != nil {
		return "", err
	}
	return ts, nil
}

// toPlain switches p to plain text after Slack refused the formatting of
// its next part. Before any part went out the whole reply is rendered
// plain again; after, the parts left are sent as they are with Slack's
// markup off, since their cuts must stay where the sent ones end.
func (p *progress) toPlain(text string) {
	p.plain = true
	if p.sent > 0 || len(p.l.Text) == 0 {
		return
	}
	p.l.Text = chatfmt.RenderParts(text, chatfmt.PlainText, chatfmt.SlackLimit, chatfmt.Runes)
	for i, s := range p.l.Text {
		// &, < and > are Slack's control characters, markup or not.
		p.l.Text[i] = slackutilsx.EscapeMessage(s)
	}
}

// route reads a target back into Slack's channel and thread.
// outbox.ParseTarget reads "slack:<team>:<channel>:<ts>" as Chat <team>
// and Thread "<channel>:<ts>", so the channel is the thread's first field.
// A per-user conversation key's ":user:<id>" tail names no place and is
// dropped. Errors: Invalid when no channel is named.
func route(t outbox.Target) (channel, thread string, err error) {
	rest, _, _ := strings.Cut(t.Thread, ":user:")
	channel, thread, _ = strings.Cut(rest, ":")
	if channel == "" || strings.Contains(thread, ":") {
		return "", "", errs.E("slack.route", errs.Invalid, "target %q is not slack:<team>:<channel>[:<thread_ts>]", t.String())
	}
	return channel, thread, nil
}

// formattingRejected reports whether Slack refused a message for its
// formatting. herald posts text without blocks, so this is rare; these
// are Slack's answers when it happens.
func formattingRejected(err error) bool {
	var se slackapi.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	switch se.Err {
	case "invalid_blocks", "invalid_blocks_format", "markdown_text_conflict":
		return true
	}
	return false
}

// classify tells the outbox how Slack answered a failed post: a rate
// limit with its wait; 5xx, network and Slack's own transient errors to
// retry, and a refused bot token too (adapters.Transient says why);
// anything else Slack refused is permanent, with its error string
// (channel_not_found, not_in_channel, is_archived, msg_too_long, …).
func classify(err error) adapters.SendResult {
	var rl *slackapi.RateLimitedError
	var sc slackapi.StatusCodeError
	var se slackapi.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		return adapters.SendResult{Outcome: adapters.RateLimited, RetryAfter: rl.RetryAfter, Reason: "ratelimited"}
	case errors.As(err, &sc):
		if sc.Code >= 500 || sc.Code == http.StatusTooManyRequests || sc.Code == http.StatusRequestTimeout {
			return adapters.SendResult{Outcome: adapters.Transient, Reason: sc.Error()}
		}
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "Slack answered HTTP " + sc.Status}
	case errors.As(err, &se):
		switch se.Err {
		case "ratelimited":
			return adapters.SendResult{Outcome: adapters.RateLimited, Reason: se.Err}
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org":
			return adapters.SendResult{Outcome: adapters.Transient, Reason: se.Err}
		}
		if tokenRefused(se.Err) {
			return adapters.SendResult{Outcome: adapters.Transient, Reason: se.Err + ": Slack refused the bot token"}
		}
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: se.Err}
	}
	// A network error, a cancelled context, a body that was not Slack's.
	return adapters.SendResult{Outcome: adapters.Transient, Reason: err.Error()}
}
