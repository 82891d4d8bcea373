package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

// recordingGate records what it is asked and refuses what refuse says.
type recordingGate struct {
	mu     sync.Mutex
	asked  []tools.ApprovalRequest
	calls  []string // the call ids it was asked under
	refuse func(tools.ApprovalRequest) bool
}

func (g *recordingGate) Ask(ctx context.Context, _ *tools.Turn, req tools.ApprovalRequest) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, req)
	g.calls = append(g.calls, tools.CallID(ctx))
	if g.refuse != nil && g.refuse(req) {
		return errs.E("test.gate", errs.Invalid, "denied by the test")
	}
	return nil
}

// With a gate, every command is asked of it, a dangerous one with the
// pattern it matched; its refusal is what the model reads, and the
// command does not run.
func TestTerminalAsksTheGate(t *testing.T) {
	gate := &recordingGate{refuse: func(r tools.ApprovalRequest) bool { return strings.Contains(r.Action, "forbidden") }}
	set, w, root := workspaceSet(t, tools.WorkspaceOptions{Dangerous: []string{`\brm\s+-rf\b`}})
	w.SetGate(gate)
	out, res := callTool(t, set, nil, "terminal", `{"command":"rm -rf gone; echo ran"}`)
	checkResult(t, out, res, map[string]any{"output": "ran\n"}, "")
	out, res = callTool(t, set, nil, "terminal", `{"command":"echo plain"}`)
	checkResult(t, out, res, map[string]any{"output": "plain\n"}, "")
	out, res = callTool(t, set, nil, "terminal", fmt.Sprintf(`{"command":"touch %s/made; echo forbidden"}`, root))
	checkResult(t, out, res, nil, "denied by the test")
	if _, err := os.Stat(filepath.Join(root, "made")); err == nil {
		t.Error("a refused command ran")
	}
	want := []tools.ApprovalRequest{
		{Tool: "terminal", Action: "rm -rf gone; echo ran", Reason: `matches the dangerous-command pattern \brm\s+-rf\b`, Pattern: `\brm\s+-rf\b`},
		{Tool: "terminal", Action: "echo plain"},
		{Tool: "terminal", Action: fmt.Sprintf("touch %s/made; echo forbidden", root)},
	}
	if d := cmp.Diff(want, gate.asked); d != "" {
		t.Errorf("asked (-want +got):\n%s", d)
	}
	if gate.calls[0] != "call_1" {
		t.Errorf("asked under call %q, want call_1", gate.calls[0])
	}
}

// GateWith asks about the tools it names, with their arguments masked,
// in the sets made after it and the sets made from them (Without,
// Only); a refusal is
// the call's result and the handler does not run.
func TestRegistryGateWith(t *testing.T) {
	r := tools.NewRegistry()
	ran := map[string]int{}
	var mu sync.Mutex
	handler := func(name string) tools.Handler {
		return func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
			mu.Lock()
			ran[name]++
			mu.Unlock()
			return tools.Result{Content: `{"ok":true}`}, nil
		}
	}
	schema := `{"type":"object","properties":{"token":{"type":"string"}}}`
	if err := r.Register("t", tools.Tool{Name: "mcp_gh_push", Schema: []byte(schema), Handler: handler("push")},
		tools.Tool{Name: "read", Schema: []byte(schema), Handler: handler("read")}); err != nil {
		t.Fatal(err)
	}
	r.RedactWith(func(s string) string { return strings.ReplaceAll(s, "s3cret", "***") })
	gate := &recordingGate{refuse: func(req tools.ApprovalRequest) bool { return true }}
	r.GateWith(gate, func(name string) bool { return strings.HasPrefix(name, "mcp_gh_") })
	set, err := r.Set([]string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	only, err := set.Only("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*tools.Set{set, set.Without("nothing"), only} {
		res := s.Call(context.Background(), &tools.Turn{Conv: "c"}, chat.ToolCall{ID: "c1", Name: "mcp_gh_push", Arguments: `{"token":"s3cret"}`})
		if !res.IsError || !strings.Contains(res.Content, "denied by the test") {
			t.Errorf("a refused call: got %s", res.Content)
		}
		if res := s.Call(context.Background(), &tools.Turn{Conv: "c"}, chat.ToolCall{ID: "c2", Name: "read", Arguments: `{}`}); res.IsError {
			t.Errorf("a tool the gate does not name: %s", res.Content)
		}
	}
	want := tools.ApprovalRequest{Tool: "mcp_gh_push", Action: `{"token":"***"}`, Reason: "approvals.tools names mcp_gh_push", Pattern: "mcp_gh_push"}
	if d := cmp.Diff([]tools.ApprovalRequest{want, want, want}, gate.asked); d != "" {
		t.Errorf("asked (-want +got):\n%s", d)
	}
	if ran["push"] != 0 || ran["read"] != 3 {
		t.Errorf("ran %v, want read thrice and push never", ran)
	}
}
