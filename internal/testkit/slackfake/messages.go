package slackfake

import (
	"encoding/json"
	"fmt"
	"net/url"
	"unicode/utf8"
)

// Message is a message the bot posted, as it stands now.
type Message struct {
	Channel, TS, Thread string
	Text                string
	Blocks              []Block // nil when it has none
	Updates             int
	Deleted             bool
}

// Block is a Block Kit block, as far as the fake reads one: a section's
// text, an actions block's buttons.
type Block struct {
	Type     string    `json:"type"`
	BlockID  string    `json:"block_id,omitempty"`
	Text     *Text     `json:"text,omitempty"`
	Elements []Element `json:"elements,omitempty"`
}

// Text is a text object.
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Element is a block element: a button.
type Element struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id"`
	Value    string `json:"value,omitempty"`
	Style    string `json:"style,omitempty"`
	Text     *Text  `json:"text,omitempty"`
}

// Buttons are the buttons of m's actions blocks, in order.
func (m Message) Buttons() []Element {
	var out []Element
	for _, b := range m.Blocks {
		if b.Type == "actions" {
			out = append(out, b.Elements...)
		}
	}
	return out
}

// Message returns the bot's message ts in channel as it stands; ok is
// false when the bot posted none there.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[channel+"/"+ts]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// postLocked keeps a message chat.postMessage posted at ts, or says why
// Slack would refuse it.
func (s *Server) postLocked(p url.Values, ts string) string {
	blocks, why := readBlocks(p)
	if why != "" {
		return why
	}
	s.messages[p.Get("channel")+"/"+ts] = &Message{Channel: p.Get("channel"), TS: ts, Thread: p.Get("thread_ts"),
		Text: p.Get("text"), Blocks: blocks}
	return ""
}

// updateLocked applies a chat.update: the text, and the blocks when the
// call has any ("[]" removes them; none keeps them). An update of a
// message the bot did not post, or deleted, is refused as Slack refuses
// it.
func (s *Server) updateLocked(p url.Values) string {
	m, ok := s.messages[p.Get("channel")+"/"+p.Get("ts")]
	if !ok || m.Deleted {
		return "message_not_found"
	}
	blocks, why := readBlocks(p)
	if why != "" {
		return why
	}
	m.Text = p.Get("text")
	if p.Has("blocks") {
		m.Blocks = blocks
	}
	m.Updates++
	return ""
}

// readBlocks reads a call's blocks, checking what Slack checks of them:
// a section's text within 3,000 characters, a button's text and
// action_id, action_ids unique in the message.
func readBlocks(p url.Values) ([]Block, string) {
	raw := p.Get("blocks")
	if raw == "" {
		return nil, ""
	}
	var blocks []Block
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, "invalid_blocks_format"
	}
	ids := map[string]bool{}
	for _, b := range blocks {
		switch b.Type {
		case "section":
			if b.Text == nil || b.Text.Text == "" || utf8.RuneCountInString(b.Text.Text) > 3000 {
				return nil, "invalid_blocks"
			}
		case "actions":
			for _, e := range b.Elements {
				if e.Type != "button" || e.ActionID == "" || ids[e.ActionID] || e.Text == nil || e.Text.Text == "" {
					return nil, "invalid_blocks"
				}
				ids[e.ActionID] = true
			}
		}
	}
	if len(blocks) == 0 {
		return nil, ""
	}
	return blocks, ""
}

// Press is a person pressing a button of a message the bot posted.
type Press struct {
	Channel, TS string // the message
	ActionID    string // the button
	User        string
	UserName    string
	TriggerID   string // default "trig-<ts>-<action_id>"
}

// Press is the block_actions interaction Slack sends when p happens: the
// payload of an interactive envelope, and, as the form field payload,
// of the POST to the Interactivity Request URL (Form). It fails the
// test when the bot posted no such message or button.
func (s *Server) Press(p Press) []byte {
	s.t.Helper()
	m, ok := s.Message(p.Channel, p.TS)
	var button *Element
	for _, e := range m.Buttons() {
		if e.ActionID == p.ActionID {
			button = &e
		}
	}
	if !ok || m.Deleted || button == nil {
		s.t.Fatalf("slackfake: no button %q on message %s in %s", p.ActionID, p.TS, p.Channel)
	}
	if p.TriggerID == "" {
		p.TriggerID = fmt.Sprintf("trig-%s-%s", p.TS, p.ActionID)
	}
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false}
	msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "bot_id": s.BotID, "blocks": m.Blocks}
	if m.Thread != "" {
		container["thread_ts"] = m.Thread
		msg["thread_ts"] = m.Thread
	}
	b, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": "A0HERALD", "token": "legacy-verification-token",
		"team":      map[string]any{"id": s.TeamID, "domain": "herald-test"},
		"user":      map[string]any{"id": p.User, "username": p.UserName, "name": p.UserName, "team_id": s.TeamID},
		"channel":   map[string]any{"id": m.Channel, "name": "general"},
		"container": container, "message": msg, "trigger_id": p.TriggerID,
		"response_url": "https://hooks.slack.invalid/actions/1",
		"actions": []map[string]any{{"type": "button", "action_id": button.ActionID, "block_id": "herald_buttons",
			"value": button.Value, "text": button.Text, "action_ts": "1700000999.000001"}},
	})
	return b
}

// Form is an interaction payload as Slack posts it to the Interactivity
// Request URL.
func Form(payload []byte) []byte {
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}
