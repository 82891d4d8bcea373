package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/mcp"
)

func (m *Main) mcpCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "List the MCP servers and their tools; test one",
		Long: `Each gateway connects to the MCP servers of mcp_servers itself; these
commands do the same on their own, without a gateway: 'list' connects to
every enabled server at once, lists its tools and disconnects; 'test
NAME' does it for one server and says how long each step took.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	lookup := func(name string) (string, bool) { v := m.Getenv(name); return v, v != "" }
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "Connect to each server: its transport, state, tool count and error",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := m.loadConfig(path)
			if err != nil {
				return err
			}
			probes := mcp.ProbeAll(cmd.Context(), cfg.MCPServers, cfg.SubprocessEnv(), lookup)
			if asJSON {
				out := make([]mcp.Status, len(probes))
				for i, p := range probes {
					out[i] = p.Status
				}
				enc := json.NewEncoder(m.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			if len(probes) == 0 {
				fmt.Fprintln(m.Stdout, "No MCP servers are configured (mcp_servers).")
				return nil
			}
			w := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SERVER\tTRANSPORT\tSTATE\tTOOLS\tERROR")
			for _, p := range probes {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", p.Name, p.Transport, p.State, len(p.Tools), p.LastError)
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the servers")
	test := &cobra.Command{
		Use:   "test NAME",
		Short: "Connect to one server, list its tools, disconnect, with timings",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("want one server name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := m.loadConfig(path)
			if err != nil {
				return err
			}
			s, ok := cfg.MCPServers[args[0]]
			if !ok {
				return fmt.Errorf("mcp_servers has no server %q", args[0])
			}
			s.Enabled = nil // testing a disabled server is how one tries it
			p := mcp.ProbeServer(cmd.Context(), args[0], s, cfg.SubprocessEnv(), lookup)
			ms := func(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
			fmt.Fprintf(m.Stdout, "%s (%s): connect %s", p.Name, p.Transport, ms(p.Connect))
			if p.State != mcp.StateReady {
				fmt.Fprintln(m.Stdout)
				return fmt.Errorf("%s: %s", p.Name, p.LastError)
			}
			fmt.Fprintf(m.Stdout, ", list %s, close %s; %d tools\n", ms(p.List), ms(p.Close), len(p.Tools))
			if len(p.Tools) > 0 {
				fmt.Fprintln(m.Stdout, "  "+strings.Join(p.Tools, "\n  "))
			}
			return nil
		},
	}
	cmd.AddCommand(list, test)
	return cmd
}
