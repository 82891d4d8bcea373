package slack

import (
	"cmp"
	"encoding/json"
	"strings"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// inbound is what one Slack event or slash command asks of herald: an
// Inbound for the router, or the reason it gets none.
type inbound struct {
	In       sessions.Inbound
	UserName string // the sender's name where Slack sends it, for the allow-list
	// Skip says why nothing is delivered; empty when In is to be.
	Skip string
	// Challenge is a url_verification's challenge, to be echoed.
	Challenge string
}

// message is the part of a message or app_mention event herald reads.
type message struct {
	Type        string // "message" or "app_mention"
	User        string
	Text        string
	TS          string
	ThreadTS    string
	Channel     string
	ChannelType string // "im", "channel", "group", "mpim"; empty on app_mention
	SubType     string
	BotID       string
	Edited      bool
	Files       []sessions.Attachment
}

// parseEvent reads one Events API payload (an HTTP body, or a Socket Mode
// events_api envelope's payload). Errors: Invalid when the payload is not
// JSON; a payload that is JSON but no event herald handles is skipped.
func parseEvent(body []byte, self identity, scope string) (inbound, error) {
	const op = "slack.parseEvent"
	if !json.Valid(body) {
		return inbound{}, errs.E(op, errs.Invalid, "the event is not JSON")
	}
	ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
	if err != nil {
		// An event type the SDK does not know, or a shape it cannot read:
		// nothing for herald, and nothing Slack should retry.
		return inbound{Skip: "unreadable event: " + err.Error()}, nil
	}
	switch ev.Type {
	case slackevents.URLVerification:
		v, ok := ev.Data.(*slackevents.EventsAPIURLVerificationEvent)
		if !ok || v.Challenge == "" {
			return inbound{Skip: "url_verification without a challenge"}, nil
		}
		return inbound{Challenge: v.Challenge}, nil
	case slackevents.CallbackEvent:
	default:
		return inbound{Skip: "event type " + ev.Type}, nil
	}
	var m message
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		m = message{Type: e.Type, User: e.User, Text: e.Text, TS: e.TimeStamp, ThreadTS: e.ThreadTimeStamp,
			Channel: e.Channel, BotID: e.BotID, Edited: e.Edited != nil}
	case *slackevents.MessageEvent:
		m = message{Type: e.Type, User: e.User, Text: e.Text, TS: e.TimeStamp, ThreadTS: e.ThreadTimeStamp,
			Channel: e.Channel, ChannelType: e.ChannelType, SubType: e.SubType, BotID: e.BotID}
	default:
		return inbound{Skip: "inner event " + ev.InnerEvent.Type}, nil
	}
	m.Files = files(body)
	return messageInbound(ev.TeamID, m, self, scope), nil
}

// wireFile is a file of a message event, as far as herald reads it.
// The event is read again for its files rather than through the SDK's
// slack.File, which leaves out subtype, what tells a voice clip.
type wireFile struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	MIME       string `json:"mimetype"`
	Size       int64  `json:"size"`
	URLPrivate string `json:"url_private"`
	Subtype    string `json:"subtype"`
	Mode       string `json:"mode"`
}

// files lists the files of the event in body, each with what it is to
// the agent and where Fetch gets it: url_private, which needs the bot
// token at fetch time but holds none, and the file's id. A voice clip
// (subtype slack_audio) is a voice note; a deleted file (mode
// tombstone) is left out.
func files(body []byte) []sessions.Attachment {
	var ev struct {
		Event struct {
			Files []wireFile `json:"files"`
		} `json:"event"`
	}
	if json.Unmarshal(body, &ev) != nil {
		return nil
	}
	var out []sessions.Attachment
	for _, f := range ev.Event.Files {
		if f.ID == "" || f.Mode == "tombstone" {
			continue
		}
		mt := cmp.Or(f.MIME, adapters.MIMEOf(f.Name))
		kind := adapters.KindOf(mt)
		if f.Subtype == "slack_audio" {
			kind = sessions.AttachVoice
		}
		out = append(out, sessions.Attachment{Name: adapters.FileName(f.Name, "file", f.ID, mt), MIME: mt, Size: f.Size,
			Kind: kind, URL: f.URLPrivate, PlatformID: f.ID})
	}
	return out
}

// messageInbound turns a message or app_mention into an Inbound, or skips
// it: bots (herald included), edits, joins and other subtypes, and
// channel messages that do not mention herald (those come as app_mention).
func messageInbound(team string, m message, self identity, scope string) inbound {
	switch {
	case m.BotID != "" || m.SubType == "bot_message" || (self.UserID != "" && m.User == self.UserID):
		return inbound{Skip: "a bot's message"}
	case m.SubType != "" && m.SubType != "file_share" && m.SubType != "thread_broadcast":
		return inbound{Skip: "message subtype " + m.SubType}
	case m.Edited:
		return inbound{Skip: "an edit"}
	case team == "" || m.Channel == "" || m.TS == "" || m.User == "":
		return inbound{Skip: "no team, channel, ts or user"}
	case !validIDs(team, m.Channel, m.TS, m.ThreadTS, m.User):
		return inbound{Skip: "an id that is not Slack's"}
	}
	dm := isDM(m.Channel, m.ChannelType)
	if m.Type == "message" && !dm {
		return inbound{Skip: "a channel message without a mention"}
	}
	text := messageText(m.Text, self.UserID, m.Type == "app_mention")
	if text == "" && len(m.Files) == 0 {
		return inbound{Skip: "no text or file"}
	}
	in := sessions.Inbound{Sender: m.User, MessageID: m.Channel + ":" + m.TS, Text: text, Attachments: m.Files}
	place(&in, position{team: team, channel: m.Channel, ts: m.TS, thread: m.ThreadTS, dm: dm}, m.User, scope)
	return inbound{In: in}
}

// position is where a message stands: its team, channel and ts, the thread
// it is in ("" for a top-level message), and whether the channel is a
// DM with the bot.
type position struct {
	team, channel, ts, thread string
	dm                        bool
}

// place sets the conversation of in, from user, at p, and where its
// replies go. A DM is one session, answered in the DM, in a thread only
// when the user wrote in one. In a channel the conversation is the
// thread of the message (a top-level message starts its own), scoped to
// user as the group session scope says.
func place(in *sessions.Inbound, p position, user, scope string) {
	if p.dm {
		in.Conv = key(p.team, p.channel, "")
		if p.thread != "" {
			setTarget(in, key(p.team, p.channel, p.thread))
		}
		return
	}
	thread := p.thread
	if thread == "" {
		thread = p.ts
	}
	base := key(p.team, p.channel, thread)
	in.Conv = adapters.GroupConv(scope, base, true, user)
	if in.Conv != base {
		setTarget(in, base)
	}
	adapters.SetChannelUser(in, key(p.team, p.channel, ""), user, false)
}

// parseSlashCommand turns a slash command into an Inbound "/name args"
// for the shared command handler, answered in the command's channel. In a
// channel the session is the group's (adapters.GroupConv, not in a
// thread: Slack does not post commands from threads), or rather the
// user's latest conversation with herald there, in a thread
// (sessions.MetaLatest); in a DM, the DM's.
func parseSlashCommand(c slackapi.SlashCommand, scope string) inbound {
	name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(c.Command), "/"))
	switch {
	case name == "" || strings.ContainsAny(name, " \t\n/"):
		return inbound{Skip: "no command name"}
	case c.TeamID == "" || c.ChannelID == "" || c.UserID == "":
		return inbound{Skip: "no team, channel or user"}
	case !validIDs(c.TeamID, c.ChannelID, c.UserID):
		return inbound{Skip: "an id that is not Slack's"}
	}
	text := "/" + name
	if args := strings.TrimSpace(c.Text); args != "" {
		text += " " + args
	}
	in := sessions.Inbound{Sender: c.UserID, MessageID: c.TriggerID, Text: text}
	base := key(c.TeamID, c.ChannelID, "")
	in.Conv = base
	group := !isDM(c.ChannelID, "") && c.ChannelName != "directmessage"
	if group {
		in.Conv = adapters.GroupConv(scope, base, false, c.UserID)
	}
	if in.Conv != base {
		setTarget(&in, base)
	}
	if group {
		adapters.SetChannelUser(&in, base, c.UserID, true)
	}
	return inbound{In: in, UserName: c.UserName}
}

// key is a conversation key and reply target:
// "slack:<team>:<channel>[:<thread_ts>]".
func key(team, channel, thread string) string {
	k := Platform + ":" + team + ":" + channel
	if thread != "" {
		k += ":" + thread
	}
	return k
}

// validIDs reports whether ids (team, channel, user, ts) are as Slack
// makes them: letters, digits and dots (and _ or -). The keys built from
// them are split at colons and stored, so nothing else may pass.
func validIDs(ids ...string) bool {
	for _, id := range ids {
		for _, r := range id {
			if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r == '.' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}

func setTarget(in *sessions.Inbound, target string) {
	in.Meta = map[string]string{sessions.MetaTarget: target}
}

// isDM reports whether a channel is a direct message with the bot: the
// event says so, or (app_mention and slash commands carry no channel type)
// its id does.
func isDM(channel, channelType string) bool {
	if channelType != "" {
		return channelType == "im"
	}
	return strings.HasPrefix(channel, "D")
}

// messageText is a message's text as herald reads it: a leading mention
// of the bot removed (any leading mention, on an app_mention, when the
// bot's id is not known yet) and Slack's three escapes undone.
func messageText(text, selfID string, mention bool) string {
	text = strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(text, "<@"); ok {
		if end := strings.IndexByte(rest, '>'); end >= 0 {
			id, _, _ := strings.Cut(rest[:end], "|")
			if (selfID != "" && id == selfID) || (selfID == "" && mention) {
				text = strings.TrimSpace(adapters.AfterMention(rest[end+1:]))
			}
		}
	}
	return unescaper.Replace(text)
}

// unescaper undoes the escaping Slack applies to &, < and > in message
// text; a literal "&amp;" arrives as "&amp;amp;", so one pass is right.
var unescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")
