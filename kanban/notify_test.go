package kanban_test

import (
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
)

func resolveTargets(target string) ([]outbox.Target, error) {
	if target == "discord" {
		return nil, errs.E("test", errs.Invalid, "discord has no home channel")
	}
	platform, chat, _ := strings.Cut(target, ":")
	return []outbox.Target{{Platform: platform, Chat: chat}}, nil
}

func (h *harness) notifier() *kanban.Notifier {
	h.t.Helper()
	n, err := kanban.NewNotifier(kanban.NotifierOptions{Store: h.svc.Store, Outbox: h.outbox, Resolve: resolveTargets, Clock: h.clk})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) sent() []string {
	h.t.Helper()
	msgs, err := h.outbox.Pending(h.ctx, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Target.String()+" "+m.Text)
	}
	return out
}

// Each subscribed event is sent once, to each subscription, across two
// notifiers and a restart.
func TestNotificationsOnceEach(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		for _, s := range []kanban.Subscription{
			{ID: "sub_1", Board: kanban.DefaultBoard, Target: "telegram:1"},
			{ID: "sub_2", Board: kanban.DefaultBoard, Target: "slack:C1", Events: []string{kanban.EventBlocked}},
			{ID: "sub_3", Board: kanban.DefaultBoard, Target: "discord"},
		} {
			if _, err := h.svc.Store.PutSubscription(h.ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		a := h.create(kanban.CreateSpec{Title: "ship it"})
		b := h.create(kanban.CreateSpec{Title: "ask"})
		ra := h.claim(a.ID)
		if _, err := h.svc.Complete(h.ctx, a.ID, ra.Claim.Token, kanban.Result{Summary: "shipped"}, "w"); err != nil {
			t.Fatal(err)
		}
		first, second := h.notifier(), h.notifier()
		for _, n := range []*kanban.Notifier{first, second, first} {
			if err := n.Send(h.ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := h.sent(); len(got) != 1 || got[0] != `telegram:1 [default] `+a.ID+` "ship it" is done: shipped` {
			t.Fatalf("sent = %q, want the completion once, to the subscription of every kind", got)
		}
		if _, err := h.svc.Block(h.ctx, b.ID, 0, kanban.BlockNeedsInput, "which region?", "ann"); err != nil {
			t.Fatal(err)
		}
		// A notifier of a new process (a restart) goes on from the cursors.
		h.svc.Store = h.open() // and h.outbox the new handle's
		third := h.notifier()
		if err := third.Send(h.ctx); err != nil {
			t.Fatal(err)
		}
		if err := first.Send(h.ctx); err != nil {
			t.Fatal(err)
		}
		got := h.sent()
		if len(got) != 3 || !strings.Contains(strings.Join(got, "\n"), `slack:C1 [default] `+b.ID+` "ask" is blocked: which region?`) {
			t.Fatalf("sent = %q, want the completion, then the block to both", got)
		}
		// The subscription whose target cannot be reached keeps its place.
		subs, _ := h.svc.Store.Subscriptions(h.ctx, kanban.DefaultBoard)
		for _, s := range subs {
			if s.ID == "sub_3" && s.Cursor != "" {
				t.Errorf("the unreachable subscription's cursor moved to %s", s.Cursor)
			}
		}
	})
}

// A subscription's kinds are read from words separated by commas or
// spaces, each once; an unknown one is refused, naming the kinds.
func TestParseNotifyEvents(t *testing.T) {
	got, err := kanban.ParseNotifyEvents("Completed, blocked  approved,completed", "archived")
	if err != nil || strings.Join(got, " ") != "completed blocked approved archived" {
		t.Errorf("ParseNotifyEvents = %q, %v", got, err)
	}
	if got, err := kanban.ParseNotifyEvents(" ", ""); err != nil || got != nil {
		t.Errorf("no kinds = %q, %v; want none (the default set)", got, err)
	}
	_, err = kanban.ParseNotifyEvents("completed,finished")
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), `"finished" is not an event kind; the kinds are created,`) {
		t.Errorf("an unknown kind: %v", err)
	}
	for _, k := range []string{kanban.EventApproved, kanban.EventArchived} {
		if _, err := kanban.ParseNotifyEvents(k); err != nil {
			t.Errorf("%s is not a notification event: %v", k, err)
		}
	}
}

// A subscription made with Subscribe hears of what happens from then
// on, not of what happened before.
func TestSubscribeHearsFromNowOn(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		before := h.create(kanban.CreateSpec{Title: "before"})
		if _, err := h.svc.Block(h.ctx, before.ID, 0, kanban.BlockNeedsInput, "old news", "ann"); err != nil {
			t.Fatal(err)
		}
		s, err := kanban.Subscribe(h.ctx, h.svc.Store, kanban.Subscription{Board: kanban.DefaultBoard, Target: "telegram:1", Events: []string{kanban.EventBlocked}})
		if err != nil || !strings.HasPrefix(s.ID, "sub_") || s.Cursor == "" || !s.CreatedAt.Equal(t0) {
			t.Fatalf("Subscribe = %+v, %v; want a new id, the board's cursor and the store's time", s, err)
		}
		after := h.create(kanban.CreateSpec{Title: "after"})
		if _, err := h.svc.Block(h.ctx, after.ID, 0, kanban.BlockNeedsInput, "news", "ann"); err != nil {
			t.Fatal(err)
		}
		if err := h.notifier().Send(h.ctx); err != nil {
			t.Fatal(err)
		}
		if got := h.sent(); len(got) != 1 || !strings.Contains(got[0], after.ID) {
			t.Errorf("sent = %q, want the block made after subscribing alone", got)
		}
	})
}
