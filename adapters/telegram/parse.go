package telegram

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Meta keys the adapter sets on an Inbound besides sessions.MetaTarget.
const (
	// MetaMessageID is the message's own id in its chat, without the chat.
	MetaMessageID = "telegram.message_id"
	// MetaChatType is "private", "group" or "supergroup".
	MetaChatType = "telegram.chat_type"
)

// The wire shapes of an update, as far as herald reads them. They are
// herald's own rather than the SDK's models.Update: that decodes every
// field of a message, and its decoders of variant types (message
// origins, reactions, chat members) fail the whole update on a variant
// they do not know, so a new Bot API feature in an unrelated field would
// make a plain text message unreadable.
type (
	wireUpdate struct {
		ID       *int64          `json:"update_id"`
		Message  json.RawMessage `json:"message"`
		Callback json.RawMessage `json:"callback_query"`
	}
	// wireCallback is a press of a button of the bot's message. Its
	// message is the one pressed, as far as Telegram still shows it (an
	// old one comes as an inaccessible message: chat and id alone).
	wireCallback struct {
		ID      string       `json:"id"`
		From    wireUser     `json:"from"`
		Message *wireMessage `json:"message"`
		Data    string       `json:"data"`
	}
	wireMessage struct {
		ID              int64        `json:"message_id"`
		ThreadID        int64        `json:"message_thread_id"`
		IsTopic         bool         `json:"is_topic_message"`
		From            *wireUser    `json:"from"`
		Chat            wireChat     `json:"chat"`
		Text            string       `json:"text"`
		Entities        []wireEntity `json:"entities"`
		Caption         string       `json:"caption"`
		CaptionEntities []wireEntity `json:"caption_entities"`
		ReplyTo         *wireMessage `json:"reply_to_message"`
		Document        *wireFile    `json:"document"`
		Photo           []wireFile   `json:"photo"`
		Audio           *wireFile    `json:"audio"`
		Voice           *wireFile    `json:"voice"`
		Video           *wireFile    `json:"video"`
	}
	wireUser struct {
		ID       int64  `json:"id"`
		IsBot    bool   `json:"is_bot"`
		Username string `json:"username"`
	}
	wireChat struct {
		ID   int64  `json:"id"`
		Type string `json:"type"`
	}
	wireEntity struct {
		Type   string    `json:"type"`
		Offset int       `json:"offset"` // in UTF-16 code units
		Length int       `json:"length"`
		User   *wireUser `json:"user"`
	}
	wireFile struct {
		FileID   string `json:"file_id"`
		FileName string `json:"file_name"`
		MIME     string `json:"mime_type"`
		Size     int64  `json:"file_size"`
	}
)

// reader is what reading an update needs besides the update.
type reader struct {
	bot     identity
	trigger string // config.TriggerMention or config.TriggerAll
	scope   string // adapters.Scope*
}

// parsed is one update read: the inbound it makes, or why it makes none.
type parsed struct {
	UpdateID int64
	In       sessions.Inbound // when Skip is ""
	UserName string           // the sender's username, for the allow-list
	Skip     string           // why the update is not for herald, or ""
	// Callback is the id of the callback query a press came in, which
	// is answered once the press was delivered; "" for a message.
	Callback string
}

// parseUpdate reads one update. It has no side effects, so a fuzz
// target drives it directly. An update it cannot read at all (not JSON,
// no update_id) is an Invalid error; one it reads but that is not for
// herald comes back with Skip set, so its update_id can still be
// confirmed.
func parseUpdate(raw []byte, rd reader) (parsed, error) {
	const op = "telegram.parseUpdate"
	var u wireUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return parsed{}, errs.Wrap(op, errs.Invalid, err)
	}
	if u.ID == nil {
		return parsed{}, errs.E(op, errs.Invalid, "the update has no update_id")
	}
	p := parsed{UpdateID: *u.ID}
	if present(u.Callback) {
		var cb wireCallback
		if err := json.Unmarshal(u.Callback, &cb); err != nil {
			p.Skip = "unreadable callback query: " + err.Error()
			return p, nil
		}
		p.Skip = readPress(&cb, rd, &p)
		return p, nil
	}
	if !present(u.Message) {
		p.Skip = "not a new message"
		return p, nil
	}
	var m wireMessage
	if err := json.Unmarshal(u.Message, &m); err != nil {
		p.Skip = "unreadable message: " + err.Error()
		return p, nil
	}
	p.Skip = readMessage(&m, rd, &p)
	return p, nil
}

// readMessage fills p from m and returns why m is not for herald, or "".
func readMessage(m *wireMessage, rd reader, p *parsed) string {
	var group bool
	switch m.Chat.Type {
	case "private":
	case "group", "supergroup":
		group = true
	default:
		return "a " + strconv.Quote(m.Chat.Type) + " chat"
	}
	switch {
	case m.From == nil:
		return "no sender (an anonymous admin or a channel)"
	case m.From.IsBot:
		return "sent by a bot"
	}
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	atts := attachments(m)
	if strings.TrimSpace(text) == "" && len(atts) == 0 {
		return "nothing herald reads (no text, caption or file)"
	}
	units := utf16.Encode([]rune(text))
	if to, ok := commandTarget(text); ok && to != "" && !strings.EqualFold(to, rd.bot.Username) {
		return "a command for another bot"
	}
	if group && rd.trigger != config.TriggerAll && !addressed(m, text, units, ents, rd.bot) {
		return "a group message not addressed to the bot"
	}

	sender := strconv.FormatInt(m.From.ID, 10)
	chat := strconv.FormatInt(m.Chat.ID, 10)
	conv, meta := place(m, sender, rd.scope)
	id := strconv.FormatInt(m.ID, 10)
	meta[MetaMessageID] = id
	p.UserName = m.From.Username
	p.In = sessions.Inbound{
		Conv:   conv,
		Sender: sender,
		// Telegram numbers messages per chat, so "<chat>:<message_id>" is
		// unique on its own, whatever scope the store dedupes in, and the
		// same on every redelivery of the update (by webhook or poll).
		// update_id would be unique too, but Send could not reply to it:
		// the outbox's ReplyTo is this id, and Send reads the message id
		// back from after the colon.
		MessageID:   chat + ":" + id,
		Text:        withoutLeadingMention(text, units, ents, rd.bot),
		Attachments: atts,
		Meta:        meta,
	}
	return ""
}

// present reports whether an update field came with a value.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// place is the conversation a message of sender in m's chat belongs
// to, and the meta that says where its replies go: the chat's key, its
// topic's in a forum topic, scoped to sender in a group as the group
// session scope says.
func place(m *wireMessage, sender, scope string) (conv string, meta map[string]string) {
	base := Platform + ":" + strconv.FormatInt(m.Chat.ID, 10)
	inThread := m.IsTopic && m.ThreadID != 0
	if inThread {
		base += ":" + strconv.FormatInt(m.ThreadID, 10)
	}
	conv = base
	if m.Chat.Type != "private" {
		conv = adapters.GroupConv(scope, base, inThread, sender)
	}
	meta = map[string]string{MetaChatType: m.Chat.Type}
	if conv != base {
		meta[sessions.MetaTarget] = base
	}
	return conv, meta
}

// readPress fills p from a press of a button and returns why it is not
// for herald, or "". A press needs no mention in a group: the button is
// herald's own. Its text is the button's data, its sender the person
// who pressed, and it belongs to the conversation a message of theirs
// in that chat would.
func readPress(cb *wireCallback, rd reader, p *parsed) string {
	m := cb.Message
	switch {
	case cb.ID == "":
		return "a callback query without an id"
	case m == nil:
		return "a press of an inline message's button"
	case strings.TrimSpace(cb.Data) == "":
		return "a press without data (a game's button)"
	case cb.From.IsBot:
		return "pressed by a bot"
	}
	switch m.Chat.Type {
	case "private", "group", "supergroup":
	default:
		return "a press in a " + strconv.Quote(m.Chat.Type) + " chat"
	}
	sender := strconv.FormatInt(cb.From.ID, 10)
	conv, meta := place(m, sender, rd.scope)
	meta[sessions.MetaPressed] = strconv.FormatInt(m.ID, 10)
	p.UserName = cb.From.Username
	p.Callback = cb.ID
	p.In = sessions.Inbound{
		Conv:   conv,
		Sender: sender,
		// A callback query's id is unique, and the same on every
		// redelivery of its update.
		MessageID: adapters.PressPrefix + cb.ID,
		Text:      cb.Data,
		Meta:      meta,
	}
	return ""
}

// addressed reports whether a group message is for the bot: a reply to
// one of its messages, a mention of it, or a command.
func addressed(m *wireMessage, text string, units []uint16, ents []wireEntity, me identity) bool {
	if r := m.ReplyTo; r != nil && r.From != nil && me.ID != 0 && r.From.ID == me.ID {
		// In a forum every message of a topic replies to the topic's
		// first message; that is not a reply to the bot.
		if !(m.IsTopic && r.ID == m.ThreadID) {
			return true
		}
	}
	if _, ok := commandTarget(text); ok {
		return true
	}
	for _, e := range ents {
		switch e.Type {
		case "mention":
			if me.Username != "" && strings.EqualFold(entityText(units, e), "@"+me.Username) {
				return true
			}
		case "text_mention":
			if e.User != nil && me.ID != 0 && e.User.ID == me.ID {
				return true
			}
		}
	}
	return false
}

// commandTarget reads a leading "/name" or "/name@bot": ok when text is
// a command, and the bot it names ("" when none, which means every bot
// in the chat, herald included). It reads commands as the router does.
func commandTarget(text string) (to string, ok bool) {
	if _, _, ok := sessions.ParseCommand(text); !ok {
		return "", false
	}
	_, to, _ = strings.Cut(strings.Fields(text)[0], "@")
	return to, true
}

// withoutLeadingMention drops a mention of the bot that opens the text,
// so "@herald_bot /stop" reaches the router as the command "/stop".
func withoutLeadingMention(text string, units []uint16, ents []wireEntity, me identity) string {
	for _, e := range ents {
		if e.Type != "mention" || e.Offset != 0 || me.Username == "" {
			continue
		}
		if !strings.EqualFold(entityText(units, e), "@"+me.Username) {
			continue
		}
		rest := adapters.AfterMention(string(utf16.Decode(units[e.Length:])))
		if strings.TrimSpace(rest) != "" {
			return rest
		}
	}
	return text
}

// entityText is the text an entity covers, or "" when its offsets do
// not fit the text.
func entityText(units []uint16, e wireEntity) string {
	if e.Offset < 0 || e.Length <= 0 || e.Offset > len(units) || e.Length > len(units)-e.Offset {
		return ""
	}
	return string(utf16.Decode(units[e.Offset : e.Offset+e.Length]))
}

// attachments lists the files that came with m, each with what it is
// to the agent and the file id getFile downloads it by (Fetch). The
// file's URL is never kept: it holds the bot token. Telegram names
// documents and some audio; a photo or a voice note gets a name made of
// its message id.
func attachments(m *wireMessage) []sessions.Attachment {
	id := strconv.FormatInt(m.ID, 10)
	var out []sessions.Attachment
	add := func(f *wireFile, kind sessions.AttachmentKind, what, mimeType string) {
		if f == nil || f.FileID == "" {
			return
		}
		mt := cmp.Or(f.MIME, adapters.MIMEOf(f.FileName), mimeType)
		out = append(out, sessions.Attachment{
			Name:       adapters.FileName(f.FileName, what, id, mt),
			MIME:       mt,
			Size:       f.Size,
			Kind:       cmp.Or(kind, adapters.KindOf(mt)),
			PlatformID: f.FileID,
		})
	}
	if n := len(m.Photo); n > 0 {
		add(&m.Photo[n-1], sessions.AttachImage, "photo", "image/jpeg") // the largest size comes last
	}
	add(m.Voice, sessions.AttachVoice, "voice", "audio/ogg")
	add(m.Audio, sessions.AttachAudio, "audio", "audio/mpeg")
	// A document's kind is its type's: an image sent as a file is still
	// an image to the agent. A video is a document: no model here
	// watches one.
	add(m.Document, "", "document", "application/octet-stream")
	add(m.Video, sessions.AttachDocument, "video", "video/mp4")
	return out
}
