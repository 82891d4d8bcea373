package telegram_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// approval is an approval's four buttons, in order.
var approval = []outbox.Button{
	{Text: "Allow once", Data: "/approve once ap_1"},
	{Text: "Allow this session", Data: "/approve session ap_1"},
	{Text: "Always allow", Data: "/approve always ap_1"},
	{Text: "Deny", Data: "/deny ap_1"},
}

// keyboardOf is the inline keyboard the adapter makes of approval.
func keyboardOf(buttons []outbox.Button) [][]telegramfake.Button {
	var rows [][]telegramfake.Button
	for _, b := range buttons {
		rows = append(rows, []telegramfake.Button{{Text: b.Text, Data: b.Data}})
	}
	return rows
}

func sendOK(t *testing.T, a *telegram.Adapter, m outbox.Message) string {
	t.Helper()
	res := a.Send(context.Background(), m)
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %v %q", res.Outcome, res.Reason)
	}
	return res.MessageID
}

func TestButtonsGoUnderTheLastPartInOrder(t *testing.T) {
	for _, tc := range []struct {
		desc string
		text string
	}{
		{desc: "one part", text: "Run `rm -rf build`?"},
		{desc: "many parts", text: longReply(9000)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fake, a := sender(t)
			m := dm("o1", tc.text)
			m.Buttons = approval
			sendOK(t, a, m)
			sent := fake.Sent(user)
			for i, s := range sent[:len(sent)-1] {
				if s.Buttons != nil {
					t.Errorf("part %d has buttons %v", i, s.Buttons)
				}
			}
			if diff := cmp.Diff(keyboardOf(approval), sent[len(sent)-1].Buttons); diff != "" {
				t.Errorf("the last part's keyboard (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPressIsDeliveredThenAnswered(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		target outbox.Target
		chat   int64
		want   sessions.Inbound // without MessageID and MetaPressed
	}{
		{
			desc:   "dm",
			target: outbox.Target{Platform: telegram.Platform, Chat: "77"},
			chat:   77,
			want: sessions.Inbound{Conv: "telegram:77", Sender: "77", Text: "/approve session ap_1",
				Meta: map[string]string{telegram.MetaChatType: "private"}},
		},
		{
			desc:   "group, a session per user",
			target: outbox.Target{Platform: telegram.Platform, Chat: "-100"},
			chat:   -100,
			want: sessions.Inbound{Conv: "telegram:-100:user:77", Sender: "77", Text: "/approve session ap_1",
				Meta: map[string]string{telegram.MetaChatType: "supergroup", sessions.MetaTarget: "telegram:-100"}},
		},
		{
			desc:   "forum topic, shared",
			target: outbox.Target{Platform: telegram.Platform, Chat: "-100", Thread: "5"},
			chat:   -100,
			want: sessions.Inbound{Conv: "telegram:-100:5", Sender: "77", Text: "/approve session ap_1",
				Meta: map[string]string{telegram.MetaChatType: "supergroup"}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fake, a, in := polling(t, nil)
			// The press is answered only after the inbox took it.
			in.fail = func(int, sessions.Inbound) error {
				if n := len(fake.Calls("answerCallbackQuery")); n != 0 {
					t.Errorf("%d answers before the press was delivered", n)
				}
				return nil
			}
			id := sendOK(t, a, outbox.Message{Target: tc.target, Text: "Run `make clean`?", Buttons: approval})
			mid, _ := strconv.Atoi(id)
			u := fake.Press(telegramfake.Pressing{Chat: tc.chat, Message: mid, From: 77, Data: approval[1].Data})

			got := in.Wait(t, 1)[0]
			want := tc.want
			want.MessageID = "press:cb" + strconv.FormatInt(u.ID, 10)
			want.Meta[sessions.MetaPressed] = id
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("inbound (-want +got):\n%s", diff)
			}
			ans := fake.WaitCalls("answerCallbackQuery", 1)[0]
			if ans.Params["callback_query_id"] != "cb"+strconv.FormatInt(u.ID, 10) || ans.Params["text"] != "Got it" {
				t.Errorf("answer %v", ans.Params)
			}
		})
	}
}

func TestPressOfAUserNotAllowedIsDropped(t *testing.T) {
	fake, a, in := polling(t, func(o *telegram.Options) { o.Access = adapters.NewAccess(telegram.Platform, []string{"42"}, false) })
	id, _ := strconv.Atoi(sendOK(t, a, outbox.Message{Target: outbox.Target{Platform: telegram.Platform, Chat: "-100"}, Text: "Run it?", Buttons: approval}))
	fake.Press(telegramfake.Pressing{Chat: -100, Message: id, From: 77, Data: approval[0].Data})
	fake.Press(telegramfake.Pressing{Chat: -100, Message: id, From: 42, Data: approval[3].Data})
	got := in.Wait(t, 1)
	fake.WaitCalls("answerCallbackQuery", 1)
	if len(in.All()) != 1 || got[0].Sender != "42" || got[0].Text != "/deny ap_1" {
		t.Errorf("delivered %+v, want only the allowed user's press", in.All())
	}
	if n := len(fake.Calls("answerCallbackQuery")); n != 1 {
		t.Errorf("%d presses answered, want 1", n)
	}
}

func TestPressNotDeliveredIsNotAnsweredAndComesAgain(t *testing.T) {
	fake, a, in := polling(t, nil)
	in.fail = func(n int, _ sessions.Inbound) error {
		if n == 1 {
			return errors.New("store down")
		}
		if got := len(fake.Calls("answerCallbackQuery")); got != 0 {
			t.Errorf("%d answers before the press was delivered", got)
		}
		return nil
	}
	id, _ := strconv.Atoi(sendOK(t, a, dm("o1", "Run it?")))
	fake.Press(telegramfake.Pressing{Chat: user, Message: id, Data: "/deny ap_1"})
	in.Wait(t, 1)
	fake.WaitCalls("answerCallbackQuery", 1)
}

func TestEditReplacesTheTextAndRemovesTheButtons(t *testing.T) {
	fake, a := sender(t)
	m := dm("o1", "Run `make clean`?")
	m.Buttons = approval
	id := sendOK(t, a, m)

	edit := dm("o2", "Allowed once.")
	edit.Edits = id
	if got := sendOK(t, a, edit); got != id {
		t.Errorf("edit's id %q, want the edited message's %q", got, id)
	}
	sent := fake.Sent(user)
	if len(sent) != 1 || sent[0].Text != "Allowed once." || sent[0].Buttons != nil || sent[0].Edits != 1 {
		t.Errorf("chat shows %+v, want the one message edited, without buttons", sent)
	}
}

func TestEditOfAMissingMessageSendsItAnew(t *testing.T) {
	fake, a := sender(t)
	edit := dm("o2", "Denied.")
	edit.Edits = "999"
	id := sendOK(t, a, edit)
	sent := fake.Sent(user)
	if len(sent) != 1 || sent[0].Text != "Denied." || strconv.Itoa(sent[0].ID) != id {
		t.Errorf("chat shows %+v (result %q), want Denied. sent anew", sent, id)
	}
}
