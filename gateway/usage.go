package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// usageStatus is the /status line of a conversation's token totals, by
// model, with what they cost where model.prices names the model; "" when
// its turns have used none.
func usageStatus(meta map[string]string, prices map[string]config.Price) string {
	type counts struct{ prompt, completion int }
	byModel := map[string]*counts{}
	for k, v := range meta {
		rest, ok := strings.CutPrefix(k, sessions.UsagePrefix)
		if !ok {
			continue
		}
		kind, model, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			continue
		}
		c := byModel[model]
		if c == nil {
			c = &counts{}
			byModel[model] = c
		}
		switch kind {
		case "prompt_tokens":
			c.prompt += n
		case "completion_tokens":
			c.completion += n
		}
	}
	if len(byModel) == 0 {
		return ""
	}
	var parts []string
	total, priced := 0.0, false
	for _, model := range slices.Sorted(maps.Keys(byModel)) {
		c := byModel[model]
		part := fmt.Sprintf("%s %d in, %d out", modelLabel(model), c.prompt, c.completion)
		if p, ok := prices[model]; ok {
			cost := (float64(c.prompt)*p.Input + float64(c.completion)*p.Output) / 1e6
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

// addUsageStatus adds the token totals line to /status.
func (g *Gateway) addUsageStatus(commands *sessions.Commands) {
	store := g.db.Sessions()
	commands.AddStatus(func(ctx context.Context, conv string) string {
		meta, err := store.Meta(ctx, conv)
		if err != nil {
			return ""
		}
		return usageStatus(meta, g.cfg.Model.Prices)
	})
}
