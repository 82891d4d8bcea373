package sessions

import (
	"unicode/utf8"

	"github.com/heraldgw/herald/chat"
)

// MessageChars is the size of m as the history budget counts it: its
// text and its tool calls' names and arguments, in characters.
func MessageChars(m chat.Message) int {
	n := utf8.RuneCountInString(m.Content)
	for _, c := range m.ToolCalls {
		n += utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Arguments)
	}
	return n
}

// TrimHistory returns the newest part of msgs that fits in budget
// characters, dropping the oldest first. An assistant message that
// called tools and the tool results after it are kept or dropped
// together, and the result never starts with a tool result: a model
// server refuses a tool result without its call. A budget of 0 or less
// keeps nothing. The result shares msgs' backing array; it is clipped so
// appending to it never writes into msgs.
func TrimHistory(msgs []chat.Message, budget int) []chat.Message {
	if budget <= 0 {
		return msgs[len(msgs):len(msgs):len(msgs)]
	}
	// Walk back group by group: a group is one non-tool message and the
	// tool results that follow it.
	start, used := len(msgs), 0
	for end := len(msgs); end > 0; {
		begin := end - 1
		for begin >= 0 && msgs[begin].Role == "tool" {
			begin--
		}
		if begin < 0 {
			break // tool results without their call: never kept
		}
		size := 0
		for _, m := range msgs[begin:end] {
			size += MessageChars(m)
		}
		if used+size > budget {
			break
		}
		used += size
		start, end = begin, begin
	}
	out := msgs[start:]
	return out[:len(out):len(out)]
}
