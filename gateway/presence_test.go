package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

var chatRoom = outbox.Target{Platform: "chat", Chat: "room"}

// Through the gateway: a turn on a platform with presence that runs tools
// shows typing and one status line, removed when the turn ended, and the
// answer comes through Send.
func TestGatewayShowsARunningTurn(t *testing.T) {
	model := testkit.NewModelServer(t)
	sent := make(chan outbox.Message, 4)
	pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "chat", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
		sent <- m
		return adapters.SendResult{Outcome: adapters.Accepted, MessageID: "r1"}
	}}}
	h := startGateway(t, testConfig(t, model), Options{Adapters: []adapters.Adapter{pa}})

	model.Script(
		testkit.CallTools(testkit.ToolCall("memory", `{"action":"add","text":"likes tea"}`)),
		testkit.CallTools(testkit.ToolCall("memory", `{"action":"list"}`)).After(100*time.Millisecond),
		testkit.Reply("noted").After(300*time.Millisecond),
	)
	in := sessions.Inbound{Conv: "chat:room", Sender: "u1", MessageID: "m1", Text: "remember I like tea"}
	if err := h.g.Router().Deliver(context.Background(), in); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	select {
	case m := <-sent:
		if m.Text != "noted" || m.Target != chatRoom {
			t.Errorf("sent %q to %+v, want noted to %+v", m.Text, m.Target, chatRoom)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reply was sent")
	}
	testkit.Eventually(t, "the status line removed", func() bool { return pa.Count("clear") == 1 })

	calls := pa.Calls()
	if calls[0].Kind != "typing" {
		t.Errorf("the first call is %s, want typing", calls[0].Kind)
	}
	var posts []adaptertest.PresenceCall
	for _, c := range calls {
		if c.Kind == "post" {
			posts = append(posts, c)
		}
	}
	if len(posts) != 1 || posts[0].Text != "Working… (tool: memory)" {
		t.Errorf("status lines posted: %+v, want one naming the memory tool", posts)
	}
	if c := calls[len(calls)-1]; c.Kind != "clear" || c.ID != "s1" {
		t.Errorf("the last call is %s %s, want clear s1", c.Kind, c.ID)
	}
	// The same tool ran twice within StatusEvery: the line already said it.
	if n := pa.Count("edit"); n != 0 {
		t.Errorf("%d edits, want none", n)
	}
}
