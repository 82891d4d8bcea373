package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Through a real gateway and a real browser: the Conversations page
// lists every conversation, whatever its platform, and a message posted
// through the API shows in the open list and in the open conversation's
// timeline without a reload.
func TestDashboardConversationsLive(t *testing.T) {
	const key = "dash-key-0123456789"
	model := testkit.NewModelServer(t)
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		return testkit.Reply("Noted: " + r.LastUser())
	})
	chat := &adaptertest.Adapter{Name: "chatfake", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
		return adapters.SendResult{Outcome: adapters.Accepted, MessageID: "m-" + m.ID}
	}}
	h := startUIGateway(t, model, key, chat, nil)
	ctx := context.Background()

	// A chat's conversation, and one of the API's with a turn done.
	if _, err := h.g.Store().Sessions().Append(ctx, sessions.Inbound{Conv: "chatfake:42", Sender: "7", Text: "good morning"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the chat's turn's commit", func() bool {
		_, body := h.do("GET", "/api/v1/conversations/chatfake:42", "")
		return strings.Contains(body, "Noted: good morning")
	})
	post := func(text string) {
		t.Helper()
		if code, body := h.do("POST", "/api/v1/conversations/web/messages", fmt.Sprintf(`{"text":%q}`, text)); code != http.StatusAccepted {
			t.Fatalf("post a message: %d %s", code, body)
		}
	}
	post("the first question")
	testkit.Eventually(t, "the first turn's commit", func() bool {
		_, body := h.do("GET", "/api/v1/conversations/web", "")
		return strings.Contains(body, "Noted: the first question")
	})

	p := openPage(t)
	p.signIn(h.base, key, "")
	p.show("conversations")
	p.until(`!!document.querySelector('#conv-list tr[data-id="api:web"]') && !!document.querySelector('#conv-list tr[data-id="chatfake:42"]')`)
	if first := p.eval(`document.querySelector('#conv-list tbody tr').dataset.id`); first != "api:web" {
		t.Errorf("the conversation active last is %q, want api:web", first)
	}

	// Open it from the list: its queue and its timeline.
	p.run(chromedp.Click(chromedp.CSS(`#conv-list a[href="#/conversations?key=api%3Aweb"]`)))
	p.until(`!!document.querySelector('#conv-timeline') && document.querySelector('#conv-timeline').innerText.includes('Noted: the first question')`)
	if q := p.text(`#conv-queue [data-field="queued"]`); q != "0" {
		t.Errorf("queued = %q, want 0 once the turn committed", q)
	}

	// A message posted now shows in the open page, which is not
	// reloaded: the mark set on its window stays.
	p.eval(`window.heraldMark = 'still here'; 'ok'`)
	post("the second question")
	p.until(`document.querySelector('#conv-timeline').innerText.includes('Noted: the second question')`)
	p.until(`document.querySelector('#conv-list tr[data-id="api:web"]').innerText.includes(' in / ')`)
	if mark := p.eval(`String(window.heraldMark)`); mark != "still here" {
		t.Errorf("the page was reloaded (mark %q)", mark)
	}
	timeline := p.text("#conv-timeline")
	for _, want := range []string{"the first question", "the second question", "assistant"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline %q has no %q", timeline, want)
		}
	}
	p.shot("conversations")
	p.clean("conversations")
}
