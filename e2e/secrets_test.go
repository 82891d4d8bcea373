package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// TestTerminalEnvShowsTheModelNoSecret runs the real binary with its
// model key, API key and a bot token in its environment, and has the
// model ask the terminal tool for `env`: what the model receives holds
// none of them, while a name passed through is there.
func TestTerminalEnvShowsTheModelNoSecret(t *testing.T) {
	t.Parallel()
	const (
		modelKey = "sk-e2e-model-key-1111"
		apiKey   = "e2e-api-key-2222"
		ghToken  = "gh-e2e-token-4444"
	)
	tg := telegramfake.New(t, "")
	model := testkit.NewModelServer(t)
	model.RequireAPIKey(modelKey)
	model.Script(
		testkit.CallTools(testkit.ToolCall("terminal", `{"command":"env"}`)),
		testkit.Reply("done"),
	)
	home := t.TempDir()
	workspace := t.TempDir()
	writeConfig(t, home, `
http:
  addr: 127.0.0.1:0
tools:
  env_passthrough: [HERALD_E2E_PASSED, HERALD_API_KEY, TELEGRAM_BOT_TOKEN]
`)
	gw := startChild(t, "gateway", home,
		"HERALD_MODEL_BASE_URL="+model.URL(), "HERALD_MODEL="+modelName,
		"HERALD_MODEL_API_KEY="+modelKey, "HERALD_API_KEY="+apiKey,
		"TELEGRAM_BOT_TOKEN="+tg.Token(), "TELEGRAM_API_URL="+tg.URL(), "GITHUB_TOKEN="+ghToken,
		"HERALD_TOOLS_WORKSPACE="+workspace, "HERALD_E2E_PASSED=passed-5555",
	)
	c := openAIClient(gw.base, "e2e-env", option.WithAPIKey(apiKey))
	if reply := chat(t, c, "show me the environment"); reply != "done" {
		t.Fatalf("reply %q, want done", reply)
	}
	reqs := model.WaitRequests(2)
	var result string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			result = m.Content
		}
	}
	if !strings.Contains(result, "HERALD_E2E_PASSED=passed-5555") || !strings.Contains(result, "PATH="+os.Getenv("PATH")) {
		t.Errorf("the terminal's result %q lacks the base set or the name passed through", result)
	}
	for _, r := range reqs {
		for _, secret := range []string{modelKey, apiKey, tg.Token(), ghToken} {
			if strings.Contains(string(r.Body), secret) {
				t.Errorf("request %d to the model holds %q: %s", r.Seq, secret, r.Body)
			}
		}
	}
}
