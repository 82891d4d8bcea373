package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// kindReply is the timeline kind of a turn's reply (agent.KindReply). A
// command's answer (sessions.KindCommand) also answers a message, as does
// a notice that its turn ended without a reply (sessions.KindNotice).
const kindReply = "reply"

// defaultModel is echoed when a request names no model.
const defaultModel = "herald"

// errWaitTimeout is the cause of a wait that ran out of MaxWait.
var errWaitTimeout = errors.New("no reply within the wait limit")

// completionRequest is the part of an OpenAI chat completion request
// herald reads. Sampling parameters, tools and the like belong to the
// gateway's own model configuration and are ignored.
type completionRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	User          string         `json:"user"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// systemText is the request's system (and developer) messages' text,
// joined: the sender's instructions for this turn, which the agent sends
// after herald's own system prompt (sessions.MetaSystem).
func systemText(msgs []chatMessage) (string, error) {
	var texts []string
	for i, m := range msgs {
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		text, err := contentText(m.Content)
		if err != nil {
			return "", errs.E("api.chatCompletions", errs.Invalid, "messages[%d].content: %v", i, err)
		}
		if strings.TrimSpace(text) != "" {
			texts = append(texts, text)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

// contentText reads a content that is a string or an array of parts.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// The response objects, after OpenAI's.
type (
	completion struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []completionChoice `json:"choices"`
		Usage   usage              `json:"usage"`
	}
	completionChoice struct {
		Index        int             `json:"index"`
		Message      assistantOutput `json:"message"`
		FinishReason string          `json:"finish_reason"`
		Logprobs     *struct{}       `json:"logprobs"`
	}
	assistantOutput struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	chunk struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []chunkChoice `json:"choices"`
		Usage   *usage        `json:"usage,omitempty"`
	}
	chunkChoice struct {
		Index        int       `json:"index"`
		Delta        delta     `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
		Logprobs     *struct{} `json:"logprobs"`
	}
	delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
)

// chatCompletions takes the last user message as a turn of the
// conversation and answers with the turn's reply.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := s.decodeBodyUpTo(w, r, &req, s.opts.MaxBodyBytes+s.inlineFileBytes()); err != nil {
		s.fail(w, r, err)
		return
	}
	msg, err := s.lastUserMessage(req.Messages)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	system, err := systemText(req.Messages)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.Header.Get("X-Herald-Conversation")
	if id == "" {
		id = req.User
	}
	if id == "" {
		id = newID("c-")
	}
	conv, err := conversation(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sender := req.User
	if sender == "" {
		sender = Platform
	}
	in := sessions.Inbound{
		Conv:      conv,
		Sender:    sender,
		MessageID: messageID(r),
		Text:      msg.text,
		Kind:      sessions.KindUser,
		Meta:      map[string]string{"target": conv},
	}
	if system != "" {
		in.Meta[sessions.MetaSystem] = system
	}
	// The files are read (fetched, for images by URL) and kept before
	// the turn is queued: it may start within the delivery.
	ups, err := s.readFiles(r.Context(), msg)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if in.Attachments, err = s.keepFiles(r.Context(), conv, in.MessageID, ups); err != nil {
		s.fail(w, r, err)
		return
	}

	// The timeline's end is read before the turn is queued, so the reply
	// is after it however fast the turn runs.
	after, err := s.opts.Timeline.TimelineEnd(r.Context(), conv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A stream listens before the turn is queued, too: it may start
	// within the delivery.
	var pieces *sessions.DeltaSub
	if req.Stream && s.opts.Deltas != nil {
		pieces = s.opts.Deltas.Subscribe(conv, in.MessageID)
		defer pieces.Close()
	}
	dup, err := s.deliverReport(r.Context(), in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if dup && pieces != nil {
		// A retry of a message already taken joins its turn partway:
		// its reply comes whole, not from the middle of its stream.
		pieces.Close()
		pieces = nil
	}
	if dup {
		// A retry of a message already taken: its answer may be in the
		// timeline already, before the end read above.
		var answered bool
		if after, answered, err = s.answerStart(r.Context(), conv, in.MessageID, after); err != nil {
			s.fail(w, r, err)
			return
		}
		if answered {
			// Its turn has committed and released its files: those
			// put again above are read by no one.
			s.dropFiles(r.Context(), in.Attachments)
		}
	}
	w.Header().Set("X-Herald-Conversation", id)
	model := req.Model
	if model == "" {
		model = defaultModel
	}
	c := chunk{ID: newID("chatcmpl-"), Object: "chat.completion.chunk", Created: s.opts.Clock.Now().Unix(), Model: model}
	s.log.Debug("turn queued", "conv", conv, "message_id", in.MessageID, "stream", req.Stream)

	// The turn is queued and will finish whatever happens to this
	// request; only the wait for its reply can end early.
	ctx, cancel := context.WithTimeoutCause(r.Context(), s.opts.MaxWait, errWaitTimeout)
	defer cancel()
	clearWriteDeadline(w)
	if req.Stream {
		s.streamReply(ctx, w, r, conv, in.MessageID, after, c, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, pieces)
		return
	}
	reply, files, err := s.awaitReply(ctx, conv, in.MessageID, after, followHooks{})
	if err != nil {
		if status, detail, ok := s.waitError(ctx, r, err); ok {
			if status == http.StatusGatewayTimeout && strings.TrimSpace(r.Header.Get("Idempotency-Key")) == "" {
				// The turn goes on: the same request again would be
				// its message once more, not its answer sooner. With
				// an Idempotency-Key it waits for the same turn.
				w.Header().Set("X-Should-Retry", "false")
			}
			writeJSON(w, status, errorBody{Error: detail})
		}
		return
	}
	if f, failed := turnFailure(reply); failed {
		// A retry with the same Idempotency-Key is answered with this
		// same failure, not a new turn.
		f.final = f.final || strings.TrimSpace(r.Header.Get("Idempotency-Key")) != ""
		f.write(w, s.opts.Clock.Now())
		return
	}
	writeJSON(w, http.StatusOK, completion{
		ID:      c.ID,
		Object:  "chat.completion",
		Created: c.Created,
		Model:   c.Model,
		Choices: []completionChoice{{
			Message:      assistantOutput{Role: "assistant", Content: reply.Text + filesNote(reply.Text, files)},
			FinishReason: finishReason(reply),
		}},
		Usage: usageOf(reply),
	})
}

// finishReason is OpenAI's finish_reason for the turn reply answers: a
// turn that used its model calls (model.max_iterations), or whose reply
// the model cut at its output bound, ended at a length; one that ended
// otherwise stopped.
func finishReason(reply sessions.TimelineItem) string {
	if sessions.TurnEnd(reply.Meta[sessions.ReplyMetaEnd]) == sessions.TurnBudget || reply.Meta[sessions.ReplyMetaCut] == "length" {
		return "length"
	}
	return "stop"
}

// usageOf is the token usage the reply's turn reported (zero for an
// answer no model call made: a command's, a notice).
func usageOf(reply sessions.TimelineItem) usage {
	in, _ := strconv.Atoi(reply.Meta[sessions.ReplyMetaPromptTokens])
	out, _ := strconv.Atoi(reply.Meta[sessions.ReplyMetaCompletionTokens])
	return usage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}
}

// turnFailure is the error a completion answers when its turn ended on a
// model failure, by the failure's class: 503 when there is no model or
// it is unavailable, 429 when it is rate limited, 502 when the model's
// server refused the call (a key, the account, the model's name, the
// request). The reply's text, the reason a person can act on, is the
// message; the conversation's timeline keeps it too.
func turnFailure(reply sessions.TimelineItem) (failure, bool) {
	if sessions.TurnEnd(reply.Meta[sessions.ReplyMetaEnd]) != sessions.TurnModelError {
		return failure{}, false
	}
	class := reply.Meta[sessions.ReplyMetaErrorClass]
	f := failure{status: http.StatusServiceUnavailable, detail: errorDetail{Message: reply.Text, Type: typeUnavailable, Code: class}}
	f.retryAt, _ = time.Parse(time.RFC3339Nano, reply.Meta[sessions.ReplyMetaRetryAt])
	switch class {
	case "rate_limited":
		f.status, f.detail.Type = http.StatusTooManyRequests, typeRateLimit
	case "auth", "payment", "model_not_found", "bad_request", "context_overflow":
		f.status, f.detail.Type, f.final = http.StatusBadGateway, typeUpstream, true
	case "not_configured":
		f.final = true
	}
	return f, true
}

// failure is an error answer and what it tells a client about trying
// again.
type failure struct {
	status int
	detail errorDetail
	// retryAt, when set, is when a new try may succeed: sent as
	// Retry-After.
	retryAt time.Time
	// final says no retry of the same request can succeed (a refused
	// key, no model configured): sent as x-should-retry: false.
	final bool
}

// maxClientRetryWait is the longest Retry-After the OpenAI clients wait
// before a retry (the Python client's bound; longer, it retries after
// its own short backoff, the Go client not at all): an answer asking for
// more tells them not to retry, since a retry sooner cannot succeed.
const maxClientRetryWait = time.Minute

// write answers f: its status and body, Retry-After (whole seconds, at
// least one) when it knows when to come back, and x-should-retry: false,
// which the OpenAI clients honour, when a retry cannot succeed.
func (f failure) write(w http.ResponseWriter, now time.Time) {
	final := f.final
	if wait := f.retryAt.Sub(now); !f.retryAt.IsZero() {
		secs := max(int64(math.Ceil(wait.Seconds())), 1)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		final = final || wait > maxClientRetryWait
	}
	if final {
		w.Header().Set("X-Should-Retry", "false")
	}
	writeJSON(w, f.status, errorBody{Error: f.detail})
}

// modelObject is a model as OpenAI's models routes show one.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func modelOf(name string) modelObject {
	return modelObject{ID: name, Object: "model", OwnedBy: "herald"}
}

// models lists the configured models, as OpenAI's GET /v1/models does:
// the clients that ask before they send (many chat UIs) find the one
// the turns run on.
func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	data := make([]modelObject, 0, len(s.opts.Models))
	for _, m := range s.opts.Models {
		data = append(data, modelOf(m))
	}
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{Object: "list", Data: data})
}

// model answers GET /v1/models/{id} for a configured model.
func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !slices.Contains(s.opts.Models, id) {
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no model %q here; GET /v1/models lists them", id))
		return
	}
	writeJSON(w, http.StatusOK, modelOf(id))
}

// reportingInbox is an inbox that says whether a message was a
// redelivery (sessions.Router is one).
type reportingInbox interface {
	DeliverReport(ctx context.Context, in sessions.Inbound) (duplicate bool, err error)
}

// deliverReport hands in to the inbox and says whether it was a
// redelivery, when the inbox can tell (else it says not). The files kept
// for in are forgotten when it was surely not queued: there is no inbox
// yet, or the inbox refused it as it is.
func (s *Server) deliverReport(ctx context.Context, in sessions.Inbound) (bool, error) {
	inbox := s.inboxOrNil()
	if inbox == nil {
		s.dropFiles(ctx, in.Attachments)
		return false, errs.E("api.deliver", errs.Unavailable, "no inbox yet: the gateway is starting")
	}
	var dup bool
	var err error
	if r, ok := inbox.(reportingInbox); ok {
		dup, err = r.DeliverReport(ctx, in)
	} else {
		err = inbox.Deliver(ctx, in)
	}
	if refused(err) {
		s.dropFiles(ctx, in.Attachments)
	}
	return dup, err
}

// answerStart returns where the wait for the answer to a redelivered
// message msgID starts: just before the last item up to the cursor end
// that answers it by name, or end when none does yet (its turn still
// runs); answered says whether one does. An empty end reads the whole
// timeline. Only an item naming the message counts here: one that names
// none is older than items that name theirs, and answers another message.
// The last, not the first: a client that used the same key once more
// after the dedupe window is owed the answer to the newer message.
func (s *Server) answerStart(ctx context.Context, conv, msgID, end string) (start string, answered bool, err error) {
	start, prev := end, ""
	err = s.scan(ctx, conv, "", func(it sessions.TimelineItem) bool {
		if it.ReplyTo == msgID && answers(it, msgID) {
			start, answered = prev, true
		}
		prev = it.Cursor
		return it.Cursor == end
	})
	if err != nil {
		return "", false, err
	}
	return start, answered, nil
}

// answers reports whether it answers message msgID: a reply or command
// answer that names it or names none (an item kept before items named
// what they answer), or a notice that names it, which ends the message's
// turn without a reply (stopped, dropped, not saved, interrupted).
func answers(it sessions.TimelineItem, msgID string) bool {
	switch it.Kind {
	case sessions.KindNotice:
		return it.ReplyTo == msgID
	case kindReply, sessions.KindCommand:
		return it.ReplyTo == "" || it.ReplyTo == msgID
	}
	return false
}

// awaitReply waits for the answer to message msgID after the cursor
// after (see answers), whichever process sent it, and returns it with the
// files sent to the conversation up to it, its own last: those its turn
// sent with send_file come before it.
func (s *Server) awaitReply(ctx context.Context, conv, msgID, after string, hooks followHooks) (sessions.TimelineItem, []sessions.TimelineFile, error) {
	var (
		reply sessions.TimelineItem
		files []sessions.TimelineFile
	)
	err := s.follow(ctx, conv, after, func(it sessions.TimelineItem) (bool, error) {
		files = append(files, it.Files...)
		if !answers(it, msgID) {
			if hooks.passing != nil {
				return false, hooks.passing(it)
			}
			return false, nil
		}
		reply = it
		return true, nil
	}, hooks)
	return reply, files, err
}

// waitError says how to answer a wait that ended without a reply, or
// false when the client went away and there is no one to tell.
func (s *Server) waitError(ctx context.Context, r *http.Request, err error) (int, errorDetail, bool) {
	switch {
	case errors.Is(context.Cause(ctx), errWaitTimeout):
		return http.StatusGatewayTimeout, errorDetail{
			Message: fmt.Sprintf("no reply within %s; the turn goes on and its reply will be in the conversation's timeline", s.opts.MaxWait),
			Type:    typeTimeout,
		}, true
	case ctx.Err() != nil:
		return 0, errorDetail{}, false
	}
	status, detail := s.errorFor(r, err)
	return status, detail, true
}

// streamReply streams the reply as chat.completion.chunk events: the role
// at once, so the client knows the turn is queued, keep-alive comments
// while the turn runs, each piece of text the model streams as its own
// chunk when the turn runs in this process (pieces, nil for none), a
// question the conversation waits on for an approval as it reaches its
// timeline (approvalQuestion), then the reply whole when none streamed,
// the finish and [DONE]. Errors after the first byte are sent as an
// error event, as OpenAI does.
func (s *Server) streamReply(ctx context.Context, w http.ResponseWriter, r *http.Request, conv, msgID, after string, c chunk, withUsage bool, pieces *sessions.DeltaSub) {
	sse := newSSE(w)
	send := func(choice chunkChoice) error {
		c.Choices = []chunkChoice{choice}
		return sse.data(c)
	}
	empty := ""
	if send(chunkChoice{Delta: delta{Role: "assistant", Content: &empty}}) != nil {
		return
	}
	hooks := followHooks{keepAlive: sse.comment}
	// streamed is the model's pieces, shown all that was sent; brk says
	// what is sent next starts a paragraph: it follows an approval's
	// question.
	var streamed, shown strings.Builder
	brk := false
	write := func(text string) error {
		if brk && text != "" {
			text, brk = "\n\n"+strings.TrimLeft(text, "\n"), false
		}
		shown.WriteString(text)
		return send(chunkChoice{Delta: delta{Content: &text}})
	}
	if pieces != nil {
		hooks.sideReady = pieces.Ready()
		hooks.side = func() error {
			for _, text := range pieces.Take() {
				streamed.WriteString(text)
				if err := write(text); err != nil {
					return err
				}
			}
			return nil
		}
	}
	hooks.passing = func(it sessions.TimelineItem) error {
		question, ok := approvalQuestion(it)
		if !ok {
			return nil
		}
		brk = shown.Len() > 0
		err := write(question)
		brk = true
		return err
	}
	reply, files, err := s.awaitReply(ctx, conv, msgID, after, hooks)
	if err == nil && hooks.side != nil {
		// Pieces that came in just before the reply was read.
		err = hooks.side()
	}
	if err != nil {
		if _, detail, ok := s.waitError(ctx, r, err); ok {
			_ = sse.data(errorBody{Error: detail})
		}
		return
	}
	if f, failed := turnFailure(reply); failed {
		_ = sse.data(errorBody{Error: f.detail})
		return
	}
	finish := finishReason(reply)
	// The reply whole, unless it is what streamed (its end: the calls
	// before it may have streamed text too); a reply of herald's own (a
	// turn out of model calls) comes after what streamed.
	if rest, ok := unstreamed(streamed.String(), reply.Text); ok && write(rest) != nil {
		return
	}
	if note := filesNote(shown.String(), files); note != "" && send(chunkChoice{Delta: delta{Content: &note}}) != nil {
		return
	}
	if send(chunkChoice{Delta: delta{}, FinishReason: &finish}) != nil {
		return
	}
	if withUsage {
		u := usageOf(reply)
		c.Choices, c.Usage = []chunkChoice{}, &u
		if sse.data(c) != nil {
			return
		}
	}
	_ = sse.raw("data: [DONE]\n\n")
}

// unstreamed is what of reply a stream that sent streamed still owes:
// nothing when streamed ends with it, all of it when nothing streamed,
// else all of it after a blank line.
func unstreamed(streamed, reply string) (string, bool) {
	switch {
	case streamed == "":
		return reply, true
	case strings.HasSuffix(strings.TrimSpace(streamed), strings.TrimSpace(reply)):
		return "", false
	}
	return "\n\n" + reply, true
}

// sse writes server-sent events, flushing each.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx would hold the events back
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

func (s *sse) raw(text string) error {
	if _, err := fmt.Fprint(s.w, text); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw("data: " + string(b) + "\n\n")
}

// event sends data as one event named name ("" for a plain "data:"
// event), a "data:" line per line of it.
func (s *sse) event(name string, data []byte) error {
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return s.raw(b.String())
}

// comment keeps an idle stream open through proxies.
func (s *sse) comment() error { return s.raw(": keep-alive\n\n") }

// clearWriteDeadline lifts the server's write timeout for a response that
// waits on a turn or streams for long; the wait has its own limit.
func clearWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}
