package kanban_test

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/kanban"
)

// A completion check runs in the built environment: herald's secrets,
// by name or by value, stay out even when passed through.
func TestCompletionCheckEnvironmentHoldsNoSecret(t *testing.T) {
	cfg := config.Default()
	cfg.Model.APIKey = "sk-from-the-file-1111"
	cfg.Tools.EnvPassthrough = []string{"ANTHROPIC_API_KEY", "HERALD_API_KEY", "HERALD_TEST_PASSED"}
	t.Setenv("ANTHROPIC_API_KEY", "sk-from-the-file-1111")
	t.Setenv("HERALD_API_KEY", "api-key-2222")
	t.Setenv("GH_TOKEN", "gh-3333")
	t.Setenv("HERALD_TEST_PASSED", "passed-4444")
	out, ok, err := kanban.ServiceFor(nil, cfg).Check(context.Background(), kanban.Card{CompletionCheck: "env"}, t.TempDir())
	if err != nil || !ok {
		t.Fatalf("check = %q, %v, %v", out, ok, err)
	}
	for _, secret := range []string{"sk-from-the-file-1111", "api-key-2222", "gh-3333"} {
		if strings.Contains(out, secret) {
			t.Errorf("the check saw %s: %s", secret, out)
		}
	}
	if !strings.Contains(out, "HERALD_TEST_PASSED=passed-4444") {
		t.Errorf("the check lacks the variable passed through: %s", out)
	}
}
