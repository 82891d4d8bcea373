package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

// echo is a handler that returns its arguments.
func echo(_ context.Context, _ *tools.Turn, args json.RawMessage) (tools.Result, error) {
	return tools.Result{Content: string(args)}, nil
}

func tool(name, schema string) tools.Tool {
	return tools.Tool{Name: name, Description: name + " things", Schema: json.RawMessage(schema), Handler: echo}
}

const greetSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "times": {"type": "integer", "minimum": 1},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}
  },
  "required": ["name"],
  "additionalProperties": false,
  "$defs": {"tag": {"type": "string", "enum": ["a", "b"]}}
}`

func TestRegisterRefuses(t *testing.T) {
	tests := []struct {
		desc    string
		toolset string
		tools   []tools.Tool
		code    errs.Code
		msg     string
	}{
		{desc: "schema that is not JSON", toolset: "x", tools: []tools.Tool{tool("a", `{"type":`)}, code: errs.Invalid, msg: "not JSON"},
		{desc: "schema that does not compile", toolset: "x", tools: []tools.Tool{tool("a", `{"type":"object","properties":{"n":{"type":"nope"}}}`)}, code: errs.Invalid, msg: "does not compile"},
		{desc: "schema with a dangling ref", toolset: "x", tools: []tools.Tool{tool("a", `{"type":"object","properties":{"n":{"$ref":"#/$defs/missing"}}}`)}, code: errs.Invalid, msg: "does not compile"},
		{desc: "schema that is not an object schema", toolset: "x", tools: []tools.Tool{tool("a", `{"type":"string"}`)}, code: errs.Invalid, msg: "object schema"},
		{desc: "bad name", toolset: "x", tools: []tools.Tool{tool("send message", greetSchema)}, code: errs.Invalid, msg: "tool name"},
		{desc: "name too long", toolset: "x", tools: []tools.Tool{tool(strings.Repeat("a", 65), greetSchema)}, code: errs.Invalid, msg: "tool name"},
		{desc: "no handler", toolset: "x", tools: []tools.Tool{{Name: "a"}}, code: errs.Invalid, msg: "no handler"},
		{desc: "empty toolset", toolset: " ", tools: []tools.Tool{tool("a", "")}, code: errs.Invalid, msg: "toolset"},
		{desc: "same name twice in one call", toolset: "x", tools: []tools.Tool{tool("a", ""), tool("a", "")}, code: errs.Conflict, msg: "twice"},
		{desc: "name taken by another toolset", toolset: "other", tools: []tools.Tool{tool("greet", "")}, code: errs.Conflict, msg: "already registered in toolset base"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := tools.NewRegistry()
			if err := r.Register("base", tool("greet", greetSchema)); err != nil {
				t.Fatal(err)
			}
			err := r.Register(tc.toolset, tc.tools...)
			if !errs.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Register: got %v, want %s containing %q", err, tc.code, tc.msg)
			}
			// A refused call adds nothing.
			set, err := r.Set(r.Toolsets())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"greet"}, set.Names()); diff != "" {
				t.Errorf("names after a refused Register (-want +got):\n%s", diff)
			}
		})
	}
}

func newRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	r := tools.NewRegistry()
	for ts, names := range map[string][]string{"core": {"clarify", "memory", "send_message"}, "kanban": {"kanban_show", "kanban_create"}} {
		for _, n := range names {
			if err := r.Register(ts, tool(n, "")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Register("delegation", tool("delegate_task", "")); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSets(t *testing.T) {
	r := newRegistry(t)
	tests := []struct {
		desc     string
		toolsets []string
		exclude  []string
		without  []string
		want     []string
	}{
		{desc: "one toolset", toolsets: []string{"core"}, want: []string{"clarify", "memory", "send_message"}},
		{desc: "toolsets in the order given", toolsets: []string{"delegation", "core"}, want: []string{"delegate_task", "clarify", "memory", "send_message"}},
		{desc: "a toolset named twice counts once", toolsets: []string{"core", "core"}, want: []string{"clarify", "memory", "send_message"}},
		{desc: "exclusions", toolsets: []string{"core", "delegation"}, exclude: []string{"delegate_task", "clarify"}, want: []string{"memory", "send_message"}},
		{desc: "excluding a tool the set lacks", toolsets: []string{"core"}, exclude: []string{"delegate_task"}, want: []string{"clarify", "memory", "send_message"}},
		{desc: "a child's set: the parent's without some", toolsets: []string{"core", "delegation", "kanban"}, without: []string{"delegate_task", "clarify"}, want: []string{"memory", "send_message", "kanban_show", "kanban_create"}},
		{desc: "no toolsets", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			set, err := r.Set(tc.toolsets, tc.exclude...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.without != nil {
				set = set.Without(tc.without...)
			}
			if diff := cmp.Diff(tc.want, set.Names()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
			var specNames []string
			for _, s := range set.Specs() {
				specNames = append(specNames, s.Name)
				if !json.Valid(s.Parameters) || s.Description == "" {
					t.Errorf("spec %s: parameters %s, description %q", s.Name, s.Parameters, s.Description)
				}
			}
			if diff := cmp.Diff(tc.want, specNames); diff != "" {
				t.Errorf("spec names (-want +got):\n%s", diff)
			}
			for _, n := range tc.want {
				if !set.Has(n) {
					t.Errorf("Has(%s) = false", n)
				}
			}
			for _, n := range append(tc.exclude, tc.without...) {
				if set.Has(n) {
					t.Errorf("Has(%s) = true for an excluded tool", n)
				}
			}
		})
	}

	if _, err := r.Set([]string{"core", "nope"}); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown toolset: got %v, want NotFound naming it", err)
	}
	var nilSet *tools.Set
	if nilSet.Names() != nil || nilSet.Specs() != nil || nilSet.Has("clarify") || nilSet.Without("x").Names() != nil {
		t.Error("the nil Set should have no tools")
	}
}

// errorOf reads {"error": "..."} from a result.
func errorOf(t *testing.T, res tools.Result) string {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(res.Content), &body); err != nil {
		t.Fatalf("result %q is not JSON: %v", res.Content, err)
	}
	if !res.IsError || body.Error == "" {
		t.Fatalf("result %+v is not an error", res)
	}
	return body.Error
}

func TestCallRefusesBadCalls(t *testing.T) {
	r := tools.NewRegistry()
	boom := tools.Tool{Name: "boom", Schema: json.RawMessage(`{"type":"object"}`), Handler: func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
		var m map[string]int
		//lint:ignore SA5000 the handler panics on purpose
		m["x"] = 1 // a nil map write: a handler bug
		return tools.Result{}, nil
	}}
	fail := tools.Tool{Name: "fail", Handler: func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
		return tools.Result{}, errs.Wrap("tools.fail", errs.Unavailable, errs.E("store.AddNote", errs.TooLarge, "note is 9000 bytes, over the limit"))
	}}
	plain := tools.Tool{Name: "plain", Handler: func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
		return tools.Result{}, errors.New("disk on fire")
	}}
	if err := r.Register("t", tool("greet", greetSchema), boom, fail, plain); err != nil {
		t.Fatal(err)
	}
	set, err := r.Set([]string{"t"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		call chat.ToolCall
		want []string // substrings of the error
	}{
		{desc: "unknown tool", call: chat.ToolCall{Name: "greeet", Arguments: `{}`}, want: []string{`unknown tool "greeet"`, "greet, boom, fail, plain"}},
		{desc: "bad JSON", call: chat.ToolCall{Name: "greet", Arguments: `{"name": "ann"`}, want: []string{"not valid JSON", "greet"}},
		{desc: "trailing garbage", call: chat.ToolCall{Name: "greet", Arguments: `{"name": "ann"} x`}, want: []string{"not valid JSON"}},
		{desc: "not an object", call: chat.ToolCall{Name: "greet", Arguments: `["ann"]`}, want: []string{"invalid arguments for greet", "got array, want object"}},
		{desc: "missing field", call: chat.ToolCall{Name: "greet", Arguments: `{"times": 2}`}, want: []string{"missing property 'name'"}},
		{desc: "wrong type names the field", call: chat.ToolCall{Name: "greet", Arguments: `{"name": 5}`}, want: []string{"name: got number, want string"}},
		{desc: "unknown field", call: chat.ToolCall{Name: "greet", Arguments: `{"name": "ann", "nmae": "x"}`}, want: []string{"additional properties 'nmae' not allowed"}},
		{desc: "nested field through a ref", call: chat.ToolCall{Name: "greet", Arguments: `{"name": "ann", "tags": ["a", "c"]}`}, want: []string{"tags.1: value must be one of 'a', 'b'"}},
		{desc: "several problems at once", call: chat.ToolCall{Name: "greet", Arguments: `{"times": 0, "x": 1}`}, want: []string{"missing property 'name'", "times: ", "'x' not allowed"}},
		{desc: "empty arguments are an empty object", call: chat.ToolCall{Name: "greet", Arguments: ``}, want: []string{"missing property 'name'"}},
		{desc: "handler panic", call: chat.ToolCall{Name: "boom", Arguments: `{}`}, want: []string{"tool boom failed unexpectedly", "nil map"}},
		{desc: "handler error keeps the reason, not the codes", call: chat.ToolCall{Name: "fail", Arguments: `{}`}, want: []string{"note is 9000 bytes, over the limit"}},
		{desc: "plain handler error", call: chat.ToolCall{Name: "plain"}, want: []string{"disk on fire"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			msg := errorOf(t, set.Call(context.Background(), &tools.Turn{}, tc.call))
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "invalid:") || strings.Contains(msg, "tools.fail") {
				t.Errorf("error %q carries codes meant for Go callers", msg)
			}
		})
	}

	var nilSet *tools.Set
	if msg := errorOf(t, nilSet.Call(context.Background(), nil, chat.ToolCall{Name: "x"})); !strings.Contains(msg, "no tools are available") {
		t.Errorf("nil set: %q", msg)
	}
}

func TestCallPassesValidArguments(t *testing.T) {
	r := tools.NewRegistry()
	type greetArgs struct {
		Name  string   `json:"name"`
		Times int      `json:"times"`
		Tags  []string `json:"tags"`
	}
	var got greetArgs
	var gotTurn *tools.Turn
	var gotCall string
	greet := tool("greet", greetSchema)
	greet.Handler = tools.Func(func(ctx context.Context, turn *tools.Turn, a greetArgs) (tools.Result, error) {
		got, gotTurn, gotCall = a, turn, tools.CallID(ctx)
		return tools.JSON(map[string]string{"greeting": "hi " + a.Name}), nil
	})
	quiet := tool("quiet", "")
	quiet.Handler = func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) { return tools.Result{}, nil }
	if err := r.Register("t", greet, quiet); err != nil {
		t.Fatal(err)
	}
	set, _ := r.Set([]string{"t"})
	turn := &tools.Turn{Conv: "api:c1", User: "api:u1"}
	res := set.Call(context.Background(), turn, chat.ToolCall{ID: "call_1", Name: "greet", Arguments: ` {"name": "ann", "times": 2, "tags": ["b"]} `})
	if diff := cmp.Diff(tools.Result{Content: `{"greeting":"hi ann"}`}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(greetArgs{Name: "ann", Times: 2, Tags: []string{"b"}}, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if gotTurn != turn {
		t.Error("the handler did not get the turn")
	}
	if gotCall != "call_1" {
		t.Errorf("CallID in the handler = %q, want the call's id call_1", gotCall)
	}
	if res := set.Call(context.Background(), turn, chat.ToolCall{Name: "quiet"}); res.Content != `{"status":"ok"}` || res.IsError {
		t.Errorf("empty result: got %+v, want a plain ok", res)
	}
	// Specs carry the schema as registered, compacted.
	for _, s := range set.Specs() {
		if s.Name == "greet" && strings.ContainsAny(string(s.Parameters), "\n ") {
			t.Errorf("greet parameters not compacted: %s", s.Parameters)
		}
		if s.Name == "quiet" && string(s.Parameters) != `{"type":"object","properties":{},"additionalProperties":false}` {
			t.Errorf("quiet parameters: %s", s.Parameters)
		}
	}
}
