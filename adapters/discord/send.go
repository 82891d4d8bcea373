package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/chatfmt"
	"github.com/heraldgw/herald/outbox"
)

// noPings lets a reply mention nobody but the author it replies to: the
// text comes from a model and must not ping @everyone, roles or users.
var noPings = &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, RepliedUser: true}

// Send renders m in Discord's markdown, splits it under 2,000 characters
// and posts the parts in order: the first as a reply to m.ReplyTo when
// that is a message id, every part as a follow-up when m answers an
// application command whose token is still good. m's files follow, one
// message each, the first with the text as its content when the text is
// one part. Parts Discord accepted are not posted again when the outbox
// retries m (m.Parts, recorded as each is accepted through
// adapters.KeepParts).
func (a *Adapter) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	return a.send(ctx, m, "")
}

// SendStreamed sends m as Send does, its first part edited into message
// over, the reply in progress (adapters.Streamer). A refused edit posts
// the part anew and deletes over once every part went.
func (a *Adapter) SendStreamed(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	return a.send(ctx, m, over)
}

func (a *Adapter) send(ctx context.Context, m outbox.Message, over string) adapters.SendResult {
	r, err := parseRoute(m.Target)
	if err != nil {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: err.Error()}
	}
	if m.Edits != "" {
		return a.replace(ctx, m, r)
	}
	render := func(limit int) []string { return chatfmt.RenderParts(m.Text, chatfmt.DiscordMarkdown, limit) }
	l := adapters.LayOut(m, render, chatfmt.DiscordLimit, chatfmt.DiscordLimit)
	if l.Len() == 0 {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "discord: the message is empty"}
	}
	p := sendState{done: adapters.ResumeAt(m, l.Len()), first: m.Parts.First, channelOnly: m.Parts.Mode == modeChannel,
		unstreamed: m.Parts.Unstreamed}
	if why := l.Missing(p.done); why != "" {
		return adapters.SendResult{Outcome: adapters.Permanent, Reason: "discord: " + why}
	}
	// A first part that is a file is not edited into the reply in
	// progress: it is posted, and the message in progress deleted.
	p.unstreamed = p.unstreamed || (over != "" && len(l.Text) == 0)
	ref, viaFollowup := parseInteractionRef(m.ReplyTo)
	viaFollowup = viaFollowup && !p.channelOnly && a.clock.Now().Before(ref.expires())
	for i := p.done; i < l.Len(); i++ {
		text, files := part(l, i)
		var comps []discordgo.MessageComponent // the buttons go under the last part
		if i == l.Len()-1 {
			comps = components(m.Buttons)
		}
		var id string
		if viaFollowup {
			id, err = a.followup(ctx, ref, text, files, comps)
			if gone(err) {
				// The deferral failed or the token lapsed: the rest of the
				// answer goes to the channel.
				a.log.Warn("interaction follow-up refused; posting to the channel", "interaction", ref.id, "err", err)
				viaFollowup, p.channelOnly = false, true
			}
		}
		edited := false
		if !viaFollowup && i == 0 && over != "" && !p.unstreamed {
			id, err = a.edit(ctx, r, over, text, comps)
			edited = err == nil || classify(err).Outcome != adapters.Permanent
			if !edited {
				a.log.Warn("Discord refused to edit the reply in progress; posting the reply anew", "channel", r.dest(), "err", err)
				p.unstreamed = true
			}
		}
		if !viaFollowup && !edited {
			replyTo := ""
			if i == 0 && isSnowflake(m.ReplyTo) {
				replyTo = m.ReplyTo
			}
			id, err = a.post(ctx, r, text, replyTo, files, comps)
		}
		if err != nil {
			return classify(err)
		}
		if p.done == 0 {
			p.first = id
		}
		p.done++
		if p.done < l.Len() {
			if err := adapters.KeepParts(ctx, p.record()); err != nil {
				return adapters.PartsNotKept("discord", err)
			}
		}
	}
	if p.unstreamed && over != "" {
		if err := a.ClearStatus(ctx, m.Target, over); err != nil {
			a.log.Warn("deleting the reply in progress failed; it stays above the reply", "channel", r.dest(), "err", err)
		}
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: p.first}
}

// part is part i of l: its text (a file's caption) and its files.
func part(l adapters.Layout, i int) (string, []outbox.File) {
	if f, caption, ok := l.File(i); ok {
		return caption, []outbox.File{f}
	}
	return l.Text[i], nil
}

// uploads are files as discordgo sends them, each reading its bytes
// afresh: a part posted again (a follow-up refused, then posted to the
// channel) sends them whole.
func uploads(files []outbox.File) []*discordgo.File {
	out := make([]*discordgo.File, len(files))
	for i, f := range files {
		out[i] = &discordgo.File{Name: f.Name, ContentType: f.MIME, Reader: bytes.NewReader(f.Data)}
	}
	return out
}

// post sends one channel message, with files (a multipart body) and
// components, a reply to replyTo when set.
func (a *Adapter) post(ctx context.Context, r route, text, replyTo string, files []outbox.File, comps []discordgo.MessageComponent) (string, error) {
	msg := &discordgo.MessageSend{Content: text, AllowedMentions: noPings, Files: uploads(files), Components: comps}
	if replyTo != "" {
		keep := false // a deleted original must not fail the answer
		msg.Reference = &discordgo.MessageReference{MessageID: replyTo, ChannelID: r.dest(), GuildID: r.guild, FailIfNotExists: &keep}
	}
	sent, err := a.rest.ChannelMessageSendComplex(r.dest(), msg, discordgo.WithContext(ctx))
	if err != nil {
		return "", err
	}
	return sent.ID, nil
}

// edit replaces the text of message id with one part, pinging nobody,
// and its components with comps when there are any; it returns id.
func (a *Adapter) edit(ctx context.Context, r route, id, text string, comps []discordgo.MessageComponent) (string, error) {
	e := discordgo.NewMessageEdit(r.dest(), id).SetContent(text)
	e.AllowedMentions = noPings
	if len(comps) > 0 {
		e.Components = &comps
	}
	return a.editMessage(ctx, e)
}

// editMessage makes the edit e and returns its message's id.
func (a *Adapter) editMessage(ctx context.Context, e *discordgo.MessageEdit) (string, error) {
	id := e.ID
	if _, err := a.rest.ChannelMessageEditComplex(e, discordgo.WithContext(ctx)); err != nil {
		return "", err
	}
	return id, nil
}

// followup posts one part as a follow-up message of an interaction
// (POST /webhooks/<app>/<token>); the first one fills the deferred
// "thinking" response.
func (a *Adapter) followup(ctx context.Context, ref interactionRef, text string, files []outbox.File, comps []discordgo.MessageComponent) (string, error) {
	params := &discordgo.WebhookParams{Content: text, AllowedMentions: noPings, Files: uploads(files), Components: comps}
	sent, err := a.rest.WebhookExecute(ref.app, ref.token, true, params, discordgo.WithContext(ctx))
	if err != nil {
		return "", err
	}
	if sent == nil {
		return "", nil
	}
	return sent.ID, nil
}

// components are buttons as Discord shows them: action rows of up to
// five, in order, each button's custom_id its Data; the /deny one red,
// the first one primary, the others grey. nil for none.
func components(buttons []outbox.Button) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	for start := 0; start < len(buttons); start += 5 {
		var row discordgo.ActionsRow
		for i, b := range buttons[start:min(start+5, len(buttons))] {
			style := discordgo.SecondaryButton
			switch {
			case adapters.Danger(b):
				style = discordgo.DangerButton
			case start+i == 0:
				style = discordgo.PrimaryButton
			}
			row.Components = append(row.Components, discordgo.Button{Label: b.Text, Style: style, CustomID: b.Data})
		}
		rows = append(rows, row)
	}
	return rows
}

// replace edits message m.Edits into m's text and removes its
// components (an answered approval's buttons). A text of more than one
// part, or a message Discord will not edit (deleted, not the bot's),
// goes as a new message instead.
func (a *Adapter) replace(ctx context.Context, m outbox.Message, r route) adapters.SendResult {
	parts := chatfmt.RenderParts(m.Text, chatfmt.DiscordMarkdown, chatfmt.DiscordLimit)
	if len(parts) == 1 && len(m.Files) == 0 {
		e := discordgo.NewMessageEdit(r.dest(), m.Edits).SetContent(parts[0])
		e.AllowedMentions = noPings
		e.Components = &[]discordgo.MessageComponent{}
		_, err := a.editMessage(ctx, e)
		if err == nil {
			return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.Edits}
		}
		if res := classify(err); res.Outcome != adapters.Permanent {
			return res
		}
		a.log.Warn("Discord refused to edit a message; sending its new text as a new message", "channel", r.dest(), "err", err)
	}
	m.Edits = ""
	return a.send(ctx, m, "")
}

// gone reports whether err says an interaction's webhook cannot be used.
func gone(err error) bool {
	var re *discordgo.RESTError
	if !errors.As(err, &re) || re.Response == nil {
		return false
	}
	switch re.Response.StatusCode {
	case http.StatusNotFound, http.StatusUnauthorized:
		return true
	}
	if re.Message != nil {
		switch re.Message.Code {
		case discordgo.ErrCodeUnknownWebhook, discordgo.ErrCodeUnknownInteraction, discordgo.ErrCodeInvalidWebhookTokenProvided:
			return true
		}
	}
	return false
}

// classify turns a REST error into the outbox's outcome: a 429 is
// RateLimited with Discord's wait, a 5xx or a network error Transient,
// and a 401 (the bot token refused) too, as adapters.Transient explains;
// any other 4xx (Missing Access, Unknown Channel, cannot DM this user, too
// long) Permanent with Discord's words.
func classify(err error) adapters.SendResult {
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return adapters.SendResult{Outcome: adapters.RateLimited, RetryAfter: rl.RetryAfter, Reason: "discord: rate limited: " + rl.Message}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		status := re.Response.StatusCode
		switch {
		case status == http.StatusTooManyRequests:
			return adapters.SendResult{Outcome: adapters.RateLimited, RetryAfter: retryAfter(re), Reason: restReason(re)}
		case status >= 500:
			return adapters.SendResult{Outcome: adapters.Transient, Reason: restReason(re)}
		case status == http.StatusUnauthorized:
			return adapters.SendResult{Outcome: adapters.Transient, Reason: restReason(re) + "; Discord refused the bot token"}
		default:
			return adapters.SendResult{Outcome: adapters.Permanent, Reason: restReason(re)}
		}
	}
	if errors.Is(err, discordgo.ErrUnauthorized) {
		return adapters.SendResult{Outcome: adapters.Transient, Reason: "discord: Discord refused the bot token"}
	}
	return adapters.SendResult{Outcome: adapters.Transient, Reason: "discord: " + err.Error()}
}

// restReason is "discord: <status>: <Discord's message> (code <n>)".
func restReason(re *discordgo.RESTError) string {
	s := fmt.Sprintf("discord: %d", re.Response.StatusCode)
	if re.Message != nil && re.Message.Message != "" {
		s += ": " + re.Message.Message
		if re.Message.Code != 0 {
			s += fmt.Sprintf(" (code %d)", re.Message.Code)
		}
	} else if len(re.ResponseBody) > 0 {
		s += ": " + clip(string(re.ResponseBody), 200)
	}
	return s
}

// retryAfter reads a 429's wait from its body's retry_after (seconds) or
// its Retry-After header; at least a second when neither says.
func retryAfter(re *discordgo.RESTError) time.Duration {
	var body struct {
		RetryAfter float64 `json:"retry_after"`
	}
	if json.Unmarshal(re.ResponseBody, &body) == nil && body.RetryAfter > 0 {
		return time.Duration(body.RetryAfter * float64(time.Second))
	}
	if s, err := strconv.ParseFloat(re.Response.Header.Get("Retry-After"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return time.Second
}

// sendState is how far a message sent in parts got, kept with the
// outbox message between attempts (outbox.Parts).
type sendState struct {
	done        int    // parts accepted
	first       string // the first part's message id
	channelOnly bool   // the follow-up was refused: post to the channel
	// unstreamed: Discord refused to edit the reply in progress into the
	// first part, which is posted anew (SendStreamed); kept with the parts
	// once one went, so the attempt that sends the last deletes it.
	unstreamed bool
}

// modeChannel is the outbox.Parts mode of an answer whose follow-ups were
// refused: the parts left go to the channel.
const modeChannel = "channel"

// record is p as the outbox keeps it.
func (p sendState) record() outbox.Parts {
	r := outbox.Parts{Done: p.done, First: p.first, Unstreamed: p.unstreamed}
	if p.channelOnly {
		r.Mode = modeChannel
	}
	return r
}
