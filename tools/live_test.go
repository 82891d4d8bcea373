package tools_test

import (
	"context"
	"slices"
	"testing"

	"github.com/heraldgw/herald/chat"
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
