package sessions

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// TokenCounts are the tokens a conversation's turns used on one model.
type TokenCounts struct{ Prompt, Completion int }

// cost is what c costs at input and output dollars per million tokens.
func (c TokenCounts) cost(input, output float64) float64 {
	return (float64(c.Prompt)*input + float64(c.Completion)*output) / 1e6
}

// UsageByModel reads a conversation's token totals from its metadata
// meta, by model ("" for turns that ran on none configured).
func UsageByModel(meta map[string]string) map[string]TokenCounts {
	byModel := map[string]TokenCounts{}
	for k, v := range meta {
		rest, ok := strings.CutPrefix(k, UsagePrefix)
		if !ok {
			continue
		}
		kind, model, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			continue
		}
		c := byModel[model]
		switch kind {
		case "prompt_tokens":
			c.Prompt += n
		case "completion_tokens":
			c.Completion += n
		default:
			continue
		}
		byModel[model] = c
	}
	return byModel
}

// UsageStatus is the /status line of a conversation's token totals, read
// from its metadata meta, by model, with what they cost where price knows
// the model (per million tokens, in dollars, as model.prices says); ""
// when its turns have used none.
func UsageStatus(meta map[string]string, price func(model string) (input, output float64, ok bool)) string {
	byModel := UsageByModel(meta)
	if len(byModel) == 0 {
		return ""
	}
	var parts []string
	total, priced := 0.0, false
	for _, model := range slices.Sorted(maps.Keys(byModel)) {
		c := byModel[model]
		part := fmt.Sprintf("%s %d in, %d out", modelLabel(model), c.Prompt, c.Completion)
		if input, output, ok := price(model); ok {
			cost := c.cost(input, output)
			part += fmt.Sprintf(" ($%.4f)", cost)
			total, priced = total+cost, true
		}
		parts = append(parts, part)
	}
	line := "Tokens: " + strings.Join(parts, "; ")
	if priced {
		line += fmt.Sprintf(". Cost: $%.4f (model.prices)", total)
	}
	return line
}

// modelLabel names a model in the status line: "(no model)" for turns that
// ran on none configured.
func modelLabel(model string) string {
	if model == "" {
		return "(no model)"
	}
	return model
}
