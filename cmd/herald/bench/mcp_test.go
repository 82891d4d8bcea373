package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// serveVariable set to "1" makes this test binary the bench's MCP
// server: what `herald bench mcp-server` is in herald's own binary.
const serveVariable = "HERALD_BENCH_MCP_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serveVariable) == "1" {
		if err := ServeMCP(context.Background()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A short run calls the echo of a server process through herald's path
// and the bare SDK, every call's own text coming back, and its figures
// are times. (Herald's median is not compared with the bare one: what
// herald adds is tens of microseconds, within a busy machine's noise.)
func TestMCPCallsTheServer(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const calls = 45
	res, err := MCP(context.Background(), MCPOptions{Calls: calls, Command: exe, Env: map[string]string{serveVariable: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != calls || res.Tool != "mcp_bench_echo" {
		t.Errorf("result = %+v", res)
	}
	if want := fmt.Sprintf("herald %d", calls-1); res.Reply != want {
		t.Errorf("herald's last call read %q, want the server's echo %q", res.Reply, want)
	}
	if res.P50Us <= 0 || res.BareP50Us <= 0 || res.BareP99Us < res.BareP50Us || res.P99Us < res.P50Us {
		t.Errorf("figures = %+v", res)
	}
	if res.OverheadP50Us != res.P50Us-res.BareP50Us || res.OverheadP99Us != res.P99Us-res.BareP99Us || res.CPUUsPerCall <= 0 || res.BareCPUUsPerCall <= 0 {
		t.Errorf("figures = %+v", res)
	}
}

// A server that does not start is an error, not figures.
func TestMCPServerThatDoesNotStart(t *testing.T) {
	_, err := MCP(context.Background(), MCPOptions{Calls: 1, Command: "/nonexistent/mcp-server"})
	if err == nil {
		t.Fatal("MCP with a missing server returned no error")
	}
}
