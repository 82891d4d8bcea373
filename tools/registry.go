package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/llm"
)

// validName is what the Chat Completions API accepts as a function name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// noArguments is the schema of a tool that takes none.
const noArguments = `{"type":"object","properties":{},"additionalProperties":false}`

// registered is a tool with its schema compiled.
type registered struct {
	Tool
	toolset string
	schema  *jsonschema.Schema
	spec    llm.ToolSpec
}

// Registry holds every tool herald has, by toolset. It is safe for
// concurrent use; Sets built from it do not change when it does.
type Registry struct {
	mu       sync.Mutex
	tools    map[string]*registered
	toolsets map[string][]string // toolset → tool names, in registration order
	order    []string            // toolset names, in registration order
	redact   func(string) string // RedactWith's; nil keeps results as they are
	gate     gating              // GateWith's
	live     map[string]*Live    // the live toolsets (RegisterLive), by name
}

// gating is a gate and the tools it is asked about.
type gating struct {
	gate  Gate
	match func(tool string) bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*registered{}, toolsets: map[string][]string{}}
}

// RedactWith has every result of the sets made from then on pass
// through redact before the model reads it: whatever a tool read or a
// command printed, herald's secrets reach the model masked. The gateway
// hands it its redactor once, before it makes any set.
func (r *Registry) RedactWith(redact func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.redact = redact
}

// GateWith has the sets made from then on ask gate before each call of
// a tool match names (approvals.tools, MCP tools included): the call
// runs only when the gate says so, and the model reads the gate's
// refusal otherwise. The gateway's approvals capability sets it before
// any set is made.
func (r *Registry) GateWith(gate Gate, match func(tool string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = gating{gate: gate, match: match}
}

// Register adds tools to toolset. Each schema is compiled here, once, so a
// schema that does not compile is found at startup, not by a model.
// Errors: Invalid (bad name, no handler, a schema that does not compile
// or is not an object schema), Conflict (a tool of that name exists; tool
// names are unique across toolsets because the model sees only names).
// Nothing is added when any tool is refused.
func (r *Registry) Register(toolset string, tools ...Tool) error {
	const op = "tools.Register"
	if strings.TrimSpace(toolset) == "" {
		return errs.E(op, errs.Invalid, "empty toolset name")
	}
	compiled, err := compileAll(op, toolset, tools)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range compiled {
		if old, ok := r.tools[reg.Name]; ok {
			return errs.E(op, errs.Conflict, "tool %s is already registered in toolset %s", reg.Name, old.toolset)
		}
	}
	if _, ok := r.toolsets[toolset]; !ok {
		r.order = append(r.order, toolset)
	}
	for _, reg := range compiled {
		r.tools[reg.Name] = reg
		r.toolsets[toolset] = append(r.toolsets[toolset], reg.Name)
	}
	return nil
}

// compileAll compiles tools, refusing a name given twice.
func compileAll(op, toolset string, tools []Tool) ([]*registered, error) {
	compiled := make([]*registered, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		reg, err := compile(op, toolset, t)
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, errs.E(op, errs.Conflict, "tool %s is given twice", t.Name)
		}
		seen[t.Name] = true
		compiled = append(compiled, reg)
	}
	return compiled, nil
}

func compile(op, toolset string, t Tool) (*registered, error) {
	if !validName.MatchString(t.Name) {
		return nil, errs.E(op, errs.Invalid, "tool name %q: use 1 to 64 letters, digits, '_' or '-'", t.Name)
	}
	if t.Handler == nil {
		return nil, errs.E(op, errs.Invalid, "tool %s has no handler", t.Name)
	}
	raw := t.Schema
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(noArguments)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errs.E(op, errs.Invalid, "tool %s: schema is not JSON: %v", t.Name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		// The API takes only object schemas for function parameters.
		return nil, errs.E(op, errs.Invalid, `tool %s: schema must be an object schema ("type": "object")`, t.Name)
	}
	url := "urn:herald:tool:" + t.Name
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, errs.E(op, errs.Invalid, "tool %s: schema: %v", t.Name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, errs.E(op, errs.Invalid, "tool %s: schema does not compile: %v", t.Name, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, errs.E(op, errs.Invalid, "tool %s: schema: %v", t.Name, err)
	}
	t.Schema = compact.Bytes()
	return &registered{
		Tool:    t,
		toolset: toolset,
		schema:  sch,
		spec:    llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Schema},
	}, nil
}

// Toolsets returns the toolset names, in registration order.
func (r *Registry) Toolsets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// Set returns the tools of the named toolsets, without the tools named in
// exclude. Tools keep the order of toolsets, then of registration. An
// excluded name that is not in the set is ignored, so a child can always
// exclude what it must not have, whatever its parent had.
// Errors: NotFound (an unknown toolset).
func (r *Registry) Set(toolsets []string, exclude ...string) (*Set, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Set{byName: map[string]*registered{}, redact: r.redact, gate: r.gate}
	for _, ts := range toolsets {
		names, ok := r.toolsets[ts]
		if !ok {
			return nil, errs.E("tools.Set", errs.NotFound, "unknown toolset %q", ts)
		}
		if slices.Contains(s.toolsets, ts) {
			continue
		}
		s.toolsets = append(s.toolsets, ts)
		if l := r.live[ts]; l != nil {
			s.live = append(s.live, l)
			s.excluded = slices.Clone(exclude)
		}
		for _, n := range names {
			if slices.Contains(exclude, n) {
				continue
			}
			s.add(r.tools[n])
		}
	}
	return s, nil
}

// Set is the tools one agent may call. Its fixed tools do not change once
// built, so one Set can serve many turns at once; the tools of its live
// toolsets (RegisterLive) are read at each use. The nil Set has no tools.
type Set struct {
	toolsets []string
	tools    []*registered
	byName   map[string]*registered
	redact   func(string) string // the registry's RedactWith, nil for none
	gate     gating              // the registry's GateWith
	live     []*Live             // its live toolsets
	excluded []string            // names of live tools it leaves out
	// specs are the specs Specs made last, shared by the calls after
	// it while its live toolsets hold the same tools.
	specs atomic.Pointer[specsMade]
}

func (s *Set) add(t *registered) {
	s.tools = append(s.tools, t)
	s.byName[t.Name] = t
}

// Without returns the set minus the named tools: a child agent's set is
// its parent's without the tools a child must not have.
func (s *Set) Without(names ...string) *Set {
	out := &Set{byName: map[string]*registered{}}
	if s == nil {
		return out
	}
	out.toolsets, out.redact, out.gate = slices.Clone(s.toolsets), s.redact, s.gate
	out.live, out.excluded = s.live, append(slices.Clone(s.excluded), names...)
	for _, t := range s.tools {
		if !slices.Contains(names, t.Name) {
			out.add(t)
		}
	}
	return out
}

// Only returns the set restricted to the named toolsets, fixed and
// live, keeping what the set leaves out: a child that asks for some of
// its parent's toolsets gets those, and never more than its parent has.
// Errors: NotFound (a toolset the set was not built from; the error
// names those it has).
func (s *Set) Only(toolsets ...string) (*Set, error) {
	have := s.Toolsets()
	for _, ts := range toolsets {
		if !slices.Contains(have, ts) {
			return nil, errs.E("tools.Only", errs.NotFound, "toolset %q is not among these tools' toolsets (%s)", ts, strings.Join(have, ", "))
		}
	}
	out := &Set{byName: map[string]*registered{}}
	if s == nil {
		return out, nil
	}
	out.redact, out.gate, out.excluded = s.redact, s.gate, slices.Clone(s.excluded)
	for _, ts := range have {
		if slices.Contains(toolsets, ts) {
			out.toolsets = append(out.toolsets, ts)
		}
	}
	for _, t := range s.tools {
		if slices.Contains(toolsets, t.toolset) {
			out.add(t)
		}
	}
	for _, l := range s.live {
		if slices.Contains(toolsets, l.toolset) {
			out.live = append(out.live, l)
		}
	}
	return out, nil
}

// Toolsets returns the toolsets the set was built from.
func (s *Set) Toolsets() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.toolsets)
}

// Names returns the tool names, in order.
func (s *Set) Names() []string {
	all := s.all()
	if len(all) == 0 {
		return nil
	}
	out := make([]string, len(all))
	for i, t := range all {
		out[i] = t.Name
	}
	return out
}

// Has reports whether the set holds the named tool.
func (s *Set) Has(name string) bool { return s.lookup(name) != nil }

// Specs returns the tools as the model is offered them. The slice is
// shared: callers must not change it.
func (s *Set) Specs() []llm.ToolSpec {
	if s == nil {
		return nil
	}
	if m := s.specs.Load(); m != nil && m.current(s.live) {
		return m.specs
	}
	m := &specsMade{live: make([][]*registered, len(s.live))}
	for i, l := range s.live {
		m.live[i] = l.current()
	}
	m.specs = s.specsNow()
	s.specs.Store(m)
	return m.specs
}

// specsMade are a set's specs and what its live toolsets held when
// they were made (a live toolset's Replace puts a new slice in).
type specsMade struct {
	specs []llm.ToolSpec
	live  [][]*registered
}

// current says whether live hold what they held when m was made.
func (m *specsMade) current(live []*Live) bool {
	for i, l := range live {
		if !slices.Equal(m.live[i], l.current()) {
			return false
		}
	}
	return true
}

// specsNow makes the specs of the set's tools now.
func (s *Set) specsNow() []llm.ToolSpec {
	all := s.all()
	if len(all) == 0 {
		return nil
	}
	out := make([]llm.ToolSpec, len(all))
	for i, t := range all {
		out[i] = t.spec
	}
	return out
}

// Call runs one tool call of the model. It never fails: every problem
// (unknown tool, bad JSON, a schema violation, a handler error or panic)
// is a Result with IsError set, which the model reads and can correct.
// The result has passed through the registry's redactor (RedactWith).
func (s *Set) Call(ctx context.Context, turn *Turn, call chat.ToolCall) Result {
	// The span names the tool only when the set has it: a name the model
	// made up is not told.
	name := "unknown"
	if s.Has(call.Name) {
		name = call.Name
	}
	ctx, span := tracing.Start(ctx, tracing.SpanTool, attribute.String("herald.tool", name))
	res := s.call(ctx, turn, call)
	tracing.EndWith(span, res.IsError, "tool_error")
	if s != nil && s.redact != nil {
		res.Content, res.Reply = s.redact(res.Content), s.redact(res.Reply)
	}
	return res
}

func (s *Set) call(ctx context.Context, turn *Turn, call chat.ToolCall) Result {
	t := s.lookup(call.Name)
	if t == nil {
		if len(s.Names()) == 0 {
			return errorResult(fmt.Sprintf("unknown tool %q: no tools are available", call.Name))
		}
		return errorResult(fmt.Sprintf("unknown tool %q; the tools are: %s", call.Name, strings.Join(s.Names(), ", ")))
	}
	args := strings.TrimSpace(call.Arguments)
	if args == "" {
		// Some models send nothing for a tool without arguments.
		args = "{}"
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return errorResult(fmt.Sprintf("arguments of %s are not valid JSON (%v); send a JSON object", t.Name, err))
	}
	if err := t.schema.Validate(inst); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %s: %s", t.Name, schemaProblems(err)))
	}
	ctx = withCallID(ctx, call.ID)
	if err := s.ask(ctx, turn, t.Name, args); err != nil {
		return errorResult(errorText(err))
	}
	return t.run(ctx, turn, json.RawMessage(args))
}

// ask asks the set's gate (GateWith) whether a call of the tool named
// name with args runs; nil when the gate does not name the tool.
func (s *Set) ask(ctx context.Context, turn *Turn, name, args string) error {
	if s.gate.gate == nil || s.gate.match == nil || !s.gate.match(name) {
		return nil
	}
	shown := args
	if s.redact != nil {
		shown = s.redact(shown)
	}
	return s.gate.gate.Ask(ctx, turn, ApprovalRequest{Tool: name, Action: shown, Reason: "approvals.tools names " + name, Pattern: name})
}

// run calls the handler, turning an error or a panic into a result.
func (t *registered) run(ctx context.Context, turn *Turn, args json.RawMessage) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			slog.ErrorContext(ctx, "tool panicked", "tool", t.Name, "conv", turnConv(turn), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res = errorResult(fmt.Sprintf("tool %s failed unexpectedly (%v); this is a fault in herald, not in your arguments", t.Name, p))
		}
	}()
	res, err := t.Handler(ctx, turn, args)
	if err != nil {
		return errorResult(errorText(err))
	}
	if res.Content == "" {
		res.Content = `{"status":"ok"}`
	}
	return res
}

func turnConv(t *Turn) string {
	if t == nil {
		return ""
	}
	return t.Conv
}

// maxProblems bounds how many schema violations are listed: enough for
// the model to fix its call, short enough not to drown it.
const maxProblems = 5

// printer words the schema library's messages.
var printer = message.NewPrinter(language.English)

// schemaProblems lists what broke the schema, one "field: reason" per
// violation, e.g. `target: got number, want string`.
func schemaProblems(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		msg := e.ErrorKind.LocalizedString(printer)
		if len(e.InstanceLocation) > 0 {
			msg = strings.Join(e.InstanceLocation, ".") + ": " + msg
		}
		if !slices.Contains(leaves, msg) {
			leaves = append(leaves, msg)
		}
	}
	walk(ve)
	if len(leaves) == 0 {
		return ve.Error()
	}
	if len(leaves) > maxProblems {
		leaves = append(leaves[:maxProblems], fmt.Sprintf("and %d more", len(leaves)-maxProblems))
	}
	return strings.Join(leaves, "; ")
}

// SchemaProblems lists what broke a JSON Schema, as a tool call's
// invalid arguments are listed to the model: one "field: reason" per
// violation.
func SchemaProblems(err error) string { return schemaProblems(err) }
