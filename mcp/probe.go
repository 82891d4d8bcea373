package mcp

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/proc"
)

// Probe is one connect, list and close of a server, timed: what
// `herald mcp list` and `herald mcp test` show without a gateway.
type Probe struct {
	Status
	Connect time.Duration `json:"connect_ms"`
	List    time.Duration `json:"list_ms"`
	Close   time.Duration `json:"close_ms"`
}

// ProbeServer connects to s, lists its tools as they would be offered
// (filtered), and disconnects, ending a stdio server's process group.
// lookup reads the variables ${VAR} names; nil: herald's environment.
func ProbeServer(ctx context.Context, name string, s config.MCPServer, env *proc.Env, lookup func(string) (string, bool)) Probe {
	p := Probe{Status: Status{Name: name, Transport: TransportOf(s), State: StateDisabled, Tools: []string{}}}
	if !s.On() {
		return p
	}
	if lookup == nil {
		lookup = osLookup
	}
	m := New(Options{Env: env, Lookup: lookup})
	srv := &server{name: name, cfg: s}
	start := time.Now()
	sess, err := m.dial.connect(ctx, s, nil)
	p.Connect = time.Since(start)
	if err != nil {
		p.State, p.LastError = StateFailed, err.Error()
		return p
	}
	start = time.Now()
	list, err := m.toolsOf(ctx, srv, sess, m.opts.Logger.With("mcp_server", name))
	p.List = time.Since(start)
	start = time.Now()
	sess.close()
	p.Close = time.Since(start)
	if err != nil {
		p.State, p.LastError = StateFailed, err.Error()
		return p
	}
	p.State = StateReady
	for _, t := range list {
		p.Tools = append(p.Tools, t.Name)
	}
	return p
}

// ProbeAll probes every server in parallel, by name.
func ProbeAll(ctx context.Context, servers map[string]config.MCPServer, env *proc.Env, lookup func(string) (string, bool)) []Probe {
	names := slices.Sorted(maps.Keys(servers))
	out := make([]Probe, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { out[i] = ProbeServer(ctx, name, servers[name], env, lookup) })
	}
	wg.Wait()
	return out
}
