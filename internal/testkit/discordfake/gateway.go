package discordfake

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// writeTimeout bounds one websocket write, so a client that stopped
// reading cannot hang the test.
const writeTimeout = 5 * time.Second

// frame is one gateway payload.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// pendingEvent is a dispatch queued while no session is connected.
type pendingEvent struct {
	t string
	d json.RawMessage
}

// gwSession is a gateway session: its id and every dispatch sent in it,
// for replay on RESUME.
type gwSession struct {
	id  string
	seq int64
	log []frame
}

// gwConn is one websocket connection. ready is set once it identified or
// resumed; dispatches go only to a ready connection.
type gwConn struct {
	ws    *websocket.Conn
	wmu   sync.Mutex
	ready bool
}

func (c *gwConn) send(f frame) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	_ = c.ws.WriteJSON(f)
}

// gateway is the websocket side of the Server; guarded by Server.mu.
type gateway struct {
	conn       *gwConn
	session    *gwSession
	sessions   int
	pending    []pendingEvent
	identifies int
	resumes    int
	intents    int
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// User is a Discord user in a dispatched event.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

// MessageEvent is a MESSAGE_CREATE to dispatch. An empty ID gets a fresh
// snowflake; an empty GuildID makes it a DM.
type MessageEvent struct {
	ID        string
	ChannelID string
	GuildID   string
	Author    User
	Content   string
	Mentions  []User
	Type      int
	WebhookID string
	// Attachments are files put on the fake (PutAttachment); Flags are
	// the message's (MessageFlagVoice for a voice message).
	Attachments []Attachment
	Flags       int
}

// Option is one application command option in an InteractionEvent.
type Option struct {
	Name  string `json:"name"`
	Type  int    `json:"type"` // 3 string, 4 integer, 5 boolean, 10 number
	Value any    `json:"value"`
}

// InteractionEvent is an application command (INTERACTION_CREATE of type
// 2) to dispatch. At is when it happened (its id's time); zero is now.
type InteractionEvent struct {
	ChannelID   string
	GuildID     string
	ChannelType int    // ChannelText, ChannelDM or ChannelPublicThread
	ParentID    string // the thread's parent channel
	User        User
	Name        string
	Options     []Option
	At          time.Time
}

// Interaction is a dispatched interaction's id and token.
type Interaction struct {
	ID, Token string
}

// SendMessage dispatches a MESSAGE_CREATE and returns the message id.
func (s *Server) SendMessage(m MessageEvent) string {
	if m.ID == "" {
		m.ID = s.Snowflake(time.Now())
	}
	mentions := m.Mentions
	if mentions == nil {
		mentions = []User{}
	}
	atts := make([]map[string]any, len(m.Attachments))
	for i, a := range m.Attachments {
		atts[i] = a.object()
	}
	d := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "author": m.Author, "content": m.Content,
		"timestamp": time.Now().UTC().Format(time.RFC3339), "type": m.Type, "mentions": mentions,
		"attachments": atts, "embeds": []any{}, "flags": m.Flags,
	}
	if m.GuildID != "" {
		d["guild_id"] = m.GuildID
	}
	if m.WebhookID != "" {
		d["webhook_id"] = m.WebhookID
	}
	s.mu.Lock()
	s.keepLocked(m.ChannelID, m.ID, d)
	s.mu.Unlock()
	s.Dispatch("MESSAGE_CREATE", d)
	return m.ID
}

// SendInteraction dispatches an application command; its token is
// accepted by the callback and follow-up routes from then on.
func (s *Server) SendInteraction(e InteractionEvent) Interaction {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	id := s.Snowflake(at)
	in := Interaction{ID: id, Token: "itoken-" + id}
	s.mu.Lock()
	s.inters[in.Token] = &interaction{id: in.ID, token: in.Token, channelID: e.ChannelID}
	s.mu.Unlock()

	opts := e.Options
	if opts == nil {
		opts = []Option{}
	}
	ch := map[string]any{"id": e.ChannelID, "type": e.ChannelType}
	if e.ParentID != "" {
		ch["parent_id"] = e.ParentID
	}
	d := map[string]any{
		"id": in.ID, "application_id": s.opts.AppID, "type": 2, "token": in.Token, "version": 1,
		"channel_id": e.ChannelID, "channel": ch,
		"data": map[string]any{"id": "800000000000000001", "name": e.Name, "type": 1, "options": opts},
	}
	if e.GuildID != "" {
		d["guild_id"] = e.GuildID
		d["member"] = map[string]any{"user": e.User, "roles": []string{}}
	} else {
		d["user"] = e.User
	}
	s.Dispatch("INTERACTION_CREATE", d)
	return in
}

// Dispatch sends event t with data d to the connected session, or queues
// it until a session identifies or resumes.
func (s *Server) Dispatch(t string, d any) {
	raw, err := json.Marshal(d)
	if err != nil {
		s.t.Fatalf("discordfake: marshal %s: %v", t, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.conn; c != nil && c.ready && s.gw.session != nil {
		s.dispatchLocked(c, t, raw)
	} else {
		s.gw.pending = append(s.gw.pending, pendingEvent{t: t, d: raw})
	}
	s.notify()
}

// DropConnection closes the websocket without a close frame, as a network
// failure would; the session stays resumable.
func (s *Server) DropConnection() {
	s.mu.Lock()
	c := s.gw.conn
	s.gw.conn = nil
	if c != nil {
		c.ready = false
	}
	s.notify()
	s.mu.Unlock()
	if c != nil {
		_ = c.ws.Close()
	}
}

// Connected reports whether a session is identified or resumed on a live
// websocket.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.conn != nil && s.gw.conn.ready
}

// Identifies counts IDENTIFY payloads received.
func (s *Server) Identifies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.identifies
}

// Resumes counts RESUME payloads received.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.resumes
}

// Intents is the intents bit set of the last IDENTIFY.
func (s *Server) Intents() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gw.intents
}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &gwConn{ws: ws}
	s.mu.Lock()
	old := s.gw.conn
	s.gw.conn = c
	s.mu.Unlock()
	if old != nil {
		_ = old.ws.Close()
	}
	defer func() {
		_ = ws.Close()
		s.mu.Lock()
		if s.gw.conn == c {
			s.gw.conn = nil
		}
		s.notify()
		s.mu.Unlock()
	}()

	hello, _ := json.Marshal(map[string]int64{"heartbeat_interval": s.opts.Interval.Milliseconds()})
	c.send(frame{Op: 10, D: hello})
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Op {
		case 1: // heartbeat
			c.send(frame{Op: 11})
		case 2:
			s.identify(c, f.D)
		case 6:
			s.resume(c, f.D)
		}
	}
}

func (s *Server) tokenOK(token string) bool {
	return strings.TrimPrefix(token, "Bot ") == s.opts.Token
}

func (s *Server) identify(c *gwConn, d json.RawMessage) {
	var id struct {
		Token   string `json:"token"`
		Intents int    `json:"intents"`
	}
	_ = json.Unmarshal(d, &id)
	if !s.tokenOK(id.Token) {
		c.wmu.Lock()
		_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4004, "Authentication failed."))
		c.wmu.Unlock()
		_ = c.ws.Close()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.identifies++
	s.gw.intents = id.Intents
	s.gw.sessions++
	s.gw.session = &gwSession{id: "fake-session-" + strconv.Itoa(s.gw.sessions)}
	ready, _ := json.Marshal(map[string]any{
		"v": 9, "session_id": s.gw.session.id, "user": s.botUser(), "guilds": []any{}, "private_channels": []any{},
		"application":        map[string]any{"id": s.opts.AppID, "flags": 0},
		"resume_gateway_url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws",
	})
	c.ready = true
	s.dispatchLocked(c, "READY", ready)
	if s.opts.LoseWhileAway {
		s.gw.pending = nil
	}
	s.flushLocked(c)
	s.notify()
}

func (s *Server) resume(c *gwConn, d json.RawMessage) {
	var r struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	_ = json.Unmarshal(d, &r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.resumes++
	sess := s.gw.session
	if !s.tokenOK(r.Token) || sess == nil || sess.id != r.SessionID {
		// Invalid session, not resumable: the client identifies anew.
		c.send(frame{Op: 9, D: json.RawMessage("false")})
		s.notify()
		return
	}
	for _, f := range sess.log {
		if *f.S > r.Seq {
			c.send(f)
		}
	}
	c.ready = true
	s.dispatchLocked(c, "RESUMED", json.RawMessage("{}"))
	s.flushLocked(c)
	s.notify()
}

// dispatchLocked numbers and sends one dispatch in the current session;
// the caller holds s.mu, so sequence numbers go out in order.
func (s *Server) dispatchLocked(c *gwConn, t string, d json.RawMessage) {
	sess := s.gw.session
	sess.seq++
	seq, typ := sess.seq, t
	f := frame{Op: 0, D: d, S: &seq, T: &typ}
	sess.log = append(sess.log, f)
	c.send(f)
}

func (s *Server) flushLocked(c *gwConn) {
	for _, p := range s.gw.pending {
		s.dispatchLocked(c, p.t, p.d)
	}
	s.gw.pending = nil
}

// PressEvent is a person pressing a button of a message the bot
// created: an INTERACTION_CREATE of type 3 (message component).
type PressEvent struct {
	MessageID   string // the bot's message
	CustomID    string // the button's
	GuildID     string // empty in a DM
	ChannelType int    // ChannelText, ChannelDM or ChannelPublicThread
	ParentID    string // the thread's parent channel
	User        User
}

// SendPress dispatches the press p; its token is accepted by the
// callback and follow-up routes from then on. It fails the test when the
// bot has no such message or button.
func (s *Server) SendPress(p PressEvent) Interaction {
	s.t.Helper()
	m, ok := s.Message(p.MessageID)
	found := false
	for _, r := range m.Components {
		for _, b := range r.Components {
			found = found || b.CustomID == p.CustomID
		}
	}
	if !ok || !found {
		s.t.Fatalf("discordfake: no button %q on message %s", p.CustomID, p.MessageID)
	}
	id := s.Snowflake(time.Now())
	in := Interaction{ID: id, Token: "itoken-" + id}
	s.mu.Lock()
	s.inters[in.Token] = &interaction{id: in.ID, token: in.Token, channelID: m.ChannelID}
	s.mu.Unlock()
	ch := map[string]any{"id": m.ChannelID, "type": p.ChannelType}
	if p.ParentID != "" {
		ch["parent_id"] = p.ParentID
	}
	msg := map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "type": 0,
		"author": s.botUser(), "components": m.Components}
	d := map[string]any{
		"id": in.ID, "application_id": s.opts.AppID, "type": 3, "token": in.Token, "version": 1,
		"channel_id": m.ChannelID, "channel": ch, "message": msg,
		"data": map[string]any{"custom_id": p.CustomID, "component_type": 2},
	}
	if p.GuildID != "" {
		d["guild_id"] = p.GuildID
		d["member"] = map[string]any{"user": p.User, "roles": []string{}}
	} else {
		d["user"] = p.User
	}
	s.Dispatch("INTERACTION_CREATE", d)
	return in
}
