package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

// A tool result that holds one of herald's secrets (a command printed
// it, a file held it) reaches the model, and the history, masked by the
// redactor the registry was given.
func TestToolResultsReachTheModelRedacted(t *testing.T) {
	const secret = "sk-live-model-key-1111"
	ms := testkit.NewModelServer(t)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: modelName, Timeout: 10 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	reg.RedactWith(redact.New([]string{secret}).String)
	leak := tools.Tool{
		Name:        "leak",
		Description: "Prints the environment.",
		Handler: func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
			return tools.JSON(map[string]any{"output": "HERALD_MODEL_API_KEY=" + secret + "\nPATH=/usr/bin\n"}), nil
		},
	}
	if err := reg.Register("test", leak); err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{"test"})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Client: client, Tools: set, Clock: clock.NewFake(t0)}
	ms.Script(testkit.CallTools(testkit.ToolCall("leak", `{}`)), testkit.Reply("done"))
	out, err := a.Run(context.Background(), ptr(input("run env")))
	if err != nil {
		t.Fatal(err)
	}
	reqs := ms.WaitRequests(2)
	var seen string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			seen = m.Content
		}
	}
	if strings.Contains(string(reqs[1].Body), secret) || !strings.Contains(seen, "HERALD_MODEL_API_KEY="+redact.Mask) {
		t.Errorf("the model read the tool result %q; want the key masked", seen)
	}
	for _, m := range out.History {
		if strings.Contains(m.Content, secret) {
			t.Errorf("the history keeps the secret: %+v", m)
		}
	}
}
