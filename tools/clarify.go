package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

const clarifySchema = `{
  "type": "object",
  "properties": {
    "question": {"type": "string", "minLength": 1, "description": "The question for the user, complete on its own."},
    "choices": {
      "type": "array",
      "items": {"type": "string", "minLength": 1},
      "maxItems": 10,
      "description": "Answers the user can pick from, when the question has a few likely ones."
    }
  },
  "required": ["question"],
  "additionalProperties": false
}`

type clarifyArgs struct {
	Question string   `json:"question"`
	Choices  []string `json:"choices"`
}

// Clarify is the clarify tool: the model asks the user a question instead
// of guessing. It ends the turn, and the question is the turn's reply; the
// user's answer arrives as the next turn.
func Clarify() Tool {
	return Tool{
		Name: "clarify",
		Description: "Ask the user a question when the request is ambiguous or you need a decision only they can make. " +
			"This ends your turn: the question is sent as your reply and the user's answer comes as their next message.",
		Schema: []byte(clarifySchema),
		Handler: Func(func(_ context.Context, _ *Turn, a clarifyArgs) (Result, error) {
			q := strings.TrimSpace(a.Question)
			if q == "" {
				return Result{}, errs.E("tools.clarify", errs.Invalid, "question is empty: write the question to ask")
			}
			var b strings.Builder
			b.WriteString(q)
			for i, c := range a.Choices {
				if i == 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "\n%d. %s", i+1, strings.TrimSpace(c))
			}
			return Result{Content: `{"status":"asked"}`, EndTurn: true, Reply: b.String()}, nil
		}),
	}
}
