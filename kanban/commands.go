package kanban

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/heraldgw/herald/sessions"
)

const kanbanUsage = "Usage: /kanban list · /kanban show <id> · /kanban create <title> · /kanban assign <id> <lane>. They act on the default board."

// RegisterCommands registers /kanban in cmds, acting on the default
// board.
func RegisterCommands(cmds *sessions.Commands, svc *Service) error {
	return cmds.Register(sessions.Command{
		Name: "kanban", Args: "list|show ID|create TITLE|assign ID LANE",
		Summary: "work with the kanban board", OutOfBand: true,
		Handle: func(ctx context.Context, call *sessions.CommandCall) error {
			return call.Reply(ctx, command(ctx, svc, call))
		},
	})
}

// command answers one /kanban.
func command(ctx context.Context, svc *Service, call *sessions.CommandCall) string {
	verb, rest, _ := strings.Cut(strings.TrimSpace(call.Args), " ")
	rest = strings.TrimSpace(rest)
	user := call.In.UserKey(call.Target.Platform)
	switch strings.ToLower(verb) {
	case "", "list":
		cards, err := svc.Store.Cards(ctx, Query{Board: DefaultBoard, Limit: 30})
		if err != nil {
			return sessions.CommandError(err)
		}
		if len(cards) == 0 {
			return "The board is empty. /kanban create <title> adds a card."
		}
		var b strings.Builder
		b.WriteString("Board " + DefaultBoard + ":")
		for _, k := range cards {
			fmt.Fprintf(&b, "\n%s  %-8s  %s", k.ID, k.Status, k.Title)
			if k.Assignee != "" {
				b.WriteString("  → " + k.Assignee)
			}
		}
		return b.String()
	case "show":
		if rest == "" {
			return kanbanUsage
		}
		k, err := svc.read(ctx, "kanban.command", rest)
		if err != nil {
			return sessions.CommandError(err)
		}
		s := fmt.Sprintf("%s %s — %s", k.ID, k.Title, k.Status)
		if k.Assignee != "" {
			s += ", lane " + k.Assignee
		}
		if k.Body != "" {
			s += "\n" + tail(k.Body, 1500)
		}
		if k.BlockReason != "" && (k.Status == StatusBlocked || k.Status == StatusTriage) {
			s += "\nBlocked: " + k.BlockReason
		}
		if k.Result != nil {
			s += "\nResult: " + tail(k.Result.Summary, 1500)
		}
		return s
	case "create":
		if rest == "" {
			return kanbanUsage
		}
		spec := CreateSpec{Title: rest, CreatedBy: user}
		if call.In.MessageID != "" {
			// A platform's redelivery of the command makes no second card.
			sum := sha256.Sum256([]byte(call.In.Conv + "\x00" + call.In.MessageID))
			spec.IdempotencyKey = "msg:" + hex.EncodeToString(sum[:8])
		}
		k, _, err := svc.Create(ctx, spec)
		if err != nil {
			return sessions.CommandError(err)
		}
		return fmt.Sprintf("Created %s (%s). /kanban assign %s <lane> gives it to a lane.", k.ID, k.Status, k.ID)
	case "assign":
		id, lane, _ := strings.Cut(rest, " ")
		if id == "" || strings.TrimSpace(lane) == "" {
			return kanbanUsage
		}
		k, err := svc.Assign(ctx, id, lane, user)
		if err != nil {
			return sessions.CommandError(err)
		}
		return fmt.Sprintf("%s is %s's now.", k.ID, k.Assignee)
	}
	return kanbanUsage
}
