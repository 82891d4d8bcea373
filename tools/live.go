package tools

import (
	"slices"
	"strings"
	"sync"

	"github.com/heraldgw/herald/internal/errs"
)

// Live is a toolset whose tools change while herald runs: an MCP
// server's, which connects after the gateway started, or lists other
// tools later. A Set built with its toolset reads its current tools at
// each use (Specs, Call), so an agent's set, made once at start, offers
// what the toolset holds when the model is asked.
type Live struct {
	toolset string
	mu      sync.RWMutex
	tools   []*registered
}

// RegisterLive adds an empty live toolset and returns it; its tools are
// set with Replace. Errors: Invalid (an empty name), Conflict (a toolset
// of that name exists).
func (r *Registry) RegisterLive(toolset string) (*Live, error) {
	const op = "tools.RegisterLive"
	if strings.TrimSpace(toolset) == "" {
		return nil, errs.E(op, errs.Invalid, "empty toolset name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.toolsets[toolset]; ok {
		return nil, errs.E(op, errs.Conflict, "toolset %s is already registered", toolset)
	}
	l := &Live{toolset: toolset}
	if r.live == nil {
		r.live = map[string]*Live{}
	}
	r.live[toolset] = l
	r.toolsets[toolset] = nil
	r.order = append(r.order, toolset)
	return l, nil
}

// Replace makes tools the toolset's tools, all or none: each schema is
// compiled first, and a tool that does not compile or a name given twice
// leaves the toolset as it was. Errors: as Register's Invalid and
// Conflict.
func (l *Live) Replace(tools ...Tool) error {
	const op = "tools.Replace"
	compiled, err := compileAll(op, l.toolset, tools)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.tools = compiled
	l.mu.Unlock()
	return nil
}

// Names are the toolset's tools now, in order.
func (l *Live) Names() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]string, len(l.tools))
	for i, t := range l.tools {
		out[i] = t.Name
	}
	return out
}

func (l *Live) current() []*registered {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.tools
}

// all are the set's tools now: its fixed ones, then those its live
// toolsets hold that it does not exclude. A live tool whose name a fixed
// one has is left out: the fixed one was there first.
func (s *Set) all() []*registered {
	if s == nil {
		return nil
	}
	if len(s.live) == 0 {
		return s.tools
	}
	out := slices.Clone(s.tools)
	for _, l := range s.live {
		for _, t := range l.current() {
			if _, fixed := s.byName[t.Name]; !fixed && !slices.Contains(s.excluded, t.Name) {
				out = append(out, t)
			}
		}
	}
	return out
}

// lookup finds the named tool among the set's tools now.
func (s *Set) lookup(name string) *registered {
	if s == nil {
		return nil
	}
	if t, ok := s.byName[name]; ok {
		return t
	}
	for _, t := range s.all() {
		if t.Name == name {
			return t
		}
	}
	return nil
}
