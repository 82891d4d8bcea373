package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/mcpserver"
)

// An MCP server's tool is the agent's: the model is offered it, calls
// it, and reads its result in its next request; /mcp lists the server.
func TestGatewayOffersMCPTools(t *testing.T) {
	srv := httptest.NewServer(mcpserver.Handler())
	t.Cleanup(srv.Close)
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.MCPServers = map[string]config.MCPServer{"test": {URL: srv.URL}}
	h := startGateway(t, cfg, Options{})

	var listing string
	testkit.Eventually(t, "/mcp to list the server ready", func() bool {
		listing = h.chat("c-status", "/mcp")
		return strings.Contains(listing, "test (http): ready, 6 tools")
	})
	if !strings.Contains(listing, "mcp_test_echo") {
		t.Errorf("/mcp = %q, want the server's tools", listing)
	}

	model.Script(
		testkit.CallTools(testkit.ToolCall("mcp_test_echo", `{"text":"from the MCP server"}`)),
		testkit.Reply("done"),
	)
	asked := model.Count()
	if got := h.chat("c1", "echo something"); got != "done" {
		t.Errorf("reply %q", got)
	}
	reqs := model.Requests()[asked:]
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"mcp_test_echo"`) {
		t.Errorf("the first request did not offer the MCP tool: %s", reqs[0].Body)
	}
	if body := string(reqs[1].Body); !strings.Contains(body, `"role":"tool"`) || !strings.Contains(body, "from the MCP server") {
		t.Errorf("the MCP tool's result did not reach the model: %s", body)
	}
	if _, metrics := h.do("GET", "/metrics", ""); !strings.Contains(metrics, `herald_mcp_call_duration_seconds_count{result="ok",server="test",tool="echo"} 1`) {
		t.Errorf("/metrics does not count the MCP call")
	}
}
