package tools

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// MaxSendChars bounds one send_message text. Adapters split long messages
// for their platform; the bound only stops a runaway model from filling
// the outbox.
const MaxSendChars = 32_000

// KindMessage is the outbox kind of a message sent with send_message.
const KindMessage = "message"

const sendMessageSchema = `{
  "type": "object",
  "properties": {
    "target": {"type": "string", "minLength": 1, "description": "Where to send: platform:chat or platform:chat:thread, e.g. telegram:123456789 or slack:C0123ABC."},
    "text": {"type": "string", "minLength": 1, "description": "The message, in markdown."}
  },
  "required": ["target", "text"],
  "additionalProperties": false
}`

// Targets is the set of targets send_message may reach: exact
// platform:chat[:thread] targets and platform:* wildcards.
type Targets struct {
	exact     map[outbox.Target]bool
	platforms map[string]bool
	listed    []string // as configured, for messages
}

// ParseTargets reads the send_message.allowed_targets list.
// Errors: Invalid, naming the first entry that is neither a target nor a
// platform:* wildcard.
func ParseTargets(allowed []string) (Targets, error) {
	t := Targets{exact: map[outbox.Target]bool{}, platforms: map[string]bool{}}
	for _, s := range allowed {
		s = strings.TrimSpace(s)
		if p, ok := strings.CutSuffix(s, ":*"); ok && p != "" && !strings.Contains(p, ":") {
			t.platforms[p] = true
			t.listed = append(t.listed, s)
			continue
		}
		tg, err := outbox.ParseTarget(s)
		if err != nil || tg.Chat == "*" {
			return Targets{}, errs.E("tools.ParseTargets", errs.Invalid, "send_message.allowed_targets: %q is neither platform:chat[:thread] nor platform:*", s)
		}
		t.exact[tg] = true
		t.listed = append(t.listed, s)
	}
	return t, nil
}

// Allows reports whether tg may be sent to, and when not, why.
func (t Targets) Allows(tg outbox.Target) (bool, string) {
	if t.exact[tg] || t.platforms[tg.Platform] {
		return true, ""
	}
	if len(t.listed) == 0 {
		return false, "send_message.allowed_targets is empty, so no target is allowed"
	}
	return false, "it is not in send_message.allowed_targets (" + strings.Join(t.listed, ", ") + ")"
}

type sendArgs struct {
	Target string `json:"target"`
	Text   string `json:"text"`
}

// SendMessage is the send_message tool: a message to another chat,
// allowed only to the targets t allows. The message is queued on the turn
// and committed with it.
func SendMessage(t Targets) Tool {
	return Tool{
		Name: "send_message",
		Description: "Send a message to another chat or channel, given as platform:chat[:thread]. " +
			"Only configured targets are allowed. Your normal reply already goes to the current chat; do not use this for it.",
		Schema: []byte(sendMessageSchema),
		Handler: Func(func(_ context.Context, turn *Turn, a sendArgs) (Result, error) {
			const op = "tools.send_message"
			tg, err := outbox.ParseTarget(strings.TrimSpace(a.Target))
			if err != nil {
				return Result{}, errs.E(op, errs.Invalid, "target %q is not platform:chat[:thread] (e.g. telegram:123456789)", a.Target)
			}
			if ok, why := t.Allows(tg); !ok {
				return Result{}, errs.E(op, errs.Invalid, "target %s is not allowed: %s", tg, why)
			}
			if strings.TrimSpace(a.Text) == "" {
				return Result{}, errs.E(op, errs.Invalid, "text is empty: write the message to send")
			}
			if n := utf8.RuneCountInString(a.Text); n > MaxSendChars {
				return Result{}, errs.E(op, errs.TooLarge, "text is %d characters, over the limit of %d: shorten it or send it in parts", n, MaxSendChars)
			}
			turn.Queue(outbox.Message{Target: tg, Text: a.Text, Kind: KindMessage})
			return JSON(map[string]string{
				"status": "queued",
				"target": tg.String(),
				"note":   fmt.Sprintf("sent to %s when this turn finishes", tg),
			}), nil
		}),
	}
}
