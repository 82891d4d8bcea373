package discord

import (
	"encoding/json"
	"fmt"
	"mime"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// skip says why an event is not for herald; "" means deliver it.
type skip string

const (
	skipMalformed    skip = "malformed"
	skipKind         skip = "not a user message"
	skipBot          skip = "from a bot"
	skipNotAddressed skip = "not addressed to herald"
	skipEmpty        skip = "empty"
	skipNotCommand   skip = "not an application command"
	skipNotPress     skip = "not a press of a button"
)

// env is what parsing needs besides the payload.
type env struct {
	botID   string
	trigger string // config.TriggerMention (or "") or config.TriggerAll
	scope   string // adapters.Scope*
	// threadParent tells whether a guild channel is a thread and its
	// parent channel; nil treats every channel as a plain one.
	threadParent func(channelID string) (parent string, isThread bool)
}

// event is a parsed event addressed to herald.
type event struct {
	in       sessions.Inbound
	userName string
	// reply is set for an application command: the interaction to defer.
	reply *interactionRef
	// channelID and guildID are a message's channel, as Discord names it
	// (a thread's own id), and its guild ("" for a DM): where a backfill
	// reads it from.
	channelID, guildID string
}

// parseMessage reads a MESSAGE_CREATE payload. Bots (herald itself
// included), webhooks and system messages are skipped; in a guild channel
// only a message that mentions the bot (the mention is cut from the text)
// or replies to it is taken, unless the trigger is "all". DMs are always
// taken.
func parseMessage(raw []byte, e env) (event, skip) {
	var m discordgo.Message
	if err := json.Unmarshal(raw, &m); err != nil || m.Author == nil {
		return event{}, skipMalformed
	}
	if !isSnowflake(m.ID) || !isSnowflake(m.ChannelID) || !isSnowflake(m.Author.ID) ||
		(m.GuildID != "" && !isSnowflake(m.GuildID)) {
		return event{}, skipMalformed
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return event{}, skipKind
	}
	if m.Author.Bot || m.WebhookID != "" || m.Author.ID == e.botID {
		return event{}, skipBot
	}
	text, mentioned := stripMention(m.Content, e.botID)
	for _, u := range m.Mentions {
		mentioned = mentioned || (u != nil && u.ID == e.botID && e.botID != "")
	}
	// A reply to herald's message addresses herald, even with its ping
	// turned off.
	if r := m.ReferencedMessage; r != nil && r.Author != nil && r.Author.ID == e.botID && e.botID != "" {
		mentioned = true
	}
	if m.GuildID != "" && !mentioned && e.trigger != config.TriggerAll {
		return event{}, skipNotAddressed
	}
	files := attachments(&m)
	if text == "" && len(files) == 0 {
		return event{}, skipEmpty
	}
	channel, thread := m.ChannelID, ""
	if m.GuildID != "" && e.threadParent != nil {
		if parent, ok := e.threadParent(m.ChannelID); ok && isSnowflake(parent) {
			channel, thread = parent, m.ChannelID
		}
	}
	in := e.inbound(m.GuildID, channel, thread, m.Author.ID)
	in.MessageID = m.ID
	in.Text = text
	in.Attachments = files
	return event{in: in, userName: m.Author.Username, channelID: m.ChannelID, guildID: m.GuildID}, ""
}

// attachments lists the files of m, each with what it is to the agent
// and where Fetch gets it: the attachment's URL (Discord's CDN, signed
// for a while; it holds no token) and its id. The recording of a voice
// message (the message's IS_VOICE_MESSAGE flag, or an attachment with a
// waveform) is a voice note.
func attachments(m *discordgo.Message) []sessions.Attachment {
	var out []sessions.Attachment
	for _, at := range m.Attachments {
		if at == nil || at.ID == "" {
			continue
		}
		mt, _, err := mime.ParseMediaType(at.ContentType)
		if err != nil {
			mt = adapters.MIMEOf(at.Filename)
		}
		kind := adapters.KindOf(mt)
		if kind == sessions.AttachAudio && (m.Flags&discordgo.MessageFlagsIsVoiceMessage != 0 || at.Waveform != "") {
			kind = sessions.AttachVoice
		}
		out = append(out, sessions.Attachment{Name: adapters.FileName(at.Filename, "file", at.ID, mt), MIME: mt,
			Size: int64(at.Size), Kind: kind, URL: at.URL, PlatformID: at.ID})
	}
	return out
}

// interactionPayload is what parseInteraction reads besides discordgo's
// Interaction: the partial channel, which says whether it is a thread.
type interactionPayload struct {
	Channel *discordgo.Channel `json:"channel"`
}

// parseInteraction reads an INTERACTION_CREATE payload. Only chat input
// application commands are taken; their text is "/<name> <options>", as a
// typed command reads, so the shared router handles them.
func parseInteraction(raw []byte, e env) (event, skip) {
	var i discordgo.Interaction
	var extra interactionPayload
	if json.Unmarshal(raw, &i) != nil || json.Unmarshal(raw, &extra) != nil {
		return event{}, skipMalformed
	}
	if i.Type != discordgo.InteractionApplicationCommand {
		return event{}, skipNotCommand
	}
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok || data.CommandType != discordgo.ChatApplicationCommand {
		return event{}, skipNotCommand
	}
	user := interactionUser(&i)
	ref := interactionRef{id: i.ID, app: i.AppID, token: i.Token}
	if user == nil || !isSnowflake(user.ID) || !isSnowflake(i.ChannelID) || !ref.valid() ||
		(i.GuildID != "" && !isSnowflake(i.GuildID)) || !commandName(data.Name) {
		return event{}, skipMalformed
	}
	if user.Bot {
		return event{}, skipBot
	}
	channel, thread := e.place(&i, extra)
	in := e.inbound(i.GuildID, channel, thread, user.ID)
	if i.GuildID != "" && thread == "" {
		// Typed in the channel: it acts on the user's latest
		// conversation there, in a thread or not.
		in.Meta[sessions.MetaLatest] = "1"
	}
	in.MessageID = ref.String()
	in.Text = commandText(data.Name, data.Options)
	return event{in: in, userName: user.Username, reply: &ref}, ""
}

// place is the channel an interaction happened in and, in a thread,
// the thread: from the partial channel it carries, else from what
// threadParent knows.
func (e env) place(i *discordgo.Interaction, extra interactionPayload) (channel, thread string) {
	channel = i.ChannelID
	if i.GuildID == "" {
		return channel, ""
	}
	switch {
	case extra.Channel != nil && extra.Channel.IsThread() && isSnowflake(extra.Channel.ParentID):
		return extra.Channel.ParentID, i.ChannelID
	case extra.Channel == nil && e.threadParent != nil:
		if parent, ok := e.threadParent(i.ChannelID); ok && isSnowflake(parent) {
			return parent, i.ChannelID
		}
	}
	return channel, ""
}

// interactionUser is who made an interaction: the member's user in a
// guild, else the user.
func interactionUser(i *discordgo.Interaction) *discordgo.User {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User
	}
	return i.User
}

// parsePress reads an INTERACTION_CREATE of a press of a button
// (a message component) of herald's message: skipNotPress for any
// other interaction. The press is the presser's message in the
// conversation a message of theirs in that channel or thread would be
// in, whose text is the button's custom_id.
func parsePress(raw []byte, e env) (event, skip) {
	var i discordgo.Interaction
	var extra interactionPayload
	if json.Unmarshal(raw, &i) != nil || json.Unmarshal(raw, &extra) != nil {
		return event{}, skipMalformed
	}
	if i.Type != discordgo.InteractionMessageComponent {
		return event{}, skipNotPress
	}
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	user := interactionUser(&i)
	ref := interactionRef{id: i.ID, app: i.AppID, token: i.Token}
	if !ok || data.ComponentType != discordgo.ButtonComponent || strings.TrimSpace(data.CustomID) == "" || i.Message == nil ||
		!isSnowflake(i.Message.ID) || user == nil || !isSnowflake(user.ID) || !isSnowflake(i.ChannelID) || !ref.valid() ||
		(i.GuildID != "" && !isSnowflake(i.GuildID)) {
		return event{}, skipMalformed
	}
	if user.Bot {
		return event{}, skipBot
	}
	channel, thread := e.place(&i, extra)
	in := e.inbound(i.GuildID, channel, thread, user.ID)
	in.MessageID = adapters.PressPrefix + i.ID
	in.Text = data.CustomID
	adapters.Pressed(&in, i.Message.ID)
	return event{in: in, userName: user.Username, reply: &ref}, ""
}

// inbound is the conversation of a message: a DM's own key, or the guild
// channel's (or thread's) key scoped by the group session setting, with
// the reply target set when the two differ, and the sender in the channel
// named (adapters.SetChannelUser).
func (e env) inbound(guild, channel, thread, user string) sessions.Inbound {
	in := sessions.Inbound{Sender: user}
	if guild == "" {
		in.Conv = Platform + ":dm:" + channel
		return in
	}
	base := Platform + ":" + guild + ":" + channel
	if thread != "" {
		base += ":" + thread
	}
	in.Conv = adapters.GroupConv(e.scope, base, thread != "", user)
	if in.Conv != base {
		in.Meta = map[string]string{sessions.MetaTarget: base}
	}
	adapters.SetChannelUser(&in, Platform+":"+guild+":"+channel, user, false)
	return in
}

// stripMention cuts the bot's mentions (<@id> and the older <@!id>) from
// text and reports whether there was one. After a mention that opens the
// text the separators go too (adapters.AfterMention), so "<@id>, /stop"
// is the command "/stop".
func stripMention(text, botID string) (string, bool) {
	text = strings.TrimSpace(text)
	if botID == "" {
		return text, false
	}
	found, leading := false, false
	for _, m := range []string{"<@" + botID + ">", "<@!" + botID + ">"} {
		if strings.Contains(text, m) {
			found = true
			leading = leading || strings.HasPrefix(text, m)
			// The mention goes with one space after it; the rest of the
			// text, line breaks and code blocks included, stays as
			// written.
			text = strings.ReplaceAll(strings.ReplaceAll(text, m+" ", ""), m, "")
		}
	}
	if leading {
		text = adapters.AfterMention(text)
	}
	return strings.TrimSpace(text), found
}

// commandName reports whether s is an application command name herald
// can route: lower-case letters, digits, '-' and '_', 1 to 32 of them.
func commandName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// commandText is "/name" and the options' values in order, a subcommand
// by its name; it reads as the command typed out.
func commandText(name string, opts []*discordgo.ApplicationCommandInteractionDataOption) string {
	parts := []string{"/" + name}
	var walk func([]*discordgo.ApplicationCommandInteractionDataOption)
	walk = func(opts []*discordgo.ApplicationCommandInteractionDataOption) {
		for _, o := range opts {
			if o == nil {
				continue
			}
			switch o.Type {
			case discordgo.ApplicationCommandOptionSubCommand, discordgo.ApplicationCommandOptionSubCommandGroup:
				parts = append(parts, o.Name)
				walk(o.Options)
				continue
			}
			if v := optionValue(o.Value); v != "" {
				parts = append(parts, v)
			}
		}
	}
	walk(opts)
	return strings.Join(parts, " ")
}

func optionValue(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return fmt.Sprint(v)
}
