package media

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

// SendFileTool is the name of the tool that sends a file.
const SendFileTool = "send_file"

// KindFile is the outbox kind of a message send_file queued.
const KindFile = "file"

const sendFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file: relative to the workspace root, or an absolute path in the workspace or among the files herald keeps for this conversation."},
    "caption": {"type": "string", "description": "Text sent with the file, in markdown. Optional."},
    "target": {"type": "string", "description": "Where to send it: origin (this chat, the default), a platform's name for its home channel (e.g. telegram), or platform:chat[:thread]."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

type sendFileArgs struct {
	Path    string `json:"path"`
	Caption string `json:"caption"`
	Target  string `json:"target"`
}

// sendFile is the send_file tool: the file's bytes are kept in the
// store under an id the same call of a turn run again makes again, and
// a message sending them is queued on the turn, committed with it and
// delivered in order with the conversation's other messages.
func (o *outbound) sendFile() tools.Tool {
	return tools.Tool{
		Name: SendFileTool,
		Description: "Send a file to a chat: as a picture when it is an image (JPEG, PNG, GIF, WebP), else as a document. " +
			"The file is one in the workspace or one herald keeps for this conversation. " +
			"It goes to this chat unless target names another; it is sent when this turn finishes.",
		Schema:  []byte(sendFileSchema),
		Handler: tools.Func(o.runSendFile),
	}
}

func (o *outbound) runSendFile(ctx context.Context, turn *tools.Turn, a sendFileArgs) (tools.Result, error) {
	const op = "media.send_file"
	to, err := o.target(op, turn, a.Target)
	if err != nil {
		return tools.Result{}, err
	}
	if n := utf8.RuneCountInString(a.Caption); n > tools.MaxSendChars {
		return tools.Result{}, errs.E(op, errs.TooLarge, "caption is %d characters, over the limit of %d: shorten it, or send it with send_message", n, tools.MaxSendChars)
	}
	f, err := readOut(op, o.roots(turn.Conv, turn.Workspace), a.Path, o.maxBytes)
	if err != nil {
		return tools.Result{}, err
	}
	masked := o.mask(&f)
	id := OutboundID(to, turn.Conv, turn.EntryID, tools.CallID(ctx), f.hash())
	if err := o.files.PutFile(ctx, id, f.Data); err != nil {
		return tools.Result{}, errs.E(op, errs.CodeOf(err), "the file could not be kept for sending (%s); try again", errs.Reason(err))
	}
	turn.Queue(outbox.Message{
		Target: to,
		Text:   a.Caption,
		Kind:   KindFile,
		Files:  []outbox.File{{Name: f.Name, MIME: f.MIME, Size: int64(len(f.Data)), Blob: id, Photo: f.Photo}},
	})
	as := "document"
	if f.Photo {
		as = "picture"
	}
	out := map[string]any{
		"status": "queued",
		"target": to.String(),
		"name":   f.Name,
		"type":   f.MIME,
		"size":   len(f.Data),
		"as":     as,
		"note":   fmt.Sprintf("sent to %s when this turn finishes", to),
	}
	if masked {
		out["masked"] = "the file held herald's secrets; they were masked in what is sent"
	}
	return tools.JSON(out), nil
}

// target resolves send_file's target: this turn's chat (empty or
// origin), a platform's home channel (its name), or platform:chat[:thread]
// on a platform this gateway serves. A chat other than the turn's own
// and the home channels must be allowed by send_message.allowed_targets,
// as send_message's are.
func (o *outbound) target(op string, turn *tools.Turn, want string) (outbox.Target, error) {
	want = strings.TrimSpace(want)
	if want == "" || want == cronjobs.TargetOrigin {
		if turn.Origin.Validate() != nil {
			return outbox.Target{}, errs.E(op, errs.Invalid, "this turn has no chat of its own to send to: name a target (platform:chat)")
		}
		return turn.Origin, nil
	}
	if want == cronjobs.TargetLocal || strings.Contains(want, ",") {
		return outbox.Target{}, errs.E(op, errs.Invalid, "target %q: give one chat: origin, a platform's name for its home channel, or platform:chat[:thread]", want)
	}
	origin := &cronjobs.Origin{Platform: turn.Origin.Platform, Chat: turn.Origin.Chat, Thread: turn.Origin.Thread}
	resolved, err := o.targets.Resolve(want, origin)
	if err != nil {
		return outbox.Target{}, errs.E(op, errs.Invalid, "%s", errs.Reason(err))
	}
	if len(resolved) != 1 {
		return outbox.Target{}, errs.E(op, errs.Invalid, "target %q names no chat", want)
	}
	to := resolved[0]
	if to == turn.Origin || o.homes[to] {
		return to, nil
	}
	if ok, why := o.allowed.Allows(to); !ok {
		return outbox.Target{}, errs.E(op, errs.Invalid, "target %s is not allowed: %s", to, why)
	}
	return to, nil
}

// mask masks herald's secrets in f's bytes, and reports whether it
// found any: a file is sent as it is unless one is in it, whatever the
// file is.
func (o *outbound) mask(f *outFile) bool {
	if o.redact == nil {
		return false
	}
	s := string(f.Data)
	masked := o.redact(s)
	if masked == s {
		return false
	}
	f.Data = []byte(masked)
	return true
}
