package telegramfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf16"
)

// Incoming is a message a user sends, for Queue and Build. The fake adds
// the entities Telegram would: a bot_command for a leading "/word" and a
// mention for every "@name", with offsets in UTF-16 code units.
type Incoming struct {
	Chat       int64  // the chat; 0 means a DM with From
	ChatType   string // "private", "group", "supergroup"; default from the chat id's sign
	Thread     int    // a forum topic's message_thread_id; 0 for none
	From       int64  // the sender's user id; 0 means 42
	Username   string // the sender's username, without the @
	IsBot      bool   // the sender is a bot
	Text       string
	ReplyTo    int  // the message id replied to; 0 for none
	ReplyToBot bool // the message replied to is the bot's
	// Photo, Voice, Audio and Document attach the file put on the fake
	// with that id (PutFile; any other id is a file Telegram no longer
	// has); Text is then the caption. A photo comes in
	// two sizes, as on Telegram: a thumbnail (an id the fake does not
	// serve) and the file itself, the largest, last.
	Photo, Voice, Audio, Document string
}

// Update is an update the fake built.
type Update struct {
	ID        int64  // update_id
	MessageID int    // the message's id in its chat, or 0
	Raw       []byte // the update as Telegram sends it
}

type queued struct {
	id  int64
	raw json.RawMessage
}

// Build makes the update for in without queueing it (for a webhook push).
func (s *Server) Build(in Incoming) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buildLocked(in)
}

// Queue adds the update for in, served by getUpdates until an offset
// confirms it.
func (s *Server) Queue(in Incoming) Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.buildLocked(in)
	s.queue = append(s.queue, queued{id: u.ID, raw: u.Raw})
	s.changedLocked()
	return u
}

// QueueRaw adds an update made of fields (update_id is added) and
// returns its update_id: for update kinds Incoming does not build.
func (s *Server) QueueRaw(fields map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpd++
	f := map[string]any{"update_id": s.nextUpd}
	for k, v := range fields {
		if k != "update_id" {
			f[k] = v
		}
	}
	raw, _ := json.Marshal(f)
	s.queue = append(s.queue, queued{id: s.nextUpd, raw: raw})
	s.changedLocked()
	return s.nextUpd
}

func (s *Server) buildLocked(in Incoming) Update {
	if in.From == 0 {
		in.From = 42
	}
	if in.Chat == 0 {
		in.Chat = in.From
	}
	if in.ChatType == "" {
		in.ChatType = chatType(in.Chat)
	}
	s.nextUpd++
	id := s.newMessageIDLocked(in.Chat)
	from := map[string]any{"id": in.From, "is_bot": in.IsBot, "first_name": "User" + strconv.FormatInt(in.From, 10)}
	if in.Username != "" {
		from["username"] = in.Username
	}
	chat := map[string]any{"id": in.Chat, "type": in.ChatType}
	if in.ChatType == "private" {
		chat["first_name"] = from["first_name"]
	} else {
		chat["title"] = "Group " + strconv.FormatInt(in.Chat, 10)
		chat["is_forum"] = in.Thread != 0
	}
	msg := map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": chat, "from": from}
	textKey, entKey := "text", "entities"
	if s.mediaLocked(in, msg) {
		textKey, entKey = "caption", "caption_entities"
	}
	if in.Text != "" || textKey == "text" {
		msg[textKey] = in.Text
	}
	if ents := entities(in.Text); len(ents) > 0 {
		msg[entKey] = ents
	}
	if in.Thread != 0 {
		msg["message_thread_id"] = in.Thread
		msg["is_topic_message"] = true
	}
	if in.ReplyTo != 0 {
		author := map[string]any{"id": 7, "is_bot": false, "first_name": "Other"}
		if in.ReplyToBot {
			author = map[string]any{"id": s.botID, "is_bot": true, "first_name": "Herald", "username": s.botName}
		}
		msg["reply_to_message"] = map[string]any{"message_id": in.ReplyTo, "date": time.Now().Unix(), "chat": chat, "from": author, "text": "earlier"}
	}
	raw, _ := json.Marshal(map[string]any{"update_id": s.nextUpd, "message": msg})
	return Update{ID: s.nextUpd, MessageID: id, Raw: raw}
}

// mediaLocked adds to msg the files in names, as Telegram describes
// them, and reports whether there was one.
func (s *Server) mediaLocked(in Incoming, msg map[string]any) bool {
	describe := func(id string, name bool) map[string]any {
		// An id not put on the fake is a file Telegram no longer has.
		f, found := s.files[id]
		if !found {
			f = File{ID: id, Size: -1}
		}
		d := map[string]any{"file_id": f.ID, "file_unique_id": "u" + f.ID}
		if n := f.reported(); n >= 0 {
			d["file_size"] = n
		}
		if f.MIME != "" {
			d["mime_type"] = f.MIME
		}
		if name && f.Name != "" {
			d["file_name"] = f.Name
		}
		return d
	}
	if in.Photo != "" {
		thumb := map[string]any{"file_id": in.Photo + "-thumb", "file_unique_id": "t" + in.Photo, "width": 90, "height": 90, "file_size": 1200}
		full := describe(in.Photo, false)
		delete(full, "mime_type")
		full["width"], full["height"] = 1280, 960
		msg["photo"] = []map[string]any{thumb, full}
	}
	if in.Voice != "" {
		v := describe(in.Voice, false)
		v["duration"] = 3
		msg["voice"] = v
	}
	if in.Audio != "" {
		a := describe(in.Audio, true)
		a["duration"] = 180
		msg["audio"] = a
	}
	if in.Document != "" {
		msg["document"] = describe(in.Document, true)
	}
	return in.Photo != "" || in.Voice != "" || in.Audio != "" || in.Document != ""
}

// entities finds the bot_command and mention entities Telegram marks in text.
func entities(text string) []map[string]any {
	u := utf16.Encode([]rune(text))
	word := func(c uint16) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	var out []map[string]any
	for i := 0; i < len(u); i++ {
		if (u[i] != '@' && u[i] != '/') || (u[i] == '/' && i != 0) || (i > 0 && word(u[i-1])) {
			continue
		}
		j := i + 1
		for j < len(u) && (word(u[j]) || (u[i] == '/' && u[j] == '@')) {
			j++
		}
		if j == i+1 {
			continue
		}
		typ := "mention"
		if u[i] == '/' {
			typ = "bot_command"
		}
		out = append(out, map[string]any{"type": typ, "offset": i, "length": j - i})
		i = j - 1
	}
	return out
}

// poll is a getUpdates waiting for updates.
type poll struct {
	kick chan struct{} // closed when a newer getUpdates takes over
}

type pollStats struct {
	inFlight, maxInFlight, conflicts int
}

// getUpdates serves queued updates from the offset on. Asking with an
// offset confirms every update below it, as Telegram does. With none
// ready it waits up to the timeout asked for (capped by SetMaxPoll).
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string) {
	a := s.pollUpdates(r.Context(), p)
	s.record("getUpdates", p, r.RemoteAddr, a)
	write(w, a)
}

func (s *Server) pollUpdates(ctx context.Context, p map[string]string) answer {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(p["timeout"])

	s.mu.Lock()
	if f, ok := s.nextFailureLocked("getUpdates"); ok {
		s.mu.Unlock()
		return f.answer()
	}
	if s.webhook.URL != "" {
		s.mu.Unlock()
		return fail(http.StatusConflict, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first")
	}
	if offset > s.confirmed {
		s.queue = slices.DeleteFunc(s.queue, func(q queued) bool { return q.id < offset })
		s.confirmed = offset
		s.changedLocked()
	}
	if s.poll != nil {
		close(s.poll.kick)
		s.polls.conflicts++
	}
	me := &poll{kick: make(chan struct{})}
	s.poll = me
	s.polls.inFlight++
	s.polls.maxInFlight = max(s.polls.maxInFlight, s.polls.inFlight)
	s.changedLocked()
	wait := min(time.Duration(timeout)*time.Second, s.maxPoll)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.poll == me {
			s.poll = nil
		}
		s.polls.inFlight--
		s.changedLocked()
		s.mu.Unlock()
	}()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var out []json.RawMessage
		for _, q := range s.queue {
			if q.id >= offset && len(out) < limit {
				out = append(out, q.raw)
				s.served[q.id]++
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(out) > 0 {
			return ok(out)
		}
		select {
		case <-changed:
		case <-timer.C:
			return ok([]json.RawMessage{})
		case <-me.kick:
			return fail(http.StatusConflict, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
		case <-ctx.Done():
			return ok([]json.RawMessage{})
		case <-s.done:
			return ok([]json.RawMessage{})
		}
	}
}

// PollsInFlight reports how many getUpdates wait now.
func (s *Server) PollsInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls.inFlight
}

// WaitPollsInFlight waits until exactly n getUpdates wait at once.
func (s *Server) WaitPollsInFlight(n int) {
	s.t.Helper()
	if !s.waitFor(func() bool { return s.polls.inFlight == n }) {
		s.t.Fatalf("telegramfake: %d getUpdates in flight, want %d within %s", s.PollsInFlight(), n, waitTimeout)
	}
}

// MaxConcurrentPolls reports the most getUpdates that waited at once.
// Telegram allows one: with a single poller it stays at 1.
func (s *Server) MaxConcurrentPolls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls.maxInFlight
}

// Conflicts reports how many waiting getUpdates a newer one ended with 409.
func (s *Server) Conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls.conflicts
}

// Served reports how many getUpdates answers carried the update.
func (s *Server) Served(updateID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[updateID]
}

// Confirmed is the highest offset a getUpdates asked for: every update
// below it is confirmed and gone.
func (s *Server) Confirmed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.confirmed
}

// Unconfirmed lists the update ids still queued.
func (s *Server) Unconfirmed() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, len(s.queue))
	for i, q := range s.queue {
		ids[i] = q.id
	}
	return ids
}

// WaitConfirmed waits until the update with id is confirmed.
func (s *Server) WaitConfirmed(id int64) {
	s.t.Helper()
	if !s.waitFor(func() bool { return s.confirmed > id }) {
		s.t.Fatalf("telegramfake: update %d not confirmed within %s (offset %d)", id, waitTimeout, s.Confirmed())
	}
}

// PushWebhook posts u to the webhook setWebhook registered, with its
// secret, as Telegram does, and returns the HTTP status.
func (s *Server) PushWebhook(ctx context.Context, u Update) (int, error) {
	hook := s.Webhook()
	if hook.URL == "" {
		return 0, errors.New("telegramfake: no webhook is set")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(u.Raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if hook.Secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", hook.Secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Pressing is a user pressing a button of a message the bot sent, for
// Press.
type Pressing struct {
	Chat     int64 // the message's chat
	Message  int   // the message's id
	From     int64 // who pressed; 0 means 42
	Username string
	Data     string // the button's callback_data
}

// Press queues the callback_query update Telegram sends when a user
// presses a button: its id is "cb<update_id>", and its message is the
// bot's message as it stands (with its topic). It fails the test when
// the bot sent no such message.
func (s *Server) Press(p Pressing) Update {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m, found := s.messages[p.Chat][p.Message]
	if !found || m.Deleted {
		s.t.Fatalf("telegramfake: no message %d in chat %d to press", p.Message, p.Chat)
	}
	if p.From == 0 {
		p.From = 42
	}
	from := map[string]any{"id": p.From, "is_bot": false, "first_name": "User" + strconv.FormatInt(p.From, 10)}
	if p.Username != "" {
		from["username"] = p.Username
	}
	s.nextUpd++
	cb := map[string]any{"id": "cb" + strconv.FormatInt(s.nextUpd, 10), "from": from, "message": s.messageJSON(m),
		"chat_instance": strconv.FormatInt(p.Chat, 10), "data": p.Data}
	raw, _ := json.Marshal(map[string]any{"update_id": s.nextUpd, "callback_query": cb})
	s.queue = append(s.queue, queued{id: s.nextUpd, raw: raw})
	s.changedLocked()
	return Update{ID: s.nextUpd, MessageID: p.Message, Raw: raw}
}
