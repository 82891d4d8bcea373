package tools_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

func TestLiveToolsetIsReadAtEachUse(t *testing.T) {
	r := tools.NewRegistry()
	if err := r.Register("core", tool("fixed", "")); err != nil {
		t.Fatal(err)
	}
	live, err := r.RegisterLive("mcp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RegisterLive("mcp"); err == nil {
		t.Error("a second live toolset of the same name was registered")
	}
	set, err := r.Set([]string{"core", "mcp"})
	if err != nil {
		t.Fatal(err)
	}
	child := set.Without("mcp_b")
	if got := set.Names(); !slices.Equal(got, []string{"fixed"}) {
		t.Errorf("before Replace: %v", got)
	}
	if err := live.Replace(tool("mcp_a", ""), tool("mcp_b", greetSchema)); err != nil {
		t.Fatal(err)
	}
	if got := set.Names(); !slices.Equal(got, []string{"fixed", "mcp_a", "mcp_b"}) {
		t.Errorf("set after Replace: %v", got)
	}
	if got := child.Names(); !slices.Equal(got, []string{"fixed", "mcp_a"}) {
		t.Errorf("child after Replace: %v (mcp_b excluded)", got)
	}
	if len(set.Specs()) != 3 || !set.Has("mcp_b") || child.Has("mcp_b") {
		t.Errorf("specs %d, set has mcp_b %v, child has it %v", len(set.Specs()), set.Has("mcp_b"), child.Has("mcp_b"))
	}
	res := set.Call(context.Background(), &tools.Turn{}, chat.ToolCall{ID: "1", Name: "mcp_b", Arguments: `{"name":"x"}`})
	if res.IsError || res.Content != `{"name":"x"}` {
		t.Errorf("call = %+v", res)
	}
	if res := set.Call(context.Background(), &tools.Turn{}, chat.ToolCall{ID: "2", Name: "mcp_b", Arguments: `{}`}); !res.IsError {
		t.Errorf("a live tool's schema was not checked: %+v", res)
	}
	if err := live.Replace(tool("mcp_c", ""), tool("bad name", "")); err == nil {
		t.Error("Replace took a bad name")
	}
	if got := set.Names(); !slices.Equal(got, []string{"fixed", "mcp_a", "mcp_b"}) {
		t.Errorf("a refused Replace changed the tools: %v", got)
	}
	if err := live.Replace(); err != nil {
		t.Fatal(err)
	}
	if res := set.Call(context.Background(), &tools.Turn{}, chat.ToolCall{ID: "3", Name: "mcp_a"}); !res.IsError {
		t.Errorf("a tool gone from the live toolset still ran: %+v", res)
	}
}

func TestOnlyRestrictsToToolsets(t *testing.T) {
	r := newRegistry(t)
	live, err := r.RegisterLive("mcp")
	if err != nil {
		t.Fatal(err)
	}
	parent, err := r.Set([]string{"core", "kanban", "mcp"}, "memory")
	if err != nil {
		t.Fatal(err)
	}
	parent = parent.Without("mcp_hidden")
	tests := []struct {
		desc     string
		toolsets []string
		want     []string // names after the live toolset holds mcp_a, mcp_hidden
		sets     []string
		err      string
	}{
		{desc: "a fixed toolset alone", toolsets: []string{"kanban"}, want: []string{"kanban_show", "kanban_create"}, sets: []string{"kanban"}},
		{desc: "the live toolset alone", toolsets: []string{"mcp"}, want: []string{"mcp_a"}, sets: []string{"mcp"}},
		{desc: "the set's order, whatever the order asked", toolsets: []string{"mcp", "core"}, want: []string{"clarify", "send_message", "mcp_a"}, sets: []string{"core", "mcp"}},
		{desc: "none asked is no tools", toolsets: nil, want: nil, sets: nil},
		{desc: "a toolset the set lacks", toolsets: []string{"core", "delegation"}, err: `toolset "delegation" is not among these tools' toolsets (core, kanban, mcp)`},
		{desc: "an unknown toolset", toolsets: []string{"web"}, err: `"web"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			child, err := parent.Only(tc.toolsets...)
			if tc.err != "" {
				if !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Only(%v) = %v, want NotFound with %q", tc.toolsets, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := live.Replace(tool("mcp_a", ""), tool("mcp_hidden", "")); err != nil {
				t.Fatal(err)
			}
			if got := child.Names(); !slices.Equal(got, tc.want) {
				t.Errorf("Names = %v, want %v", got, tc.want)
			}
			if got := child.Toolsets(); !slices.Equal(got, tc.sets) {
				t.Errorf("Toolsets = %v, want %v", got, tc.sets)
			}
			if res := child.Call(context.Background(), &tools.Turn{}, chat.ToolCall{ID: "1", Name: "kanban_show"}); res.IsError == slices.Contains(tc.want, "kanban_show") {
				t.Errorf("calling kanban_show: %+v", res)
			}
			if err := live.Replace(); err != nil {
				t.Fatal(err)
			}
		})
	}
	var none *tools.Set
	if _, err := none.Only("core"); !errs.Is(err, errs.NotFound) {
		t.Errorf("the nil set's Only(core) = %v, want NotFound", err)
	}
}
