// Package mcp connects herald to Model Context Protocol servers and
// offers their tools to the agent: a Manager keeps one session per
// configured server (a command over stdio, or a URL over streamable
// HTTP), retries one that fails or dies, and keeps each server's tools in
// a live toolset the agent's tool set reads at each model call
// (docs/mcp.md).
package mcp

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/proc"
)

// Transport names, as /mcp and herald mcp list show them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// TransportOf is the transport s is reached over.
func TransportOf(s config.MCPServer) string {
	if s.URL != "" {
		return TransportHTTP
	}
	return TransportStdio
}

// session is one live connection to a server.
type session struct {
	cs  *sdk.ClientSession
	cmd *exec.Cmd // the stdio server's process; nil over HTTP
}

// close ends the session, then the stdio server's process group, so
// nothing the server started outlives it.
func (s *session) close() {
	_ = s.cs.Close()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = proc.KillGroup(s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// dialer makes the transport of one server.
type dialer struct {
	env    *proc.Env
	lookup func(string) (string, bool)
}

// transport returns the SDK transport of s and the command it will
// start, if any.
func (d dialer) transport(s config.MCPServer) (sdk.Transport, *exec.Cmd, error) {
	if s.URL != "" {
		headers := http.Header{}
		for k, v := range s.Headers {
			val, err := config.ExpandVars(v, d.lookup)
			if err != nil {
				return nil, nil, fmt.Errorf("header %s: %w", k, err)
			}
			headers.Set(k, val)
		}
		client := &http.Client{Transport: headerTransport{headers: headers, next: http.DefaultTransport}}
		return &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: client, MaxRetries: -1}, nil, nil
	}
	cmd, err := StdioCommand(s, d.env, d.lookup)
	if err != nil {
		return nil, nil, err
	}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}, cmd, nil
}

// StdioCommand is the process of the stdio server s, not started: its
// command and args in its cwd, in a process group of its own, with the
// environment every process herald starts gets (env.Build: the base set
// and tools.env_passthrough, none of herald's secrets) and its own env,
// each ${VAR} read from lookup.
func StdioCommand(s config.MCPServer, env *proc.Env, lookup func(string) (string, bool)) (*exec.Cmd, error) {
	var given []string
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		val, err := config.ExpandVars(s.Env[k], lookup)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		given = append(given, k+"="+val)
	}
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = env.Build(given...)
	cmd.Dir = s.Cwd
	cmd.Stderr = nil // a server's log on stderr is not herald's to keep
	proc.OwnGroup(cmd)
	return cmd, nil
}

// connect opens a session to s within its connect_timeout. onChange is
// told when the server says its tool list changed.
func (d dialer) connect(ctx context.Context, s config.MCPServer, onChange func()) (*session, error) {
	t, cmd, err := d.transport(s)
	if err != nil {
		return nil, err
	}
	opts := &sdk.ClientOptions{}
	if onChange != nil {
		opts.ToolListChangedHandler = func(context.Context, *sdk.ToolListChangedRequest) { onChange() }
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "herald", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(ctx, s.DialTimeout())
	defer cancel()
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			_ = proc.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within connect_timeout %s: %w", s.DialTimeout(), err)
		}
		return nil, err
	}
	return &session{cs: cs, cmd: cmd}, nil
}

// listTools lists every tool of the session, page after page.
func (s *session) listTools(ctx context.Context, timeout time.Duration) ([]*sdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []*sdk.Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// headerTransport adds a server's configured headers to each request.
type headerTransport struct {
	headers http.Header
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.headers {
		r.Header[k] = vs
	}
	return h.next.RoundTrip(r)
}

// osLookup is herald's environment, where ${VAR} is looked up.
func osLookup(name string) (string, bool) { return os.LookupEnv(name) }
