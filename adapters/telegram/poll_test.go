package telegram_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/sessions"
)

func TestPollingRecoversFromGetUpdatesFailures(t *testing.T) {
	fake := telegramfake.New(t, "")
	fake.Fail("getUpdates", 2, telegramfake.BadGateway)
	fake.Fail("getUpdates", 2, telegramfake.ServerError)
	fake.Fail("getUpdates", 1, telegramfake.Failure{Status: 409, Description: "Conflict: terminated by other getUpdates request"})
	u := fake.Queue(telegramfake.Incoming{From: 42, Text: "still there?"})
	in := newInbox()
	run(t, newAdapter(t, options(fake)), in)

	got := in.Wait(t, 1)
	fake.WaitConfirmed(u.ID)
	if got[0].Text != "still there?" {
		t.Errorf("delivered %q", got[0].Text)
	}
	var statuses []int
	for _, c := range fake.Calls("getUpdates") {
		statuses = append(statuses, c.Status)
	}
	if len(statuses) < 6 || statuses[0] != 502 || statuses[3] != 500 || statuses[4] != 409 || statuses[5] != 200 {
		t.Errorf("getUpdates answered %v, want 5 failures, then the poll going on", statuses)
	}
	if n := len(in.All()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

func TestUndeliveredUpdateIsReceivedAgain(t *testing.T) {
	fake := telegramfake.New(t, "")
	u := fake.Queue(telegramfake.Incoming{From: 42, Text: "first"})
	next := fake.Queue(telegramfake.Incoming{From: 42, Text: "second"})
	in := newInbox()
	var mu sync.Mutex
	var offsets []int64 // the confirmed offset at each delivery attempt
	in.fail = func(n int, _ sessions.Inbound) error {
		mu.Lock()
		offsets = append(offsets, fake.Confirmed())
		mu.Unlock()
		if n == 1 {
			return errs.E("store.Append", errs.Unavailable, "redis is down")
		}
		return nil
	}
	run(t, newAdapter(t, options(fake)), in)

	got := in.Wait(t, 2)
	fake.WaitConfirmed(next.ID)
	if got[0].Text != "first" || got[1].Text != "second" {
		t.Fatalf("delivered %q then %q, want first then second", got[0].Text, got[1].Text)
	}
	mu.Lock()
	defer mu.Unlock()
	// The refused attempt and the retry both saw the update unconfirmed.
	if len(offsets) < 2 || offsets[0] > u.ID || offsets[1] > u.ID {
		t.Errorf("confirmed offsets at the attempts %v: update %d was confirmed before the inbox took it", offsets, u.ID)
	}
	if n := fake.Served(u.ID); n < 2 {
		t.Errorf("update served %d times, want it served again after the failure", n)
	}
}

func TestInvalidInboundIsDroppedNotRetried(t *testing.T) {
	fake := telegramfake.New(t, "")
	bad := fake.Queue(telegramfake.Incoming{From: 42, Text: "refused for good"})
	fake.Queue(telegramfake.Incoming{From: 42, Text: "fine"})
	in := newInbox()
	in.fail = func(_ int, m sessions.Inbound) error {
		if strings.HasPrefix(m.Text, "refused") {
			return errs.E("sessions.Router.Deliver", errs.Invalid, "no")
		}
		return nil
	}
	run(t, newAdapter(t, options(fake)), in)
	got := in.Wait(t, 1)
	fake.WaitConfirmed(bad.ID + 1)
	if got[0].Text != "fine" || fake.Served(bad.ID) != 1 {
		t.Errorf("delivered %q, bad update served %d times; want it dropped after one try", got[0].Text, fake.Served(bad.ID))
	}
}

func TestOnePollerAtATime(t *testing.T) {
	fake, _, in := polling(t, nil)
	fake.SetMaxPoll(20 * time.Millisecond)
	for range 5 {
		fake.Queue(telegramfake.Incoming{From: 42, Text: "hi"})
	}
	in.Wait(t, 5)
	fake.WaitCalls("getUpdates", 3)
	if n := fake.MaxConcurrentPolls(); n != 1 {
		t.Errorf("%d getUpdates at once, want 1", n)
	}
	if n := fake.Conflicts(); n != 0 {
		t.Errorf("%d conflicts, want none", n)
	}
	if len(fake.Calls("deleteWebhook")) != 1 {
		t.Error("polling did not drop a webhook first")
	}
}

func TestUpdatesNotForHeraldAreConfirmed(t *testing.T) {
	fake, _, in := polling(t, nil)
	first := fake.QueueRaw(map[string]any{"edited_message": map[string]any{"message_id": 1}})
	fake.QueueRaw(map[string]any{"message": "not an object"})
	fake.QueueRaw(map[string]any{"callback_query": map[string]any{"id": "1"}})
	last := fake.Queue(telegramfake.Incoming{From: 42, Text: "hi"})
	got := in.Wait(t, 1)
	fake.WaitConfirmed(last.ID)
	if len(in.All()) != 1 || got[0].Text != "hi" || fake.Served(first) != 1 {
		t.Errorf("delivered %+v; first update served %d times, want once", in.All(), fake.Served(first))
	}
}
