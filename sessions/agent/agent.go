// Package agent runs one turn of a conversation: the model is called with
// the history, the new message and the tools; the tools it calls run and
// their results go back to it; this repeats until it replies without
// calling tools, asks the user a question, runs out of model calls or is
// interrupted. It lives apart from package sessions because it needs the
// model client and the tools, which themselves use sessions' types.
package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// Defaults for Agent.
const (
	DefaultMaxIterations = 90
	DefaultHistoryBudget = 200_000
)

// KindReply is the outbox kind of a turn's reply.
const KindReply = "reply"

// Tool results written for calls that never ran, so that every assistant
// tool call in the history has its result.
const (
	resultInterrupted = `{"error":"interrupted: the turn was stopped before this tool ran"}`
	resultSkipped     = `{"error":"skipped: the turn ended before this tool ran"}`
)

// Agent runs turns. Its fields are read-only once turns run; one Agent
// serves many conversations at once.
type Agent struct {
	// Client calls the model. Nil answers every turn with how to
	// configure a model.
	Client llm.Client
	// Model is the model name; empty uses the client's.
	Model string
	// Tools are what the model may call; nil offers none.
	Tools *tools.Set
	// MaxIterations is the number of model calls one turn may make
	// (model.max_iterations); 0 means DefaultMaxIterations.
	MaxIterations int
	// HistoryBudget is how many characters of earlier history are sent
	// with a turn, oldest dropped first; 0 means DefaultHistoryBudget and
	// a negative value sends it all.
	HistoryBudget int
	// SystemPrompt opens every request, when set.
	SystemPrompt string
	// Notes, when set, are read at the start of each turn and shown to
	// the model after the system prompt, so what it keeps with the memory
	// tool is known without a call.
	Notes notes.Store
	// Images loads a picture a request shows: given a message's image
	// as the history keeps it (Name, MIME, Path; no Data), it returns
	// it with Data filled, in a type the model takes that MIME names.
	// Before each model call the request's MaxImages most recent images
	// are loaded, each once a turn; one whose load fails is a line of
	// its message instead, and the turn goes on. Nil shows every image
	// as a line. The bytes are only ever in the request: the history a
	// turn returns keeps each image's Path.
	Images func(ctx context.Context, img chat.Image) (chat.Image, error)
	// Clock stamps history messages; nil means the wall clock.
	Clock clock.Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

var _ sessions.TurnRunner = (*Agent)(nil)

// Run runs one turn. It returns an error only when ctx ended: then the
// output holds what was done so far with End TurnInterrupted and no reply,
// and the caller should still commit it. A failed model call is not an
// error: the turn ends with TurnModelError and a one-line reply.
func (a *Agent) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	r, limit, out := a.open(ctx, in)
	if out != nil {
		return out, nil
	}
	for {
		if out, ended, err := r.beforeCall(ctx, limit); ended {
			return out, err
		}
		resp, err := r.complete(ctx)
		switch out, next, err := r.afterCall(ctx, resp, err); next {
		case stepEnd:
			return out, err
		case stepAgain:
			continue
		}
		r.steer(in.Steer)
	}
}

// open starts the turn with its user message and returns the run and
// its limit of model calls, or the turn's output when it ends before a
// call. It is apart from Run so that its locals are off the goroutine's
// stack while the turn waits on the model.
func (a *Agent) open(ctx context.Context, in *sessions.TurnInput) (*run, int, *sessions.TurnOutput) {
	r := a.start(ctx, in)
	msg := userMessage(in.Entry, in.Images, r.now())
	if r.resumed = unfinished(in.History, msg); r.resumed > 0 {
		// The same message again after a turn that ended without a
		// reply (a client's retry of a request that failed on the
		// model): that turn goes on, its message in the history once.
		r.logger().InfoContext(ctx, "the message repeats a turn that ended without a reply; going on with it", "messages", r.resumed)
	} else {
		r.add(msg)
	}
	if a.Client == nil {
		r.out.Err = &llm.Error{Class: llm.ClassNotConfigured, Model: a.Model}
		return r, 0, r.reply(sessions.TurnModelError, llm.UserMessage(r.out.Err))
	}
	limit := a.MaxIterations
	if limit <= 0 {
		limit = DefaultMaxIterations
	}
	return r, limit, nil
}

// beforeCall ends the turn before its next model call when its context
// ended or it made limit calls already (ended true).
func (r *run) beforeCall(ctx context.Context, limit int) (*sessions.TurnOutput, bool, error) {
	if ctx.Err() != nil {
		out, err := r.interrupted(ctx)
		return out, true, err
	}
	if r.out.ModelCalls >= limit {
		note := sessions.TurnLimitNotice(limit)
		r.add(chat.Message{Role: "assistant", Content: note, At: r.now()})
		return r.reply(sessions.TurnBudget, note), true, nil
	}
	return nil, false, nil
}

// step says how a turn goes on after a model call's answer.
type step int

const (
	stepTools step = iota // the tools it called ran: the model is called again after any steered text
	stepAgain             // the model is called again at once
	stepEnd               // the turn ends
)

// afterCall takes the answer to a model call (resp, err): the reply that
// ends the turn, or the tools it calls run. It is apart from Run so
// that its locals are off the goroutine's stack while the turn waits on
// the model.
func (r *run) afterCall(ctx context.Context, resp *llm.Response, err error) (*sessions.TurnOutput, step, error) {
	r.out.ModelCalls++
	if resp != nil {
		r.out.InputTokens += resp.Usage.PromptTokens
		r.out.OutputTokens += resp.Usage.CompletionTokens
		r.count(cmp.Or(resp.Answered.Model, r.a.Model), resp.Usage)
		if resp.Answered.Provider != "" {
			r.answered = &resp.Answered
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ending(r.interrupted(ctx))
		}
		if llm.ClassOf(err) == llm.ClassContextOverflow && !r.trimmed && r.sentEarlier > 0 {
			// Longer than the model takes: once a turn, the call is
			// made again with a quarter of the earlier history.
			r.trimmed, r.earlierCap = true, r.sentEarlier/4
			r.logger().InfoContext(ctx, "the request was longer than the model takes; trying once more with less of the history",
				"history_chars", r.sentEarlier, "now_chars", r.earlierCap)
			return nil, stepAgain, nil
		}
		r.logger().WarnContext(ctx, "model call failed", "class", string(llm.ClassOf(err)), "err", err)
		r.out.Err = err
		// The line is for the user, not the model: it stays out of
		// the history so a later turn does not read it as its own words.
		return r.reply(sessions.TurnModelError, llm.UserMessage(err)), stepEnd, nil
	}
	msg := resp.Message
	msg.Role, msg.At = "assistant", r.now()
	if len(msg.ToolCalls) == 0 {
		r.add(msg)
		text := msg.Content
		if strings.TrimSpace(text) == "" {
			text = "(the model returned an empty reply)"
		}
		out := r.reply(sessions.TurnDone, text)
		if resp.FinishReason == "length" {
			out.Outbox[len(out.Outbox)-1].Meta[sessions.ReplyMetaCut] = "length"
		}
		return out, stepEnd, nil
	}
	for i := range msg.ToolCalls {
		if msg.ToolCalls[i].ID == "" {
			// The result must name its call; a server that sent no id
			// gets one made up, unique within the turn.
			msg.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", r.out.ModelCalls, i)
		}
	}
	r.add(msg)
	switch end, question := r.runTools(ctx, msg.ToolCalls); end {
	case sessions.TurnInterrupted:
		return ending(r.interrupted(ctx))
	case sessions.TurnClarify:
		return r.reply(sessions.TurnClarify, question), stepEnd, nil
	}
	return nil, stepTools, nil
}

// ending is a turn's last output and error as afterCall returns them.
func ending(out *sessions.TurnOutput, err error) (*sessions.TurnOutput, step, error) {
	return out, stepEnd, err
}

// run is one turn in progress.
type run struct {
	a *Agent
	// in is the input as given (the runner leaves it so); conv and
	// user are its Conv and User, filled in when empty.
	in         *sessions.TurnInput
	conv, user string
	// turn is what the tools the turn calls see of it, made when the
	// first is called (toolTurn): most turns call none.
	turn   *tools.Turn
	log    *slog.Logger   // made by logger, on first use
	system []chat.Message // the system prompt and the user's notes
	out    sessions.TurnOutput
	// streamed says the turn's text has begun to stream (TurnInput.Delta).
	streamed bool
	// sentEarlier is how many characters of earlier history the last
	// call sent; earlierCap, when positive, bounds it further, after the
	// model found a request too long (trimmed: once a turn).
	trimmed                 bool
	sentEarlier, earlierCap int
	// answered is who answered the turn's latest model call, when a
	// chain of models did; nil before one did.
	answered *llm.ChainState
	// resumed is how many of the history's last messages are the turn
	// this one goes on with (unfinished); 0 for a turn of its own.
	resumed int
	// images are the turn's loads of images, by Path (showImages).
	images map[string]loaded
}

func (a *Agent) start(ctx context.Context, given *sessions.TurnInput) *run {
	in := given
	r := &run{a: a, in: in, conv: in.Conv, user: in.User}
	if r.conv == "" {
		r.conv = in.Entry.Conv
	}
	if r.user == "" {
		r.user = in.Entry.UserKey(in.Origin.Platform)
	}
	if a.SystemPrompt != "" {
		r.system = append(r.system, chat.Message{Role: "system", Content: a.SystemPrompt})
	}
	if notes := r.notesPrompt(ctx); notes != "" {
		r.system = append(r.system, chat.Message{Role: "system", Content: notes})
	}
	if extra := in.Entry.Meta[sessions.MetaSystem]; extra != "" {
		// The sender's own instructions for this turn, after herald's.
		r.system = append(r.system, chat.Message{Role: "system", Content: extra})
	}
	return r
}

// logger logs with the turn's conversation and entry. It is made when
// first needed: most turns log nothing of their own.
func (r *run) logger() *slog.Logger {
	if r.log == nil {
		r.log = cmp.Or(r.a.Logger, slog.Default()).With("conv", r.conv, "entry", r.in.Entry.ID)
	}
	return r.log
}

// toolTurn is the turn as its tools see it.
func (r *run) toolTurn() *tools.Turn {
	if r.turn == nil {
		in := r.in
		r.turn = &tools.Turn{Conv: r.conv, User: r.user, Origin: in.Origin, EntryID: in.Entry.ID, Workspace: in.Workspace}
	}
	return r.turn
}

// queued are the messages the turn's tools queued to be sent with its
// reply.
func (r *run) queued() []outbox.Message {
	if r.turn == nil {
		return nil
	}
	return r.turn.Queued()
}

// notesPrompt lists the user's notes for the model; "" when there are
// none or they cannot be read (a turn is worth more than its notes).
func (r *run) notesPrompt(ctx context.Context) string {
	a, user := r.a, r.user
	if a.Notes == nil || user == "" {
		return ""
	}
	notes, err := a.Notes.Notes(ctx, user)
	if err != nil {
		r.logger().WarnContext(ctx, "reading the user's notes failed; the turn runs without them", "err", err)
		return ""
	}
	if len(notes) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Notes you keep about this user (memory tool):")
	for _, n := range notes {
		fmt.Fprintf(&b, "\n- [%s] %s", n.ID, n.Text)
	}
	return b.String()
}

func (r *run) now() time.Time {
	if r.a.Clock == nil {
		return time.Now()
	}
	return r.a.Clock.Now()
}

func (r *run) add(m chat.Message) {
	r.out.History = append(r.out.History, m)
	if f := r.in.Observe; f != nil {
		f(m)
	}
}

// complete makes one model call with the trimmed history, the turn's
// messages so far and the tools.
func (r *run) complete(ctx context.Context) (*llm.Response, error) {
	return r.a.Client.Complete(ctx, r.request(ctx))
}

// request is the turn's next model call: the system prompt, the history
// the budget leaves, the turn's own messages.
func (r *run) request(ctx context.Context) llm.Request {
	earlier, own := r.in.History, r.out.History
	if r.resumed > 0 {
		// The turn gone on with is the turn's own.
		cut := len(earlier) - r.resumed
		earlier, own = earlier[:cut], append(slices.Clip(earlier[cut:]), own...)
	}
	if budget := r.a.HistoryBudget; budget >= 0 {
		if budget == 0 {
			budget = DefaultHistoryBudget
		}
		// The turn's own messages are always sent whole; earlier history
		// gets what is left of the budget.
		for _, m := range own {
			budget -= sessions.MessageChars(m)
		}
		earlier = sessions.TrimHistory(earlier, budget)
	}
	if r.earlierCap > 0 {
		earlier = sessions.TrimHistory(earlier, r.earlierCap)
	}
	r.sentEarlier = 0
	for _, m := range earlier {
		r.sentEarlier += sessions.MessageChars(m)
	}
	msgs := make([]chat.Message, 0, len(r.system)+len(earlier)+len(own))
	msgs = append(msgs, r.system...)
	msgs = append(msgs, earlier...)
	msgs = append(msgs, own...)
	r.showImages(ctx, msgs)
	req := llm.Request{
		Model:    r.a.Model,
		Messages: msgs,
		Tools:    r.a.Tools.Specs(),
		User:     ModelUser(r.conv),
	}
	if deliver := r.in.Delta; deliver != nil {
		// The text of each call streams; a blank line parts it from the
		// text of the call before, which then called tools.
		apart := r.streamed
		req.Stream = func(text string) {
			if apart {
				deliver("\n\n")
				apart = false
			}
			r.streamed = true
			deliver(text)
		}
	}
	return req
}

// ModelUser is the stable id a request names its end user by (the API's
// user field, which providers use to tell abusers apart): a hash of the
// conversation key, so that the platform's chat and user ids in the key
// do not reach the model's provider.
func ModelUser(conv string) string {
	sum := sha256.Sum256([]byte("herald conversation " + conv))
	return "herald-" + hex.EncodeToString(sum[:12])
}

// runTools runs calls in order and appends their results. It returns ""
// when the turn goes on, TurnInterrupted, or TurnClarify with the
// question that is the reply.
func (r *run) runTools(ctx context.Context, calls []chat.ToolCall) (end sessions.TurnEnd, question string) {
	for i, call := range calls {
		if ctx.Err() != nil {
			r.answer(calls[i:], resultInterrupted)
			return sessions.TurnInterrupted, ""
		}
		if f := r.in.Progress; f != nil {
			f(sessions.Progress{Tool: call.Name})
		}
		res := r.a.Tools.Call(ctx, r.toolTurn(), call)
		if res.IsError && ctx.Err() != nil {
			// The tool failed because the turn was stopped under it.
			res.Content = resultInterrupted
		}
		if res.IsError {
			r.logger().DebugContext(ctx, "tool call failed", "tool", call.Name, "result", res.Content)
		}
		r.add(chat.Message{Role: "tool", ToolCallID: call.ID, Name: call.Name, Content: res.Content, Images: res.Images, At: r.now()})
		if res.EndTurn {
			r.answer(calls[i+1:], resultSkipped)
			r.add(chat.Message{Role: "assistant", Content: res.Reply, At: r.now()})
			return sessions.TurnClarify, res.Reply
		}
	}
	return "", ""
}

// answer gives each call a result saying it never ran.
func (r *run) answer(calls []chat.ToolCall, content string) {
	for _, c := range calls {
		r.add(chat.Message{Role: "tool", ToolCallID: c.ID, Name: c.Name, Content: content, At: r.now()})
	}
}

// steer appends every message waiting on ch as a user message. It runs
// only after a whole batch of tool results: a user message between an
// assistant's tool calls and their results would be refused.
func (r *run) steer(q *sessions.SteerQueue) {
	for {
		text, ok := q.Take()
		if !ok {
			return
		}
		r.add(chat.Message{Role: "user", Content: text, At: r.now()})
	}
}

// reply ends the turn with text sent to the turn's origin, and returns
// the turn's output.
func (r *run) reply(end sessions.TurnEnd, text string) *sessions.TurnOutput {
	r.out.End = end
	r.out.Model = r.a.Model
	r.out.Meta = r.convMeta()
	meta := map[string]string{
		sessions.ReplyMetaEnd:              string(end),
		sessions.ReplyMetaPromptTokens:     strconv.Itoa(r.out.InputTokens),
		sessions.ReplyMetaCompletionTokens: strconv.Itoa(r.out.OutputTokens),
	}
	if end == sessions.TurnModelError {
		meta[sessions.ReplyMetaErrorClass] = string(llm.ClassOf(r.out.Err))
		if wait := llm.RetryAfterOf(r.out.Err); wait > 0 {
			meta[sessions.ReplyMetaRetryAt] = r.now().Add(wait).UTC().Format(time.RFC3339Nano)
		}
	}
	r.out.Outbox = append(r.queued(), outbox.Message{
		Target:  r.in.Origin,
		Conv:    r.conv,
		Text:    text,
		ReplyTo: r.in.Entry.MessageID,
		Kind:    KindReply,
		Meta:    meta,
	})
	r.out.Writes = r.writes()
	return &r.out
}

// count adds a call's usage to the turn's on model, the one that
// answered it.
func (r *run) count(model string, u llm.Usage) {
	for i := range r.out.Usage {
		if r.out.Usage[i].Model == model {
			r.out.Usage[i].Prompt += u.PromptTokens
			r.out.Usage[i].Completion += u.CompletionTokens
			return
		}
	}
	r.out.Usage = append(r.out.Usage, sessions.Usage{Model: model, Prompt: u.PromptTokens, Completion: u.CompletionTokens})
}

// convMeta is what the turn writes to its conversation's metadata: a
// fallback model answered its latest call (sessions.ConvMetaFallback),
// or the main model did, which clears that; nil when no chain answered.
func (r *run) convMeta() map[string]string {
	if r.answered == nil {
		return nil
	}
	v := ""
	if r.answered.Fallback {
		b, err := json.Marshal(r.answered)
		if err != nil {
			return nil
		}
		v = string(b)
	}
	return map[string]string{sessions.ConvMetaFallback: v}
}

// writes are what the turn's tools decided, for its commit.
func (r *run) writes() []sessions.Write {
	if r.turn == nil {
		return nil
	}
	var out []sessions.Write
	for _, w := range r.turn.Writes() {
		out = append(out, w)
	}
	return out
}

// interrupted ends the turn without a reply. What tools queued is kept:
// the history says it was sent, so it must be.
func (r *run) interrupted(ctx context.Context) (*sessions.TurnOutput, error) {
	r.out.End, r.out.Model = sessions.TurnInterrupted, r.a.Model
	r.out.Meta = r.convMeta()
	r.out.Outbox = r.queued()
	r.out.Writes = r.writes()
	return &r.out, context.Cause(ctx)
}

// unfinished is how many of history's last messages are a turn that
// ended without a reply (a model call failed, or it was stopped or
// interrupted before one) and whose last user message is msg (its text
// and images): the turn msg, arriving next, repeats. 0 when the history
// ends with a reply, or the unfinished turn's message differs.
func unfinished(history []chat.Message, msg chat.Message) int {
	for i := len(history) - 1; i >= 0; i-- {
		m := history[i]
		switch {
		case m.Role == "user":
			if m.Content == msg.Content && sameImages(m.Images, msg.Images) {
				return len(history) - i
			}
			return 0
		case m.Role != "tool" && len(m.ToolCalls) == 0:
			// A reply: the turn it ends was finished.
			return 0
		}
	}
	return 0
}

// sameImages says a and b show the same files.
func sameImages(a, b []chat.Image) bool {
	return slices.EqualFunc(a, b, func(x, y chat.Image) bool { return x.Path == y.Path })
}

// userMessage is the entry as the model reads it: its text, a line for
// each attachment left in it, and the images the turn shows (where they
// are; their bytes are loaded for each request). Synthetic entries (a
// sub-agent's result, a cron fire) are user messages too: the model sees
// one kind of input.
func userMessage(e sessions.Entry, images []chat.Image, at time.Time) chat.Message {
	text := e.Text
	for _, att := range e.Attachments {
		line := "[" + cmp.Or(string(att.Kind), "attachment") + ": " + att.Name
		if att.MIME != "" {
			line += ", " + att.MIME
		}
		if att.Size > 0 {
			line += fmt.Sprintf(", %d bytes", att.Size)
		}
		line += "]"
		if text != "" {
			text += "\n"
		}
		text += line
	}
	return chat.Message{Role: "user", Content: text, Images: storedImages(images), At: at}
}
