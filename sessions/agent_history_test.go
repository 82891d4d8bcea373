package sessions_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/sessions"
)

func user(s string) chat.Message { return chat.Message{Role: "user", Content: s} }
func said(s string) chat.Message { return chat.Message{Role: "assistant", Content: s} }
func result(id, s string) chat.Message {
	return chat.Message{Role: "tool", ToolCallID: id, Content: s}
}

// calls is an assistant message calling tools; each call's name and
// arguments count toward its size.
func calls(ids ...string) chat.Message {
	m := chat.Message{Role: "assistant"}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: id, Name: "t", Arguments: "{}"})
	}
	return m
}

func TestTrimHistory(t *testing.T) {
	// Sizes: user/said/result count their content; calls(a, b) is 6.
	history := []chat.Message{
		user("0123456789"),      // 10
		calls("a", "b"),         // 6
		result("a", "aaaaa"),    // 5
		result("b", "bbbbb"),    // 5
		said("done"),            // 4
		user("again"),           // 5
		calls("c"),              // 3
		result("c", "cccccccc"), // 8
		said("fine"),            // 4
	}
	tests := []struct {
		desc   string
		msgs   []chat.Message
		budget int
		want   []chat.Message
	}{
		{desc: "everything fits", msgs: history, budget: 1000, want: history},
		{desc: "exactly fits", msgs: history, budget: 50, want: history},
		{desc: "oldest message dropped", msgs: history, budget: 49, want: history[1:]},
		{desc: "a tool call and its results go together", msgs: history, budget: 39, want: history[4:]},
		{desc: "the walk stops at the first message that does not fit", msgs: history, budget: 23, want: history[5:]},
		{desc: "a tool group kept whole", msgs: history, budget: 15, want: history[6:]},
		{desc: "never a leading tool result", msgs: history, budget: 14, want: history[8:]},
		{desc: "the newest group is too big alone", msgs: history[:8], budget: 10, want: []chat.Message{}},
		{desc: "zero budget", msgs: history, budget: 0, want: []chat.Message{}},
		{desc: "orphan results at the start are dropped", msgs: append([]chat.Message{result("x", "x"), result("y", "y")}, history[4:]...), budget: 100, want: history[4:]},
		{desc: "empty history", msgs: nil, budget: 10, want: []chat.Message{}},
		{desc: "characters, not bytes", msgs: []chat.Message{user("ééééé"), said("ok")}, budget: 7, want: []chat.Message{user("ééééé"), said("ok")}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := sessions.TrimHistory(tc.msgs, tc.budget)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []chat.Message) bool { return cmp.Equal(a, b) || len(a)+len(b) == 0 })); diff != "" {
				t.Errorf("TrimHistory(budget %d) (-want +got):\n%s", tc.budget, diff)
			}
			if len(got) > 0 && got[0].Role == "tool" {
				t.Errorf("result starts with a tool result")
			}
			size := 0
			for _, m := range got {
				size += sessions.MessageChars(m)
			}
			if size > tc.budget {
				t.Errorf("kept %d characters, over the budget of %d", size, tc.budget)
			}
		})
	}
}

func TestTrimHistoryNeverWritesIntoItsInput(t *testing.T) {
	backing := make([]chat.Message, 3, 10)
	backing[0], backing[1], backing[2] = user("a"), said("b"), user("c")
	kept := sessions.TrimHistory(backing, 2)
	_ = append(kept, said(strings.Repeat("x", 3)))
	if got := backing[:4][3]; got.Content != "" {
		t.Errorf("appending to the trimmed history wrote %q into the input's backing array", got.Content)
	}
}

func TestMessageChars(t *testing.T) {
	m := chat.Message{Role: "assistant", Content: "héllo", ToolCalls: []chat.ToolCall{{ID: "x", Name: "memory", Arguments: `{"a":1}`}}}
	if got, want := sessions.MessageChars(m), 5+6+7; got != want {
		t.Errorf("MessageChars = %d, want %d", got, want)
	}
}
