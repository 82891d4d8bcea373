package kanban

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

const kanbanUsage = "Usage: /kanban list · /kanban show <id> · /kanban create <title> · /kanban assign <id> <lane> · /kanban subscribe [events] · /kanban unsubscribe. They act on the default board."

// RegisterCommands registers /kanban in cmds, acting on the default
// board.
func RegisterCommands(cmds *sessions.Commands, svc *Service) error {
	return cmds.Register(sessions.Command{
		Name: "kanban", Args: "list|show ID|create TITLE|assign ID LANE|subscribe [EVENTS]|unsubscribe",
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
	case "subscribe":
		return subscribe(ctx, svc.Store, call, rest)
	case "unsubscribe":
		return unsubscribe(ctx, svc.Store, call)
	}
	return kanbanUsage
}

// subscribe makes (or changes) the chat's subscription to the default
// board: the event kinds in words (space or comma separated; none: the
// default set), from now on. A chat has one subscription: a second
// subscribe changes its kinds and keeps its place in the log.
func subscribe(ctx context.Context, st Store, call *sessions.CommandCall, words string) string {
	kinds, err := ParseNotifyEvents(words)
	if err != nil {
		return sessions.CommandError(err)
	}
	target := call.Target.String()
	subs, err := st.Subscriptions(ctx, DefaultBoard)
	if err != nil {
		return sessions.CommandError(err)
	}
	if i := slices.IndexFunc(subs, func(s Subscription) bool { return s.Target == target }); i >= 0 {
		s := subs[i]
		s.Events = kinds
		_, err = st.PutSubscription(ctx, s)
	} else {
		_, err = Subscribe(ctx, st, Subscription{Board: DefaultBoard, Target: target, Events: kinds, Conv: call.In.Conv})
	}
	if err != nil {
		return sessions.CommandError(err)
	}
	what := strings.Join(kinds, ", ")
	if len(kinds) == 0 {
		what = strings.Join(DefaultNotifyEvents, ", ") + " (the default set)"
	}
	return fmt.Sprintf("This chat now hears of board %s's cards: %s. /kanban unsubscribe stops it.", DefaultBoard, what)
}

// unsubscribe removes the chat's subscriptions to the default board.
func unsubscribe(ctx context.Context, st Store, call *sessions.CommandCall) string {
	subs, err := st.Subscriptions(ctx, DefaultBoard)
	if err != nil {
		return sessions.CommandError(err)
	}
	target, n := call.Target.String(), 0
	for _, s := range subs {
		if s.Target != target {
			continue
		}
		if err := st.RemoveSubscription(ctx, s.ID); err != nil && !errs.Is(err, errs.NotFound) {
			return sessions.CommandError(err)
		}
		n++
	}
	if n == 0 {
		return fmt.Sprintf("This chat has no subscription to board %s. /kanban subscribe makes one.", DefaultBoard)
	}
	return fmt.Sprintf("This chat hears no more of board %s.", DefaultBoard)
}
