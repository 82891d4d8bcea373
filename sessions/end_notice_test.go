package sessions

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/heraldgw/herald/outbox"
)

func TestEndNotice(t *testing.T) {
	api := outbox.Target{Platform: "api", Chat: "c"}
	chat := outbox.Target{Platform: "telegram", Chat: "42"}
	answerEach := func(o outbox.Target) bool { return o.Platform == "api" }
	reply := []outbox.Message{{Target: api, Text: "done so far", ReplyTo: "m1", Kind: "reply"}}
	sent := []outbox.Message{{Target: outbox.Target{Platform: "api", Chat: "other"}, Text: "fyi"}}
	const (
		stopped     = "Stopped."
		interrupted = "Interrupted by a newer message; the reply to it answers this one too."
		renewed     = "Stopped: the conversation was started anew."
	)
	tests := []struct {
		desc   string
		origin outbox.Target
		msgID  string
		cause  error
		stop   *stopCause
		msgs   []outbox.Message
		each   func(outbox.Target) bool
		want   string
	}{
		{desc: "/stop in a chat", origin: chat, msgID: "m1", stop: &stopCause{reason: "by user"}, want: stopped},
		{desc: "/stop from the API", origin: api, msgID: "m1", stop: &stopCause{reason: "by user"}, each: answerEach, want: stopped},
		{desc: "interrupted in a chat", origin: chat, msgID: "m1", cause: errInterrupted, each: answerEach},
		{desc: "interrupted from the API", origin: api, msgID: "m1", cause: errInterrupted, each: answerEach, want: interrupted},
		{desc: "interrupted, no origin awaits each answer", origin: api, msgID: "m1", cause: errInterrupted},
		{desc: "interrupted after queueing a reply to the message", origin: api, msgID: "m1", cause: errInterrupted, msgs: reply, each: answerEach},
		{desc: "interrupted after sending elsewhere", origin: api, msgID: "m1", cause: errInterrupted, msgs: sent, each: answerEach, want: interrupted},
		{desc: "interrupted, the message has no id", origin: api, cause: errInterrupted, each: answerEach},
		{desc: "/new in a chat", origin: chat, msgID: "m1", stop: &stopCause{reason: stopReasonNew}, each: answerEach},
		{desc: "/new from the API", origin: api, msgID: "m1", stop: &stopCause{reason: stopReasonNew}, each: answerEach, want: renewed},
		{desc: "ended for another reason", origin: api, msgID: "m1", cause: errors.New("lease lost"), each: answerEach},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			w := &TurnWorker{answerEach: tt.each}
			if got := w.endNotice(tt.origin, tt.msgID, tt.cause, tt.stop, tt.msgs); got != tt.want {
				t.Errorf("endNotice = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSteeredNotices(t *testing.T) {
	api := outbox.Target{Platform: "api", Chat: "c"}
	chat := outbox.Target{Platform: "slack", Chat: "C1"}
	answerEach := func(o outbox.Target) bool { return o.Platform == "api" }
	reply := outbox.Message{Target: api, Text: "done", ReplyTo: "m1", Kind: "reply"}
	notice := func(id string) outbox.Message {
		return outbox.Message{Target: api, Text: noticeSteered, ReplyTo: id, Kind: KindNotice}
	}
	tests := []struct {
		desc    string
		origin  outbox.Target
		steered []string
		each    func(outbox.Target) bool
		want    []outbox.Message
	}{
		{desc: "from the API, one per steered message with an id", origin: api, steered: []string{"m2", "", "m3"}, each: answerEach,
			want: []outbox.Message{reply, notice("m2"), notice("m3")}},
		{desc: "from the API, nothing steered", origin: api, each: answerEach, want: []outbox.Message{reply}},
		{desc: "in a chat", origin: chat, steered: []string{"m2"}, each: answerEach, want: []outbox.Message{reply}},
		{desc: "no origin awaits each answer", origin: api, steered: []string{"m2"}, want: []outbox.Message{reply}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			w := &TurnWorker{answerEach: tt.each}
			msgs := make([]outbox.Message, 1, 4)
			msgs[0] = reply
			got := w.steeredNotices(tt.origin, tt.steered, msgs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steeredNotices = %+v, want %+v", got, tt.want)
			}
			if len(got) > 1 && &got[0] == &msgs[0] {
				t.Error("steeredNotices appended into the slice it was given")
			}
			// A commit without the steered entries drops these notices.
			if kept := slices.DeleteFunc(slices.Clone(got), isSteeredNotice); !reflect.DeepEqual(kept, []outbox.Message{reply}) {
				t.Errorf("without the steered notices: %+v, want the reply only", kept)
			}
		})
	}
}
