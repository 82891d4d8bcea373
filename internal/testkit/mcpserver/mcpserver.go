// Package mcpserver is a real MCP server made with the SDK herald's
// client uses, for tests: over stdio (a test binary that Serves when
// RoleVariable is set in its environment) or over streamable HTTP
// (Handler on an httptest server).
package mcpserver

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// RoleVariable set to "server" in a test binary's environment makes
// MaybeServe serve over stdio and exit.
const RoleVariable = "HERALD_TEST_MCP_ROLE"

// Its tools' arguments and results.
type (
	EchoIn struct {
		Text string `json:"text" jsonschema:"what to say back"`
	}
	SlowIn struct {
		Seconds float64 `json:"seconds"`
	}
	None struct{}
)

// New returns the server: echo (says text back), environ (its process's
// environment, one variable a line), slow (waits seconds or until the
// call is cancelled), media (an image and a resource link), fail (a
// result marked as an error), crash (over stdio: the process exits
// mid-call) and grow
// (adds the tool extra, which the server announces with
// tools/list_changed).
func New() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "testserver", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "says text back"}, func(_ context.Context, _ *sdk.CallToolRequest, in EchoIn) (*sdk.CallToolResult, None, error) {
		return text(in.Text), None{}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "environ", Description: "its environment"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
		env := os.Environ()
		slices.Sort(env)
		return text(strings.Join(env, "\n")), None{}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "waits"}, func(ctx context.Context, _ *sdk.CallToolRequest, in SlowIn) (*sdk.CallToolResult, None, error) {
		select {
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			return text("done"), None{}, nil
		case <-ctx.Done():
			return nil, None{}, ctx.Err()
		}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "media", Description: "a picture and a link"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "here"},
			&sdk.ImageContent{MIMEType: "image/png", Data: []byte("png!")},
			&sdk.ResourceLink{URI: "file:///tmp/report.txt", Name: "report"},
		}}, None{}, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "always fails"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
		r := text("the disk is full")
		r.IsError = true
		return r, None{}, nil
	})
	if os.Getenv(RoleVariable) == "server" {
		// Only in a server process of its own: over HTTP it would end
		// the test.
		sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "ends the server's process mid-call"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
			os.Exit(3)
			return nil, None{}, nil
		})
	}
	sdk.AddTool(s, &sdk.Tool{Name: "grow", Description: "adds the tool extra"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
		sdk.AddTool(s, &sdk.Tool{Name: "extra", Description: "added later"}, func(context.Context, *sdk.CallToolRequest, None) (*sdk.CallToolResult, None, error) {
			return text("extra"), None{}, nil
		})
		return text("grown"), None{}, nil
	})
	return s
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// Handler serves New over streamable HTTP, one server for every session.
func Handler() http.Handler {
	s := New()
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
}

// MaybeServe, called first in a TestMain, serves New over stdio and
// exits when RoleVariable is "server"; otherwise it returns.
func MaybeServe() {
	if os.Getenv(RoleVariable) != "server" {
		return
	}
	if err := New().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
