package telegramfake

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// maxText is sendMessage's limit in UTF-16 code units. The fake measures
// the text as sent, markup included, which is stricter than Telegram
// (it counts the text after parsing).
const maxText = 4096

func (s *Server) sendMessageLocked(p map[string]string) answer {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return fail(http.StatusBadRequest, "Bad Request: chat not found")
	}
	if a, bad := s.checkTextLocked(p); bad {
		return a
	}
	m := &Sent{Chat: chat, Text: p["text"], ParseMode: p["parse_mode"]}
	if a, bad := s.fillSentLocked(m, p); bad {
		return a
	}
	return ok(s.messageJSON(m))
}

// fillSentLocked reads the thread and the reply of a message the bot
// sends, numbers it and keeps it.
func (s *Server) fillSentLocked(m *Sent, p map[string]string) (answer, bool) {
	m.Thread, _ = strconv.Atoi(p["message_thread_id"])
	if rp := p["reply_parameters"]; rp != "" {
		var v struct {
			MessageID int `json:"message_id"`
		}
		if json.Unmarshal([]byte(rp), &v) != nil {
			return fail(http.StatusBadRequest, "Bad Request: can't parse reply parameters JSON object"), true
		}
		m.ReplyTo = v.MessageID
	}
	if a, bad := readButtons(m, p); bad {
		return a, true
	}
	m.ID = s.newMessageIDLocked(m.Chat)
	if s.messages[m.Chat] == nil {
		s.messages[m.Chat] = map[int]*Sent{}
	}
	s.messages[m.Chat][m.ID] = m
	return answer{}, false
}

func (s *Server) editMessageTextLocked(p map[string]string) answer {
	m, found := s.lookupLocked(p)
	if !found {
		return fail(http.StatusBadRequest, "Bad Request: message to edit not found")
	}
	if a, bad := s.checkTextLocked(p); bad {
		return a
	}
	was := m.Buttons
	if a, bad := readButtons(m, p); bad {
		m.Buttons = was
		return a
	}
	if m.Text == p["text"] && m.ParseMode == p["parse_mode"] && slices.EqualFunc(was, m.Buttons, slices.Equal) {
		return fail(http.StatusBadRequest, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	m.Text, m.ParseMode = p["text"], p["parse_mode"]
	m.Edits++
	return ok(s.messageJSON(m))
}

// readButtons sets m's inline keyboard from p's reply_markup: none when
// p has none.
func readButtons(m *Sent, p map[string]string) (answer, bool) {
	m.Buttons = nil
	raw := p["reply_markup"]
	if raw == "" {
		return answer{}, false
	}
	var v struct {
		InlineKeyboard [][]Button `json:"inline_keyboard"`
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return fail(http.StatusBadRequest, "Bad Request: can't parse reply keyboard markup JSON object"), true
	}
	for _, row := range v.InlineKeyboard {
		for _, b := range row {
			if b.Text == "" || len(b.Data) > 64 {
				return fail(http.StatusBadRequest, "Bad Request: BUTTON_DATA_INVALID"), true
			}
		}
	}
	if len(v.InlineKeyboard) > 0 {
		m.Buttons = v.InlineKeyboard
	}
	return answer{}, false
}

func (s *Server) deleteMessageLocked(p map[string]string) answer {
	m, found := s.lookupLocked(p)
	if !found {
		return fail(http.StatusBadRequest, "Bad Request: message to delete not found")
	}
	m.Deleted = true
	return ok(true)
}

// chatActions are the actions sendChatAction knows.
var chatActions = []string{"typing", "upload_photo", "record_video", "upload_video", "record_voice",
	"upload_voice", "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note"}

func (s *Server) sendChatActionLocked(p map[string]string) answer {
	if _, err := strconv.ParseInt(p["chat_id"], 10, 64); err != nil {
		return fail(http.StatusBadRequest, "Bad Request: chat not found")
	}
	if !slices.Contains(chatActions, p["action"]) {
		return fail(http.StatusBadRequest, "Bad Request: wrong parameter action in request")
	}
	return ok(true)
}

// checkTextLocked refuses empty, too long or (when scripted, or for bad
// HTML) unparsable text the way Telegram does.
func (s *Server) checkTextLocked(p map[string]string) (answer, bool) {
	text := p["text"]
	switch {
	case strings.TrimSpace(text) == "":
		return fail(http.StatusBadRequest, "Bad Request: message text is empty"), true
	case len(utf16.Encode([]rune(text))) > maxText:
		return fail(http.StatusBadRequest, "Bad Request: message is too long"), true
	case p["parse_mode"] != "" && s.rejectFmt > 0:
		s.rejectFmt--
		return fail(http.StatusBadRequest, ParseError), true
	case strings.EqualFold(p["parse_mode"], "HTML"):
		if why := checkHTML(text); why != "" {
			return fail(http.StatusBadRequest, "Bad Request: can't parse entities: "+why), true
		}
	}
	return answer{}, false
}

func (s *Server) lookupLocked(p map[string]string) (*Sent, bool) {
	chat, err1 := strconv.ParseInt(p["chat_id"], 10, 64)
	id, err2 := strconv.Atoi(p["message_id"])
	if err1 != nil || err2 != nil {
		return nil, false
	}
	m, found := s.messages[chat][id]
	if !found || m.Deleted {
		return nil, false
	}
	return m, true
}

// newMessageIDLocked numbers messages per chat, as Telegram does, for
// the bot's messages and the users' alike.
func (s *Server) newMessageIDLocked(chat int64) int {
	s.nextMsg[chat]++
	return s.nextMsg[chat]
}

func (s *Server) messageJSON(m *Sent) map[string]any {
	out := map[string]any{
		"message_id": m.ID,
		"date":       time.Now().Unix(),
		"chat":       map[string]any{"id": m.Chat, "type": chatType(m.Chat)},
		"from":       map[string]any{"id": s.botID, "is_bot": true, "first_name": "Herald", "username": s.botName},
	}
	switch m.Media {
	case "":
		out["text"] = m.Text
	case "photo":
		out["photo"] = []map[string]any{{"file_id": "sent-photo-" + strconv.Itoa(m.ID), "file_unique_id": "sp" + strconv.Itoa(m.ID),
			"width": 800, "height": 600, "file_size": len(m.Data)}}
	default:
		out["document"] = map[string]any{"file_id": "sent-doc-" + strconv.Itoa(m.ID), "file_unique_id": "sd" + strconv.Itoa(m.ID),
			"file_name": m.FileName, "file_size": len(m.Data)}
	}
	if m.Media != "" && m.Text != "" {
		out["caption"] = m.Text
	}
	if m.Thread != 0 {
		out["message_thread_id"] = m.Thread
		out["is_topic_message"] = true
	}
	return out
}

// chatType guesses a chat's type from its id: users have positive ids,
// groups negative ones.
func chatType(chat int64) string {
	if chat > 0 {
		return "private"
	}
	return "supergroup"
}

// htmlTags are the tags Telegram's HTML parse mode knows.
var htmlTags = []string{"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span",
	"tg-spoiler", "a", "code", "pre", "blockquote", "tg-emoji"}

// checkHTML says why Telegram would refuse text in parse mode HTML, or
// "" when it would take it: unknown or crossed tags, tags left open, and
// a '&' that starts no entity.
func checkHTML(text string) string {
	var open []string
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '<':
			end := strings.IndexByte(text[i:], '>')
			if end < 0 {
				return "unclosed start tag at byte offset " + strconv.Itoa(i)
			}
			tag := text[i+1 : i+end]
			name, closing := strings.CutPrefix(tag, "/")
			name, _, _ = strings.Cut(name, " ")
			if !slices.Contains(htmlTags, name) {
				return "unsupported start tag \"" + name + "\" at byte offset " + strconv.Itoa(i)
			}
			if closing {
				if len(open) == 0 || open[len(open)-1] != name {
					return "unmatched end tag at byte offset " + strconv.Itoa(i)
				}
				open = open[:len(open)-1]
			} else {
				open = append(open, name)
			}
			i += end
		case '&':
			rest := text[i:]
			semi := strings.IndexByte(rest, ';')
			if semi < 0 || !validEntity(rest[1:semi]) {
				return "unsupported entity at byte offset " + strconv.Itoa(i)
			}
		}
	}
	if len(open) > 0 {
		return "can't find end tag corresponding to start tag \"" + open[len(open)-1] + "\""
	}
	return ""
}

func validEntity(name string) bool {
	switch name {
	case "lt", "gt", "amp", "quot":
		return true
	}
	if n, found := strings.CutPrefix(name, "#"); found {
		if h, hex := strings.CutPrefix(strings.ToLower(n), "x"); hex {
			_, err := strconv.ParseUint(h, 16, 32)
			return err == nil
		}
		_, err := strconv.ParseUint(n, 10, 32)
		return err == nil
	}
	return false
}
