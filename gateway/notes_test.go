package gateway

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/testkit"
)

// A gateway that found a user with no notes reads none for that user's
// next turns; a note another gateway on the store adds for the user
// reaches its next turn's prompt all the same, told by the note's
// signal.
func TestGatewayNotesAcrossGateways(t *testing.T) {
	for _, store := range sharedStores {
		t.Run(store.backend, func(t *testing.T) {
			point := store.point(t)
			model := testkit.NewModelServer(t)
			var knows atomic.Int32 // requests whose prompt holds the note
			model.Respond(func(r testkit.RecordedRequest) testkit.Step {
				if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "likes tea") {
					knows.Add(1)
				}
				switch last := r.Messages[len(r.Messages)-1]; {
				case last.Role == "tool":
					return testkit.Reply("noted")
				case strings.HasPrefix(r.LastUser(), "remember"):
					return testkit.CallTools(testkit.ToolCall("memory", `{"action":"add","text":"likes tea"}`))
				}
				return testkit.Reply("ok " + r.LastUser())
			})
			chat := newFileChat(nil)
			start := func(name string) *gw {
				cfg := testConfig(t, model)
				point(&cfg)
				return startGateway(t, cfg, Options{Name: name, Adapters: []adapters.Adapter{chat}})
			}
			a, b := start("a"), start("b")
			b.say("chatfake:2", "u1", "hello")
			waitSent(t, chat, "chatfake:2", "ok hello")
			a.say("chatfake:1", "u1", "remember I like tea")
			waitSent(t, chat, "chatfake:1", "noted")
			if knows.Load() != 0 {
				t.Fatalf("a prompt held the note before it was added")
			}
			i := 0
			testkit.Eventually(t, "the note in gateway b's next prompt", func() bool {
				i++
				text := fmt.Sprintf("what do I like %d", i)
				b.say("chatfake:2", "u1", text)
				waitSent(t, chat, "chatfake:2", "ok "+text)
				return knows.Load() > 0
			})
		})
	}
}
