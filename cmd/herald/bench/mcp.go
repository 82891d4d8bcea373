package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/mcp"
	"github.com/heraldgw/herald/metrics"
	"github.com/heraldgw/herald/tools"
)

// DefaultMCPCalls is MCPOptions.Calls when it is 0.
const DefaultMCPCalls = 2000

// mcpRounds is how many rounds the calls of each side are split into;
// the sides take turns, round by round, the first changing each round.
const mcpRounds = 20

// mcpWarmup is how many calls each side makes before it is measured.
const mcpWarmup = 20

// The server's name in the bench's config, and so the tool herald
// offers the model for its echo.
const (
	mcpServerName = "bench"
	mcpEchoTool   = "echo"
)

// MCPOptions says what MCP measures.
type MCPOptions struct {
	Calls int // calls of each side; DefaultMCPCalls when 0
	// Command and Args start the stdio MCP server both sides call, one
	// process each: one that serves ServeMCP (herald's own binary runs
	// it as `herald bench mcp-server`).
	Command string
	Args    []string
	Env     map[string]string // the server's variables beside herald's base set
}

// MCPResult is one run's figures, as `herald bench mcp --json` prints
// them.
type MCPResult struct {
	Calls     int     `json:"calls"`
	Tool      string  `json:"tool"`  // the name herald offers it by
	Reply     string  `json:"reply"` // the last result herald's path read
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
	BareP50Us float64 `json:"bare_p50_us"` // the SDK's CallTool alone
	BareP99Us float64 `json:"bare_p99_us"`
	// OverheadP50Us and OverheadP99Us are herald's quantile less the
	// bare one: what herald's path adds to a call.
	OverheadP50Us float64 `json:"overhead_p50_us"`
	OverheadP99Us float64 `json:"overhead_p99_us"`
	// CPUUsPerCall and BareCPUUsPerCall are the CPU time this process
	// (the client's side; the server is another) used a call.
	CPUUsPerCall     float64 `json:"cpu_us_per_call"`
	BareCPUUsPerCall float64 `json:"bare_cpu_us_per_call"`
}

// MCP measures what herald adds to a call of a stdio MCP server's
// trivial tool: the agent's tools.Set.Call of mcp_bench_echo on a set of
// the live "mcp" toolset, as the gateway builds it (the arguments
// checked against the tool's schema, the call through mcp.Manager and
// the SDK's session, the result capped and redacted, the call timed for
// the metrics), beside a bare sdk.ClientSession.CallTool of the same
// tool on a server process of the same kind. Each side has its own
// server process; the two take turns, round by round. Each call says a
// text of its own, and the text must come back.
func MCP(ctx context.Context, opt MCPOptions) (res MCPResult, err error) {
	opt.Calls = cmp.Or(opt.Calls, DefaultMCPCalls)
	if opt.Calls < 1 {
		return res, fmt.Errorf("calls must be positive, got %d", opt.Calls)
	}
	if opt.Command == "" {
		return res, errors.New("no command starts the MCP server")
	}
	res = MCPResult{Calls: opt.Calls, Tool: mcp.ToolName(mcpServerName, mcpEchoTool)}
	cfg := config.Default()
	server := config.MCPServer{Command: opt.Command, Args: opt.Args, Env: opt.Env}

	reg := tools.NewRegistry()
	reg.RedactWith(redact.New([]string{"sk-bench-secret-0001"}).String)
	live, err := reg.RegisterLive(mcp.Toolset)
	if err != nil {
		return res, err
	}
	set, err := reg.Set([]string{mcp.Toolset})
	if err != nil {
		return res, err
	}
	m := mcp.New(mcp.Options{
		Servers:        map[string]config.MCPServer{mcpServerName: server},
		Env:            cfg.SubprocessEnv(),
		Logger:         slog.New(slog.DiscardHandler),
		Live:           live,
		OutputMaxChars: cfg.Tools.OutputMaxChars,
		Observe:        metrics.NewMetrics().MCPCall,
	})
	if err := m.Start(ctx); err != nil {
		return res, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := m.Shutdown(sctx); err == nil && serr != nil {
			err = fmt.Errorf("closing the MCP server: %w", serr)
		}
	}()
	bare, err := dialBare(ctx, server, cfg.SubprocessEnv(), server.DialTimeout())
	if err != nil {
		return res, fmt.Errorf("the bare session: %w", err)
	}
	defer bare.close()
	if err := mcpReady(ctx, m, server.DialTimeout()); err != nil {
		return res, err
	}

	turn := &tools.Turn{Conv: "bench:1"}
	heraldCall := func(i int) error {
		text := "herald " + strconv.Itoa(i)
		out := set.Call(ctx, turn, chat.ToolCall{ID: "call" + strconv.Itoa(i), Name: res.Tool, Arguments: `{"text":"` + text + `"}`})
		if out.IsError || out.Content != text {
			return fmt.Errorf("%s said %q, want %q", res.Tool, out.Content, text)
		}
		res.Reply = out.Content
		return nil
	}
	bareCall := func(i int) error {
		text := "bare " + strconv.Itoa(i)
		out, err := bare.cs.CallTool(ctx, &sdk.CallToolParams{Name: mcpEchoTool, Arguments: map[string]any{"text": text}})
		if err != nil {
			return err
		}
		if got := echoed(out); out.IsError || got != text {
			return fmt.Errorf("%s said %q, want %q", mcpEchoTool, got, text)
		}
		return nil
	}
	for i := range mcpWarmup {
		if err := heraldCall(-1 - i); err != nil {
			return res, err
		}
		if err := bareCall(-1 - i); err != nil {
			return res, fmt.Errorf("bare: %w", err)
		}
	}

	var herald, raw run
	var cpu, bareCPU time.Duration
	next := 0
	for r := range mcpRounds {
		n := share(opt.Calls, mcpRounds, r)
		sides := []func() error{
			func() error { return timed(n, next, heraldCall, &herald, &cpu) },
			func() error { return timed(n, next, bareCall, &raw, &bareCPU) },
		}
		if r%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return res, err
			}
		}
		next += n
	}
	p50, p99 := herald.quantiles()
	res.P50Us, res.P99Us = p50*1000, p99*1000
	p50, p99 = raw.quantiles()
	res.BareP50Us, res.BareP99Us = p50*1000, p99*1000
	res.OverheadP50Us, res.OverheadP99Us = res.P50Us-res.BareP50Us, res.P99Us-res.BareP99Us
	res.CPUUsPerCall = float64(cpu.Microseconds()) / float64(opt.Calls)
	res.BareCPUUsPerCall = float64(bareCPU.Microseconds()) / float64(opt.Calls)
	return res, nil
}

// timed makes n calls numbered from first, adding each one's time to r
// and the process's CPU time to cpu.
func timed(n, first int, call func(int) error, r *run, cpu *time.Duration) error {
	cpu0 := processCPU()
	for i := first; i < first+n; i++ {
		start := time.Now()
		if err := call(i); err != nil {
			return err
		}
		r.latencies = append(r.latencies, time.Since(start))
	}
	*cpu += processCPU() - cpu0
	return nil
}

// mcpReady waits until m's server is ready, within timeout.
func mcpReady(ctx context.Context, m *mcp.Manager, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st := m.Statuses()[0]
		if st.State == mcp.StateReady {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the MCP server is %s after %s: %s", st.State, timeout, st.LastError)
		case <-tick.C:
		}
	}
}

// bareSession is a session of the SDK's client alone, to a server
// process started as herald starts one.
type bareSession struct {
	cs  *sdk.ClientSession
	cmd *exec.Cmd
}

func dialBare(ctx context.Context, s config.MCPServer, env *proc.Env, timeout time.Duration) (*bareSession, error) {
	cmd, err := mcp.StdioCommand(s, env, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "herald-bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		if cmd.Process != nil {
			_ = proc.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil, err
	}
	return &bareSession{cs: cs, cmd: cmd}, nil
}

func (b *bareSession) close() {
	_ = b.cs.Close()
	if b.cmd.Process != nil {
		_ = proc.KillGroup(b.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// echoed is the text of a result of echo.
func echoed(res *sdk.CallToolResult) string {
	if len(res.Content) != 1 {
		return fmt.Sprintf("%d parts", len(res.Content))
	}
	if t, ok := res.Content[0].(*sdk.TextContent); ok {
		return t.Text
	}
	return fmt.Sprintf("a %T", res.Content[0])
}

// echoIn is echo's arguments.
type echoIn struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

// ServeMCP serves, over stdin and stdout, the MCP server MCP calls: one
// tool, echo, which says its text back. It returns when the client
// closes the session.
func ServeMCP(ctx context.Context) error {
	s := sdk.NewServer(&sdk.Implementation{Name: "herald-bench", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: mcpEchoTool, Description: "says text back"}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
	})
	return s.Run(ctx, &sdk.StdioTransport{})
}
