package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchMCPCommand() *cobra.Command {
	var (
		opt    bench.MCPOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Measure what herald adds to a stdio MCP server's tool call",
		Long: `Call a trivial tool (echo) of a stdio MCP server --calls times through
herald's path, as the agent calls mcp_bench_echo: the arguments checked
against the tool's schema, the call through herald's MCP manager and the
SDK's session, the result capped and redacted. Beside it, in the same run,
the bare call: the SDK's CallTool alone, on a server process of the same
kind. The server is this binary itself, one process for each side. The
two take turns, in rounds. It reports p50 and p99 of each, in
microseconds, and herald's overhead: its quantile less the bare one.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.Calls < 1 {
				return usagef("--calls must be positive")
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding herald's binary, the MCP server it starts: %w", err)
			}
			opt.Command, opt.Args = exe, []string{"bench", "mcp-server"}
			res, err := bench.MCP(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchMCP)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Calls, "calls", bench.DefaultMCPCalls, "calls of each side")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// benchMCPServerCommand is the stdio MCP server herald bench mcp starts:
// hidden, it is no command for a person.
func benchMCPServerCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "mcp-server",
		Short:  "Serve the MCP server herald bench mcp calls, over stdio",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.ServeMCP(cmd.Context())
		},
	}
}

func printBenchMCP(m *Main, r bench.MCPResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"%d calls of each side; herald's last read %q\n"+
			"herald     p50 %8.1f µs   p99 %8.1f µs   cpu %6.1f µs a call   (%s: schema, manager, SDK, cap, redact)\n"+
			"bare       p50 %8.1f µs   p99 %8.1f µs   cpu %6.1f µs a call   (the SDK's CallTool)\n"+
			"overhead   p50 %8.1f µs   p99 %8.1f µs\n",
		r.Calls, r.Reply,
		r.P50Us, r.P99Us, r.CPUUsPerCall, r.Tool,
		r.BareP50Us, r.BareP99Us, r.BareCPUUsPerCall,
		r.OverheadP50Us, r.OverheadP99Us)
	return err
}
