package sessions

import (
	"errors"
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
