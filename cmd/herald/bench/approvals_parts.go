package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/outbox"
)

// toolCallModel is the model's server on loopback, speaking the Chat
// Completions API as a model's server does: a user message "run KEY"
// is answered with a call of the terminal running KEY's command, a
// tool's result with "done KEY". It notes when it hands each call to
// herald.
type toolCallModel struct {
	srv    *httptest.Server
	marks  string
	called sync.Map // key → time.Time
}

func newToolCallModel(marks string) *toolCallModel {
	m := &toolCallModel{marks: marks}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// command is the command of key's turn: it appends bash's clock to the
// turn's file as it starts. A dangerous turn's also says mkfs.ext4,
// which the default tools.dangerous_commands matches.
func (m *toolCallModel) command(key string) string {
	cmd := "echo $EPOCHREALTIME >> " + filepath.Join(m.marks, key) + "; echo "
	if strings.HasPrefix(key, sideRef) {
		return cmd + "ok"
	}
	return cmd + "mkfs.ext4"
}

// calledAt is when the model handed herald key's tool call.
func (m *toolCallModel) calledAt(key string) time.Time {
	t, _ := m.called.Load(key)
	at, _ := t.(time.Time)
	return at
}

type chatRequest struct {
	Stream   bool `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func (m *toolCallModel) serve(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if req.Stream {
		http.Error(w, "the bench's model answers unstreamed requests only", http.StatusBadRequest)
		return
	}
	key := ""
	for i := len(req.Messages) - 1; i >= 0 && key == ""; i-- {
		if msg := req.Messages[i]; msg.Role == "user" {
			var text string
			_ = json.Unmarshal(msg.Content, &text)
			if _, after, ok := strings.Cut(text, "run "); ok {
				key, _, _ = strings.Cut(after, " ")
			}
		}
	}
	if key == "" {
		http.Error(w, "no turn of the bench's", http.StatusBadRequest)
		return
	}
	message := map[string]any{"role": "assistant", "content": "done " + key}
	finish := "stop"
	if req.Messages[len(req.Messages)-1].Role == "user" {
		args, _ := json.Marshal(map[string]string{"command": m.command(key)})
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"id": "call_" + key, "type": "function",
			"function": map[string]string{"name": "terminal", "arguments": string(args)},
		}}}
		finish = "tool_calls"
	}
	body, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-" + key, "object": "chat.completion", "created": 1_700_000_000, "model": benchModel,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128},
	})
	w.Header().Set("Content-Type", "application/json")
	if finish == "tool_calls" {
		m.called.Store(key, time.Now())
	}
	_, _ = w.Write(body)
}

// approvalChat is the platform of the bench's conversations: it accepts
// every message and tells the conversation's watcher of its question
// and of its turn's reply.
type approvalChat struct{ watchers sync.Map } // conv → *chatWatch

// chatWatch gets a conversation's approval question and its reply.
type chatWatch struct {
	question chan outbox.Message
	done     chan struct{}
}

var _ adapters.Adapter = (*approvalChat)(nil)

func (c *approvalChat) watch(conv string) *chatWatch {
	w := &chatWatch{question: make(chan outbox.Message, 1), done: make(chan struct{}, 1)}
	c.watchers.Store(conv, w)
	return w
}

func (c *approvalChat) forget(conv string) { c.watchers.Delete(conv) }

func (c *approvalChat) Platform() string { return benchPlatform }

// Run receives nothing: the bench delivers to the router itself.
func (c *approvalChat) Run(ctx context.Context, _ adapters.Inbox) error {
	<-ctx.Done()
	return nil
}

func (c *approvalChat) Send(_ context.Context, m outbox.Message) adapters.SendResult {
	if v, ok := c.watchers.Load(m.Conv); ok {
		w := v.(*chatWatch)
		switch {
		case m.Kind == approvals.KindQuestion:
			notify(w.question, m)
		case m.Kind != approvals.KindDecided && strings.Contains(m.Text, "done "):
			notify(w.done, struct{}{})
		}
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: sentID(m)}
}

// sentID is the platform's id of m: what a press of its button carries.
func sentID(m outbox.Message) string { return "sent-" + m.ID }

// notify hands v on without waiting: a second send of a message the
// watcher has is not counted again.
func notify[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}
