// Package discordfake is a fake Discord for tests: the REST API a bot
// uses (gateway discovery, channel messages with their files, typing,
// application commands, interaction callbacks and follow-up webhooks), a
// CDN path serving the attachments of the messages a test sends, and the gateway
// websocket (HELLO, heartbeat ACKs, IDENTIFY and READY, RESUME and
// RESUMED, dispatches with sequence numbers). The real discordgo client
// talks to it when its requests for discord.com are sent to URL().
//
// The bot's channel messages are kept as they stand (Message), their
// buttons (components) included, which a test presses (SendPress); an
// edit of a message the bot did not create, or deleted, is refused as
// Discord refuses it (404, Unknown Message).
//
// Every REST call is recorded; the next sends can be scripted to fail
// (429 with retry_after, 5xx, 403 with Discord's code and message), and
// the websocket can be dropped to exercise a resume.
package discordfake

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// APIPrefix is the path every REST route sits under, as discordgo builds
// it (API version 9).
const APIPrefix = "/api/v9"

// waitTimeout bounds Wait, so a stuck client fails the test fast.
const waitTimeout = 10 * time.Second

// discordEpoch is the first millisecond of 2015, where snowflakes count from.
const discordEpoch = 1420070400000

// contentLimit is Discord's message content limit in characters.
const contentLimit = 2000

// Route names a kind of REST call, for Calls and FailNext.
type Route string

const (
	RouteGateway  Route = "gateway"  // GET /gateway, /gateway/bot
	RouteMe       Route = "me"       // GET /users/@me
	RouteChannel  Route = "channel"  // GET /channels/{id}
	RouteMessage  Route = "message"  // POST /channels/{id}/messages
	RouteEdit     Route = "edit"     // PATCH /channels/{id}/messages/{id}
	RouteDelete   Route = "delete"   // DELETE /channels/{id}/messages/{id}
	RouteTyping   Route = "typing"   // POST /channels/{id}/typing
	RouteCommands Route = "commands" // PUT /applications/{app}[/guilds/{g}]/commands
	RouteCallback Route = "callback" // POST /interactions/{id}/{token}/callback
	RouteFollowup Route = "followup" // POST /webhooks/{app}/{token}
	RouteHistory  Route = "history"  // GET /channels/{id}/messages
)

// Options configure a Server; zero values take the defaults shown.
type Options struct {
	Token   string // the bot token without "Bot "; default "fake-token"
	BotID   string // the bot's user id; default "900000000000000001"
	AppID   string // the application id; default BotID
	BotName string // default "herald"
	// Interval is the heartbeat interval HELLO announces; default 45 s.
	Interval time.Duration
	// LoseWhileAway makes the fake forget, as Discord does, the events
	// dispatched while no connection was ready when a new session
	// identifies: only a RESUME of the session they were meant for gets
	// them. They stay in their channels' histories (GET
	// /channels/{id}/messages). Without it a new session gets them too.
	LoseWhileAway bool
}

// Call is one recorded REST request.
type Call struct {
	Route  Route
	Method string
	Path   string // without APIPrefix
	Body   []byte
	Status int // what the fake answered
	At     time.Time
}

// Message is a message the bot created: a channel message or an
// interaction follow-up.
type Message struct {
	ID        string
	ChannelID string
	Content   string
	ReplyTo   string // message_reference.message_id, if any
	Followup  bool   // sent through POST /webhooks/{app}/{token}
	Token     string // the interaction token of a follow-up
	// AllowedMentions is the request's allowed_mentions, raw.
	AllowedMentions json.RawMessage
	Files           []File // the files it carried, in order
	// Components are its action rows of buttons, as they stand
	// (Message), or as it was created (Messages).
	Components []Row
	At         time.Time
}

// Row is an action row of message components.
type Row struct {
	Type       int      `json:"type"` // 1
	Components []Button `json:"components"`
}

// Button is a button component.
type Button struct {
	Type     int    `json:"type"`  // 2
	Style    int    `json:"style"` // 1 primary, 2 secondary, 3 success, 4 danger
	Label    string `json:"label"`
	CustomID string `json:"custom_id"`
}

// Button styles.
const (
	StylePrimary   = 1
	StyleSecondary = 2
	StyleDanger    = 4
)

// Edit is a PATCH of a message's content.
type Edit struct {
	ChannelID, MessageID, Content string
	// Components are the edit's components: nil when it left them as
	// they were, empty when it removed them.
	Components *[]Row
}

// Callback is an interaction response.
type Callback struct {
	InteractionID string
	Token         string
	Type          int
	Data          json.RawMessage
	At            time.Time
}

// CommandSet is one bulk overwrite of application commands.
type CommandSet struct {
	AppID    string
	GuildID  string // empty for the global commands
	Commands []Command
}

// Command is an application command as registered.
type Command struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Options     []CommandOption `json:"options"`
}

// CommandOption is one option of a Command.
type CommandOption struct {
	Type        int    `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

// Channel is what GET /channels/{id} returns for a known channel.
type Channel struct {
	ID       string `json:"id"`
	GuildID  string `json:"guild_id,omitempty"`
	Type     int    `json:"type"`
	ParentID string `json:"parent_id,omitempty"`
}

// Channel types used by herald.
const (
	ChannelText         = 0
	ChannelDM           = 1
	ChannelPublicThread = 11
)

// Failure is a scripted error answer.
type Failure struct {
	Status     int
	Code       int    // Discord's JSON error code
	Message    string // Discord's JSON error message
	RetryAfter time.Duration
}

// RateLimit is a 429 asking to wait d, in the body and the headers.
func RateLimit(d time.Duration) Failure {
	return Failure{Status: http.StatusTooManyRequests, Message: "You are being rate limited.", RetryAfter: d}
}

// ServerError is a 500.
func ServerError() Failure {
	return Failure{Status: http.StatusInternalServerError, Message: "500: Internal Server Error"}
}

// Forbidden is a 403 with Discord's code and message (50001 Missing
// Access, 50013 Missing Permissions, 50007 Cannot send messages to this
// user).
func Forbidden(code int, message string) Failure {
	return Failure{Status: http.StatusForbidden, Code: code, Message: message}
}

type interaction struct {
	id, token, channelID string
	responded            bool
}

// Server is a fake Discord. Create it with New.
type Server struct {
	t    testing.TB
	opts Options
	srv  *httptest.Server

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every change, for Wait
	seq         int64         // snowflake counter
	calls       []Call
	messages    []Message
	edits       []Edit
	deletes     []string
	typing      []string
	callbacks   []Callback
	commands    []CommandSet
	channels    map[string]Channel
	history     map[string][]histMessage // by channel, oldest first
	inters      map[string]*interaction  // by token
	current     map[string]*Message      // the bot's channel messages as they stand, by id
	attachments map[string]Attachment    // PutAttachment's, by id
	failures    map[Route][]*Failure     // nil entries let a call through
	gw          gateway
}

// New starts a fake Discord; it stops when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = "fake-token"
	}
	if opts.BotID == "" {
		opts.BotID = "900000000000000001"
	}
	if opts.AppID == "" {
		opts.AppID = opts.BotID
	}
	if opts.BotName == "" {
		opts.BotName = "herald"
	}
	if opts.Interval <= 0 {
		opts.Interval = 45 * time.Second
	}
	s := &Server{
		t: t, opts: opts,
		changed:     make(chan struct{}),
		channels:    map[string]Channel{},
		history:     map[string][]histMessage{},
		inters:      map[string]*interaction{},
		current:     map[string]*Message{},
		attachments: map[string]Attachment{},
		failures:    map[Route][]*Failure{},
	}
	s.srv = httptest.NewServer(s.routes())
	t.Cleanup(s.close)
	return s
}

// URL is the base that replaces https://discord.com (platforms.discord.api_url).
func (s *Server) URL() string { return s.srv.URL }

// BotID is the bot's user id.
func (s *Server) BotID() string { return s.opts.BotID }

// AppID is the application id.
func (s *Server) AppID() string { return s.opts.AppID }

// Token is the bot token (without "Bot ").
func (s *Server) Token() string { return s.opts.Token }

func (s *Server) close() {
	s.DropConnection()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// notify wakes Wait; the caller holds s.mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait blocks until cond holds, failing the test after 10 s. cond may
// call the Server's accessors.
func (s *Server) Wait(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("discordfake: timed out waiting for %s", what)
		}
	}
}

// Snowflake makes a Discord id for time at, unique within the Server.
func (s *Server) Snowflake(at time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snowflake(at)
}

func (s *Server) snowflake(at time.Time) string {
	s.seq++
	ms := at.UnixMilli() - discordEpoch
	return strconv.FormatInt(ms<<22|(s.seq&0x3FFFFF), 10)
}

// SetChannel makes GET /channels/{id} answer c; others answer 404.
func (s *Server) SetChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = c
}

// FailNext makes the next n calls of route answer f.
func (s *Server) FailNext(route Route, n int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[route] = append(s.failures[route], &f)
	}
}

// FailAt lets the next k-1 calls of route through and makes the k-th
// answer f.
func (s *Server) FailAt(route Route, k int, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range k - 1 {
		s.failures[route] = append(s.failures[route], nil)
	}
	s.failures[route] = append(s.failures[route], &f)
}

// Calls returns the REST calls so far, optionally only those of routes.
func (s *Server) Calls(routes ...Route) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(routes) == 0 || contains(routes, c.Route) {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns the messages created so far, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Edits returns the message edits so far.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.edits...)
}

// Deletes returns the ids of the messages deleted so far.
func (s *Server) Deletes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.deletes...)
}

// Typing returns the channels a typing indicator was triggered in.
func (s *Server) Typing() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.typing...)
}

// Callbacks returns the interaction responses so far.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// CommandSets returns the bulk overwrites of application commands so far.
func (s *Server) CommandSets() []CommandSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]CommandSet(nil), s.commands...)
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// apiError is Discord's JSON error body.
type apiError struct {
	Message    string   `json:"message"`
	Code       int      `json:"code"`
	RetryAfter *float64 `json:"retry_after,omitempty"`
	Global     *bool    `json:"global,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeFailure(w http.ResponseWriter, f Failure) {
	body := apiError{Message: f.Message, Code: f.Code}
	if f.Status == http.StatusTooManyRequests {
		secs := f.RetryAfter.Seconds()
		global := false
		body.RetryAfter, body.Global = &secs, &global
		h := w.Header()
		h.Set("Retry-After", strconv.Itoa(int(f.RetryAfter.Round(time.Second)/time.Second)))
		h.Set("X-RateLimit-Limit", "5")
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
		h.Set("X-RateLimit-Bucket", "fake-bucket")
		h.Set("X-RateLimit-Scope", "user")
	}
	writeJSON(w, f.Status, body)
}

// handler is one REST route: it gets the request body and answers with a
// status and a JSON value (nil for none).
type handler func(r *http.Request, body []byte) (int, any)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, route Route, auth bool, h handler) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+APIPrefix+path, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, route, auth, h)
		})
	}
	api("GET /gateway", RouteGateway, false, s.gatewayURL)
	api("GET /gateway/bot", RouteGateway, true, s.gatewayBot)
	api("GET /users/@me", RouteMe, true, s.me)
	api("GET /channels/{id}", RouteChannel, true, s.channel)
	api("GET /channels/{id}/messages", RouteHistory, true, s.channelMessages)
	api("POST /channels/{id}/messages", RouteMessage, true, s.createMessage)
	api("PATCH /channels/{id}/messages/{mid}", RouteEdit, true, s.editMessage)
	api("DELETE /channels/{id}/messages/{mid}", RouteDelete, true, s.deleteMessage)
	api("POST /channels/{id}/typing", RouteTyping, true, s.triggerTyping)
	api("PUT /applications/{app}/commands", RouteCommands, true, s.putCommands)
	api("PUT /applications/{app}/guilds/{guild}/commands", RouteCommands, true, s.putCommands)
	api("POST /interactions/{id}/{token}/callback", RouteCallback, false, s.callback)
	api("POST /webhooks/{app}/{token}", RouteFollowup, false, s.followup)
	mux.HandleFunc("GET /ws/", s.serveGateway)
	mux.HandleFunc("GET /attachments/{channel}/{id}/{name}", s.serveAttachment)
	return mux
}

// serve records the call, applies a scripted failure or the bot token
// check, then runs h.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, route Route, auth bool, h handler) {
	body, _ := io.ReadAll(r.Body)
	call := Call{Route: route, Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, APIPrefix), Body: body, At: time.Now()}

	s.mu.Lock()
	var fail *Failure
	if q := s.failures[route]; len(q) > 0 {
		fail, s.failures[route] = q[0], q[1:]
	}
	s.mu.Unlock()

	var status int
	var v any
	switch {
	case fail != nil:
		status = fail.Status
	case auth && r.Header.Get("Authorization") != "Bot "+s.opts.Token:
		status, v = http.StatusUnauthorized, apiError{Message: "401: Unauthorized"}
	default:
		status, v = h(r, body)
	}

	s.mu.Lock()
	call.Status = status
	s.calls = append(s.calls, call)
	s.notify()
	s.mu.Unlock()

	switch {
	case fail != nil:
		writeFailure(w, *fail)
	case v == nil:
		w.WriteHeader(status)
	default:
		writeJSON(w, status, v)
	}
}

func (s *Server) gatewayURL(*http.Request, []byte) (int, any) {
	return http.StatusOK, map[string]string{"url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws"}
}

func (s *Server) gatewayBot(r *http.Request, b []byte) (int, any) {
	_, v := s.gatewayURL(r, b)
	return http.StatusOK, map[string]any{
		"url": v.(map[string]string)["url"], "shards": 1,
		"session_start_limit": map[string]int{"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
	}
}

func (s *Server) botUser() map[string]any {
	return map[string]any{"id": s.opts.BotID, "username": s.opts.BotName, "discriminator": "0", "bot": true}
}

func (s *Server) me(*http.Request, []byte) (int, any) { return http.StatusOK, s.botUser() }

func (s *Server) channel(r *http.Request, _ []byte) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[r.PathValue("id")]
	if !ok {
		return http.StatusNotFound, apiError{Message: "Unknown Channel", Code: 10003}
	}
	return http.StatusOK, c
}

// messageBody is what a create or follow-up request carries.
type messageBody struct {
	Content         string          `json:"content"`
	AllowedMentions json.RawMessage `json:"allowed_mentions"`
	Reference       *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	Components *[]Row `json:"components"`
}

// checkComponents answers as Discord does for components it refuses: at
// most 5 rows of at most 5 buttons, each with a label and a custom_id
// of at most 100 characters, unique in the message.
func checkComponents(rows *[]Row) (int, any, bool) {
	if rows == nil {
		return 0, nil, true
	}
	bad := func() (int, any, bool) {
		return http.StatusBadRequest, apiError{Message: "Invalid Form Body", Code: 50035}, false
	}
	if len(*rows) > 5 {
		return bad()
	}
	ids := map[string]bool{}
	for _, r := range *rows {
		if r.Type != 1 || len(r.Components) == 0 || len(r.Components) > 5 {
			return bad()
		}
		for _, b := range r.Components {
			if b.Type != 2 || b.Label == "" || b.CustomID == "" || len(b.CustomID) > 100 || ids[b.CustomID] || b.Style < 1 || b.Style > 4 {
				return bad()
			}
			ids[b.CustomID] = true
		}
	}
	return 0, nil, true
}

// Message returns the bot's channel message id as it stands now; ok is
// false for one it did not create, or deleted.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.current[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// checkContent answers as Discord does for empty (without files) or too
// long content.
func checkContent(content string, files int) (int, any, bool) {
	switch {
	case content == "" && files == 0:
		return http.StatusBadRequest, apiError{Message: "Cannot send an empty message", Code: 50006}, false
	case utf8.RuneCountInString(content) > contentLimit:
		return http.StatusBadRequest, apiError{Message: "Invalid Form Body", Code: 50035}, false
	}
	return 0, nil, true
}

func (s *Server) record(m Message, body messageBody, files []File) (int, any) {
	if status, v, ok := checkContent(body.Content, len(files)); !ok {
		return status, v
	}
	if status, v, ok := checkComponents(body.Components); !ok {
		return status, v
	}
	if body.Components != nil {
		m.Components = *body.Components
	}
	m.Files = files
	s.mu.Lock()
	defer s.mu.Unlock()
	m.ID = s.snowflake(time.Now())
	m.Content = body.Content
	m.AllowedMentions = body.AllowedMentions
	m.At = time.Now()
	if body.Reference != nil {
		m.ReplyTo = body.Reference.MessageID
	}
	s.messages = append(s.messages, m)
	answer := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "type": 0, "author": s.botUser(),
	}
	if len(files) > 0 {
		atts := make([]map[string]any, len(files))
		for i, f := range files {
			atts[i] = map[string]any{"id": s.snowflake(time.Now()), "filename": f.Name, "size": len(f.Data), "content_type": f.ContentType}
		}
		answer["attachments"] = atts
	}
	if !m.Followup {
		s.keepLocked(m.ChannelID, m.ID, answer)
		kept := m
		s.current[m.ID] = &kept
	}
	return http.StatusOK, answer
}

func (s *Server) createMessage(r *http.Request, b []byte) (int, any) {
	body, files, err := readMessageBody(r, b)
	if err != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	return s.record(Message{ChannelID: r.PathValue("id")}, body, files)
}

func (s *Server) editMessage(r *http.Request, b []byte) (int, any) {
	var body messageBody
	if err := json.Unmarshal(b, &body); err != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if status, v, ok := checkContent(body.Content, 0); !ok {
		return status, v
	}
	if status, v, ok := checkComponents(body.Components); !ok {
		return status, v
	}
	e := Edit{ChannelID: r.PathValue("id"), MessageID: r.PathValue("mid"), Content: body.Content, Components: body.Components}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.current[e.MessageID]; ok {
		m.Content = body.Content
		if body.Components != nil {
			m.Components = *body.Components
		}
	} else {
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	}
	s.edits = append(s.edits, e)
	return http.StatusOK, map[string]any{"id": e.MessageID, "channel_id": e.ChannelID, "content": e.Content, "type": 0}
}

func (s *Server) deleteMessage(r *http.Request, _ []byte) (int, any) {
	s.mu.Lock()
	s.deletes = append(s.deletes, r.PathValue("mid"))
	delete(s.current, r.PathValue("mid"))
	s.mu.Unlock()
	return http.StatusNoContent, nil
}

func (s *Server) triggerTyping(r *http.Request, _ []byte) (int, any) {
	s.mu.Lock()
	s.typing = append(s.typing, r.PathValue("id"))
	s.mu.Unlock()
	return http.StatusNoContent, nil
}

func (s *Server) putCommands(r *http.Request, b []byte) (int, any) {
	var cmds []Command
	if err := json.Unmarshal(b, &cmds); err != nil {
		return http.StatusBadRequest, apiError{Message: "Invalid Form Body", Code: 50035}
	}
	set := CommandSet{AppID: r.PathValue("app"), GuildID: r.PathValue("guild"), Commands: cmds}
	if set.AppID != s.opts.AppID {
		return http.StatusForbidden, apiError{Message: "Missing Access", Code: 50001}
	}
	s.mu.Lock()
	s.commands = append(s.commands, set)
	out := make([]map[string]any, len(cmds))
	for i, c := range cmds {
		out[i] = map[string]any{
			"id": s.snowflake(time.Now()), "application_id": set.AppID, "guild_id": set.GuildID,
			"name": c.Name, "description": c.Description, "type": 1, "version": "1",
		}
	}
	s.mu.Unlock()
	return http.StatusOK, out
}

func (s *Server) callback(r *http.Request, b []byte) (int, any) {
	var body struct {
		Type int             `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inters[r.PathValue("token")]
	switch {
	case !ok || in.id != r.PathValue("id"):
		return http.StatusNotFound, apiError{Message: "Unknown interaction", Code: 10062}
	case in.responded:
		return http.StatusBadRequest, apiError{Message: "Interaction has already been acknowledged.", Code: 40060}
	}
	in.responded = true
	s.callbacks = append(s.callbacks, Callback{InteractionID: in.id, Token: in.token, Type: body.Type, Data: body.Data, At: time.Now()})
	return http.StatusNoContent, nil
}

// followup is POST /webhooks/{app}/{token}: it works only for an
// interaction of this application that was responded to, as on Discord.
func (s *Server) followup(r *http.Request, b []byte) (int, any) {
	body, files, err := readMessageBody(r, b)
	if err != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	token := r.PathValue("token")
	s.mu.Lock()
	in, ok := s.inters[token]
	ok = ok && in.responded && r.PathValue("app") == s.opts.AppID
	s.mu.Unlock()
	if !ok {
		return http.StatusNotFound, apiError{Message: "Unknown Webhook", Code: 10015}
	}
	return s.record(Message{ChannelID: in.channelID, Followup: true, Token: token}, body, files)
}

// histMessage is a message of a channel's history as GET
// /channels/{id}/messages answers it.
type histMessage struct {
	id   uint64
	data map[string]any
}

// keepLocked adds a message to channel's history; the caller holds s.mu.
// Like Discord's REST message objects, what is kept has no guild_id.
func (s *Server) keepLocked(channel, id string, data map[string]any) {
	n, _ := strconv.ParseUint(id, 10, 64)
	kept := make(map[string]any, len(data))
	for k, v := range data {
		if k != "guild_id" {
			kept[k] = v
		}
	}
	s.history[channel] = append(s.history[channel], histMessage{id: n, data: kept})
}

// channelMessages is GET /channels/{id}/messages: with after, the limit
// (default 50, at most 100) messages that follow it; without, the latest
// ones; newest first either way, as Discord answers.
func (s *Server) channelMessages(r *http.Request, _ []byte) (int, any) {
	q := r.URL.Query()
	limit := 50
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l >= 1 && l <= 100 {
		limit = l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.history[r.PathValue("id")]
	var picked []histMessage
	if a := q.Get("after"); a != "" {
		after, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return http.StatusBadRequest, apiError{Message: "Invalid Form Body", Code: 50035}
		}
		for _, m := range all {
			if m.id > after && len(picked) < limit {
				picked = append(picked, m)
			}
		}
	} else {
		picked = all[max(0, len(all)-limit):]
	}
	out := make([]map[string]any, 0, len(picked))
	for i := len(picked) - 1; i >= 0; i-- {
		out = append(out, picked[i].data)
	}
	return http.StatusOK, out
}
