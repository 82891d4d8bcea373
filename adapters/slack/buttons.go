package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// InteractivityPath is the route Slack posts presses of herald's buttons
// to, to set as the app's Interactivity Request URL (Events API only).
const InteractivityPath = "/slack/interactivity"

// sectionLimit is the most characters a section block's text takes.
const sectionLimit = 3000

// buttonsBlockID names the actions block of a message's buttons; each
// button's action_id is it and the button's place, unique in the
// message as Slack wants.
const buttonsBlockID = "herald_buttons"

// blocks is a text part with buttons under it, as Block Kit shows it:
// the text in section blocks (mrkdwn, or plain text when Slack refused
// the markup), then an actions block of the buttons, in order, each
// with its Data as its value. The message's text stays its fallback,
// for notifications and clients without blocks.
func blocks(text string, plain bool, buttons []outbox.Button) []slackapi.Block {
	kind := slackapi.MarkdownType
	if plain {
		kind = slackapi.PlainTextType
	}
	var out []slackapi.Block
	for _, chunk := range chunks(text, sectionLimit) {
		out = append(out, slackapi.NewSectionBlock(slackapi.NewTextBlockObject(kind, chunk, false, false), nil, nil))
	}
	elems := make([]slackapi.BlockElement, len(buttons))
	for i, b := range buttons {
		e := slackapi.NewButtonBlockElement(buttonsBlockID+"_"+strconv.Itoa(i), b.Data,
			slackapi.NewTextBlockObject(slackapi.PlainTextType, b.Text, false, false))
		if adapters.Danger(b) {
			e = e.WithStyle(slackapi.StyleDanger)
		}
		elems[i] = e
	}
	return append(out, slackapi.NewActionBlock(buttonsBlockID, elems...))
}

// chunks cuts text into pieces of at most limit characters, after a
// line break where the piece has one.
func chunks(text string, limit int) []string {
	var out []string
	for utf8.RuneCountInString(text) > limit {
		end := 0 // the byte after limit characters
		for range limit {
			_, size := utf8.DecodeRuneInString(text[end:])
			end += size
		}
		cut := strings.LastIndexByte(text[:end], '\n') + 1
		if cut == 0 {
			cut = end
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	return append(out, text)
}

// replace updates message m.Edits into m's text and removes its blocks
// (an answered approval's buttons). A text of more than one part, or a
// message Slack will not update (deleted, not the bot's, too old), goes
// as a new message instead.
func (a *Adapter) replace(ctx context.Context, m outbox.Message, channel string) adapters.SendResult {
	p := resume(m)
	if len(p.l.Text) == 1 && len(m.Files) == 0 {
		_, err := a.update(ctx, channel, m.Edits, p.l.Text[0], false, slackapi.MsgOptionBlocks())
		if err != nil && formattingRejected(err) {
			p.toPlain(m.Text)
			_, err = a.update(ctx, channel, m.Edits, p.l.Text[0], true, slackapi.MsgOptionBlocks())
		}
		if err == nil {
			return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.Edits}
		}
		if res := classify(err); res.Outcome != adapters.Permanent {
			return res
		}
		a.log.Warn("Slack refused to update a message; sending its new text as a new message", "target", m.Target.String(), "err", err)
	}
	m.Edits = ""
	return a.send(ctx, m, "")
}

// serveInteraction answers one press of a button posted to
// InteractivityPath (a form whose field payload is the interaction), its
// signature checked as the events' are: 200 once the press is delivered
// (or not for herald), 500 when its delivery failed, which Slack shows
// the person as a failure to press again.
func (a *Adapter) serveInteraction(w http.ResponseWriter, r *http.Request, inbox adapters.Inbox) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slackapi.InteractionCallback
	if err == nil {
		err = json.Unmarshal([]byte(form.Get("payload")), &cb)
	}
	if err != nil {
		http.Error(w, "unreadable interaction", http.StatusBadRequest)
		return
	}
	if _, err := a.deliver(r.Context(), inbox, pressInbound(cb, a.opts.GroupSessions)); err != nil {
		http.Error(w, "not queued", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// pressInbound turns a press of a button of a message (block_actions)
// into an Inbound from the person who pressed, in the conversation a
// message of theirs in that place would be in, whose text is the
// button's value; other interactions are skipped.
func pressInbound(cb slackapi.InteractionCallback, scope string) inbound {
	if cb.Type != slackapi.InteractionTypeBlockActions || cb.Container.Type != "message" {
		return inbound{Skip: "interaction " + string(cb.Type) + " on a " + cb.Container.Type}
	}
	acts := cb.ActionCallback.BlockActions
	if len(acts) == 0 || strings.TrimSpace(acts[0].Value) == "" {
		return inbound{Skip: "a press without a value"}
	}
	team := cmp.Or(cb.Team.ID, cb.User.TeamID)
	channel := cmp.Or(cb.Container.ChannelID, cb.Channel.ID)
	ts, thread := cb.Container.MessageTs, cmp.Or(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	switch {
	case team == "" || channel == "" || ts == "" || cb.User.ID == "" || cb.TriggerID == "":
		return inbound{Skip: "no team, channel, message, user or trigger"}
	case !validIDs(team, channel, ts, thread, cb.User.ID):
		return inbound{Skip: "an id that is not Slack's"}
	}
	in := sessions.Inbound{Sender: cb.User.ID, MessageID: adapters.PressPrefix + cb.TriggerID, Text: acts[0].Value}
	place(&in, position{team: team, channel: channel, ts: ts, thread: thread, dm: isDM(channel, "")}, cb.User.ID, scope)
	adapters.Pressed(&in, ts)
	return inbound{In: in, UserName: cmp.Or(cb.User.Name, cb.User.Profile.DisplayName)}
}
