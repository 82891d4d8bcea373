package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/tools"
)

// ToolName is the name the model calls a server's tool by:
// mcp_<server>_<tool>, every character other than a letter, a digit or
// '_' made '_'.
func ToolName(server, tool string) string {
	return "mcp_" + clean(server) + "_" + clean(tool)
}

func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// offered reports whether f lets the tool named name through: include,
// when given, picks; exclude drops, except what include names (include
// wins).
func offered(f config.MCPTools, name string) bool {
	in := slices.ContainsFunc(f.Include, func(p string) bool { ok, _ := path.Match(p, name); return ok })
	if len(f.Include) > 0 && !in {
		return false
	}
	out := slices.ContainsFunc(f.Exclude, func(p string) bool { ok, _ := path.Match(p, name); return ok })
	return in || !out
}

// emptySchema stands in for a tool that declares no input schema.
const emptySchema = `{"type":"object","properties":{}}`

// tool is t of s as herald offers it.
func (m *Manager) tool(s *server, t *sdk.Tool) tools.Tool {
	schema := json.RawMessage(emptySchema)
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
			schema = b
		}
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return tools.Tool{
		Name:        ToolName(s.name, t.Name),
		Description: strings.TrimSpace(fmt.Sprintf("%s (MCP server %s)", desc, s.name)),
		Schema:      schema,
		Handler: func(ctx context.Context, turn *tools.Turn, args json.RawMessage) (tools.Result, error) {
			return m.call(ctx, turn, s, t.Name, args)
		},
	}
}

// call runs one call of tool on s within its timeout. Every failure is
// an error the model reads: the turn goes on.
func (m *Manager) call(ctx context.Context, turn *tools.Turn, s *server, tool string, args json.RawMessage) (res tools.Result, err error) {
	start, result := m.opts.Clock.Now(), "ok"
	defer func() {
		if m.opts.Observe != nil {
			m.opts.Observe(s.name, tool, result, m.opts.Clock.Now().Sub(start))
		}
	}()
	sess, err := s.current()
	if err != nil {
		result = "not_ready"
		return tools.Result{}, err
	}
	var arguments map[string]any
	if err := json.Unmarshal(args, &arguments); err != nil {
		return tools.Result{}, fmt.Errorf("arguments are not a JSON object: %v", err)
	}
	timeout := s.cfg.CallTimeout()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := sess.cs.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: arguments})
	switch {
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		result = "timeout"
		return tools.Result{}, fmt.Errorf("MCP server %s did not answer %s within its timeout of %s", s.name, tool, timeout)
	case err != nil:
		result = "error"
		return tools.Result{}, fmt.Errorf("MCP server %s failed on %s: %v", s.name, tool, err)
	}
	images := m.keepImages(ctx, turn, s.name, tool, out)
	text := capped(s.redact.String(render(out, len(images) > 0)), m.opts.OutputMaxChars)
	if out.IsError {
		result = "error"
		return tools.Result{}, errors.New(text)
	}
	return tools.Result{Content: text, Images: images}, nil
}

// render is a result's content as text: texts as they are, an audio
// clip and a resource link a line each, one part a line; an image is a
// line too unless shown is set (keepImages kept it to be shown).
func render(res *sdk.CallToolResult, shown bool) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			if !shown {
				parts = append(parts, fmt.Sprintf("[image %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
			}
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes, not played]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("[resource %s %s]", c.URI, c.Name)))
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob)))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// capped cuts s to at most max characters, saying how many were cut.
func capped(s string, max int) string {
	if max <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + fmt.Sprintf("\n[%d more characters cut]", len(r)-max)
}
