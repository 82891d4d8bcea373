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
		var id string
		if viaFollowup {
			id, err = a.followup(ctx, ref, text, files)
			if gone(err) {
				// The deferral failed or the token lapsed: the rest of the
				// answer goes to the channel.
				a.log.Warn("interaction follow-up refused; posting to the channel", "interaction", ref.id, "err", err)
				viaFollowup, p.channelOnly = false, true
			}
		}
		edited := false
		if !viaFollowup && i == 0 && over != "" && !p.unstreamed {
			id, err = a.edit(ctx, r, over, text)
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
			id, err = a.post(ctx, r, text, replyTo, files)
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

// post sends one channel message, with files (a multipart body), a
// reply to replyTo when set.
func (a *Adapter) post(ctx context.Context, r route, text, replyTo string, files []outbox.File) (string, error) {
	msg := &discordgo.MessageSend{Content: text, AllowedMentions: noPings, Files: uploads(files)}
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
// and returns id.
func (a *Adapter) edit(ctx context.Context, r route, id, text string) (string, error) {
	e := discordgo.NewMessageEdit(r.dest(), id).SetContent(text)
	e.AllowedMentions = noPings
	if _, err := a.rest.ChannelMessageEditComplex(e, discordgo.WithContext(ctx)); err != nil {
		return "", err
	}
	return id, nil
}

// followup posts one part as a follow-up message of an interaction
// (POST /webhooks/<app>/<token>); the first one fills the deferred
// "thinking" response.
func (a *Adapter) followup(ctx context.Context, ref interactionRef, text string, files []outbox.File) (string, error) {
	params := &discordgo.WebhookParams{Content: text, AllowedMentions: noPings, Files: uploads(files)}
	sent, err := a.rest.WebhookExecute(ref.app, ref.token, true, params, discordgo.WithContext(ctx))
	if err != nil {
		return "", err
	}
	if sent == nil {
		return "", nil
	}
	return sent.ID, nil
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
