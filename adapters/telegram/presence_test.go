package telegram_test

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
)

func TestTypingInTopic(t *testing.T) {
	fake, a := sender(t)
	if err := a.Typing(context.Background(), outbox.Target{Platform: "telegram", Chat: "-100200", Thread: "7"}); err != nil {
		t.Fatal(err)
	}
	c := fake.Calls("sendChatAction")
	if len(c) != 1 || c[0].Params["action"] != "typing" || c[0].Params["chat_id"] != "-100200" || c[0].Params["message_thread_id"] != "7" {
		t.Errorf("calls %+v, want typing in topic 7", c)
	}
}

func TestStatusLineIsEditedThenRemoved(t *testing.T) {
	fake, a := sender(t)
	ctx, to := context.Background(), outbox.Target{Platform: "telegram", Chat: "42"}

	id, err := a.Status(ctx, to, "", "running **tools**…")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"reading files", "reading files"} { // the same text twice is no error
		if got, err := a.Status(ctx, to, id, text); err != nil || got != id {
			t.Fatalf("edit: %q %v", got, err)
		}
	}
	sent := fake.Sent(user)
	if len(sent) != 1 || sent[0].Text != "reading files" || sent[0].Edits != 1 || sent[0].ParseMode != "" {
		t.Fatalf("status %+v, want one plain line edited once", sent)
	}
	if c := fake.Calls("sendMessage"); c[0].Params["disable_notification"] != "true" {
		t.Error("the status line notified the user")
	}
	for range 2 { // one already gone is cleared too
		if err := a.ClearStatus(ctx, to, id); err != nil {
			t.Fatal(err)
		}
	}
	if sent := fake.Sent(user); len(sent) != 0 {
		t.Errorf("status still there: %+v", sent)
	}
}

func TestPresenceErrors(t *testing.T) {
	fake, a := sender(t)
	ctx, to := context.Background(), outbox.Target{Platform: "telegram", Chat: "42"}
	fake.Fail("sendChatAction", 1, telegramfake.ServerError)
	if err := a.Typing(ctx, to); !errs.Is(err, errs.Unavailable) {
		t.Errorf("Typing on 500: %v, want Unavailable", err)
	}
	fake.Fail("sendMessage", 1, telegramfake.Blocked)
	if _, err := a.Status(ctx, to, "", "x"); !errs.Is(err, errs.Invalid) {
		t.Errorf("Status when blocked: %v, want Invalid", err)
	}
	if _, err := a.Status(ctx, to, "not-an-id", "x"); !errs.Is(err, errs.Invalid) {
		t.Errorf("Status with a bad id: %v, want Invalid", err)
	}
}
