package delegation

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/tools"
)

// TestToolRefusesBadDispatches covers what delegate_task refuses before
// it reads the store: nothing of a refused call is dispatched.
func TestToolRefusesBadDispatches(t *testing.T) {
	r := tools.NewRegistry()
	if err := r.Register(Toolset, Tool(ToolOptions{MaxChildren: 2})); err != nil {
		t.Fatal(err)
	}
	set, err := r.Set([]string{Toolset})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, args, want string
	}{
		{"nothing to do", `{}`, "nothing to delegate"},
		{"goal and tasks both", `{"goal":"a","tasks":[{"goal":"b"}]}`, "either goal or tasks"},
		{"a batch over the cap", `{"tasks":[{"goal":"a"},{"goal":"b"},{"goal":"c"}]}`, "more than delegation.max_concurrent_children (2); nothing was started"},
		{"a task without a goal", `{"tasks":[{"goal":"a"},{"goal":" "}]}`, "task 1 has no goal"},
		{"toolsets beside tasks", `{"toolsets":["mcp"],"tasks":[{"goal":"a"}]}`, "files and toolsets go with goal"},
		{"an invalid output schema", `{"goal":"a","output_schema":{"type":"no-such-type"}}`, "output_schema is not a valid JSON Schema"},
		{"steer without an id", `{"action":"steer","message":"x"}`, "needs subagent_id"},
		{"an unknown action", `{"action":"explode"}`, "invalid arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			turn := &tools.Turn{Conv: "api:c"}
			res := set.Call(context.Background(), turn, chat.ToolCall{ID: "1", Name: ToolName, Arguments: tc.args})
			if !res.IsError || !strings.Contains(res.Content, tc.want) {
				t.Errorf("result %s: want an error saying %q", res.Content, tc.want)
			}
			if w := turn.Writes(); len(w) != 0 {
				t.Errorf("a refused call dispatched %v", w)
			}
		})
	}
}
