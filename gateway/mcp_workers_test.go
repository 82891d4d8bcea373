package gateway

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/mcpserver"
	"github.com/heraldgw/herald/kanban"
)

// A kanban herald-lane worker has the MCP servers' tools when the
// gateway's toolsets include mcp: its model is offered them beside the
// worker's own.
func TestGatewayHeraldLaneWorkerHasMCPTools(t *testing.T) {
	srv := httptest.NewServer(mcpserver.Handler())
	t.Cleanup(srv.Close)
	model := testkit.NewModelServer(t)
	var (
		mu      sync.Mutex
		offered []string // the tools of the worker's first request
	)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		if goalOf(req) != "Goal: look it up" {
			return testkit.Reply("echo")
		}
		if afterTool(req) {
			return testkit.Reply("reported")
		}
		mu.Lock()
		if offered == nil {
			for _, tl := range req.Tools {
				offered = append(offered, tl.Name)
			}
		}
		mu.Unlock()
		return testkit.CallTools(testkit.ToolCall("kanban_complete", `{"summary":"## What I did\nlooked it up"}`))
	})
	cfg := testConfig(t, model)
	cfg.MCPServers = map[string]config.MCPServer{"test": {URL: srv.URL}}
	h := startGateway(t, cfg, Options{})
	testkit.Eventually(t, "the MCP server ready", func() bool {
		return strings.Contains(h.chat("c-status", "/mcp"), "test (http): ready")
	})

	ctx := context.Background()
	k, _, err := h.g.boards.Create(ctx, kanban.CreateSpec{Title: "look it up", Assignee: "herald"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the card done", func() bool {
		k, err = h.g.boards.Store.Card(ctx, k.ID)
		return err == nil && k.Status == kanban.StatusDone
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(offered, "mcp_test_echo") || !slices.Contains(offered, "kanban_complete") {
		t.Errorf("the worker was offered %v, want the MCP server's tools and the worker's", offered)
	}
}
