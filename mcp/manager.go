package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/tools"
)

// A server's states.
const (
	StateConnecting = "connecting"
	StateReady      = "ready"
	StateFailed     = "failed"
	StateDisabled   = "disabled"
)

// The retry backoff of a server that failed or died: doubled from
// firstBackoff after each failure in a row, at most maxBackoff.
const (
	firstBackoff = time.Second
	maxBackoff   = time.Minute
)

// Options are what a Manager is made with.
type Options struct {
	Servers map[string]config.MCPServer
	// Env builds a stdio server's environment (config's SubprocessEnv).
	Env    *proc.Env
	Clock  clock.Clock
	Logger *slog.Logger
	// Live, when set, is told the ready servers' tools after each change.
	Live *tools.Live
	// OutputMaxChars caps a call's result (tools.output_max_chars); 0: no cap.
	OutputMaxChars int
	// Home is where the images of results are kept to be shown to the
	// model (media.FilePath); empty: each is a line of the result.
	Home string
	// Lookup reads the variables ${VAR} names; nil: herald's environment.
	Lookup func(string) (string, bool)
	// Observe, when set, is told how long each call took and how it
	// ended: ok, error (the server's or the transport's), timeout or
	// not_ready.
	Observe func(server, tool, result string, d time.Duration)
}

// Status is what is known of one server.
type Status struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	State     string   `json:"state"`
	Tools     []string `json:"tools"` // the names offered to the model
	LastError string   `json:"last_error,omitempty"`
}

// Manager keeps a session to each enabled server, in the background.
type Manager struct {
	opts Options
	dial dialer

	mu      sync.Mutex
	names   []string
	servers map[string]*server
	ctx     context.Context // Start's, which each server's run is under; nil before

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	publishMu sync.Mutex // one Replace at a time, of the tools then
}

// server is one configured server and what is known of it.
type server struct {
	name string
	cfg  config.MCPServer

	mu      sync.Mutex
	state   string
	lastErr string
	sess    *session
	tools   []tools.Tool
	refresh chan struct{} // a tools/list_changed to act on

	stop context.CancelFunc // ends its run; nil when it has none
	done chan struct{}      // closed when its run returned

	// redact hides its own credentials (config.MCPServer.Secrets) in
	// its results: a server added by a reload has secrets herald's
	// redactor was not made with.
	redact *redact.Redactor
}

func (m *Manager) newServer(name string, cfg config.MCPServer) *server {
	s := &server{name: name, cfg: cfg, state: StateConnecting, refresh: make(chan struct{}, 1), redact: redact.New(cfg.Secrets(m.opts.Lookup))}
	if !cfg.On() {
		s.state = StateDisabled
	}
	return s
}

// New returns a Manager of o's servers; nothing connects before Start.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Lookup == nil {
		o.Lookup = osLookup
	}
	m := &Manager{opts: o, dial: dialer{env: o.Env, lookup: o.Lookup}, servers: map[string]*server{}}
	for _, name := range slices.Sorted(maps.Keys(o.Servers)) {
		m.names = append(m.names, name)
		m.servers[name] = m.newServer(name, o.Servers[name])
	}
	return m
}

// Start connects every enabled server in parallel, in the background:
// it returns at once, whatever the servers do.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, name := range m.names {
		m.launch(m.servers[name])
	}
	return nil
}

// launch runs s in the background when it is enabled. m.mu is held.
func (m *Manager) launch(s *server) {
	if !s.cfg.On() {
		return
	}
	ctx, stop := context.WithCancel(m.ctx)
	s.stop, s.done = stop, make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(s.done)
		m.run(ctx, s)
	}()
}

// Reloaded says what a Reload did, each list by name.
type Reloaded struct {
	Connected []string `json:"connected"` // new or changed: (re)connecting
	Closed    []string `json:"closed"`    // removed from the config
	Kept      []string `json:"kept"`      // unchanged: their sessions go on
}

// Changed reports whether the reload touched any server.
func (r Reloaded) Changed() bool { return len(r.Connected)+len(r.Closed) > 0 }

// Reload makes servers the configured ones: a server whose config did
// not change keeps its session, a changed one is closed and connected
// again, a removed one closed, a new one connected.
func (m *Manager) Reload(servers map[string]config.MCPServer) Reloaded {
	var r Reloaded
	m.mu.Lock()
	var changed, stopping []*server
	names := slices.Sorted(maps.Keys(servers))
	next := map[string]*server{}
	for _, name := range names {
		old := m.servers[name]
		if old != nil && reflect.DeepEqual(old.cfg, servers[name]) {
			next[name] = old
			r.Kept = append(r.Kept, name)
			continue
		}
		next[name] = m.newServer(name, servers[name])
		changed = append(changed, next[name])
		r.Connected = append(r.Connected, name)
		if old != nil {
			stopping = append(stopping, old)
		}
	}
	for _, name := range m.names {
		if _, ok := servers[name]; !ok {
			stopping = append(stopping, m.servers[name])
			r.Closed = append(r.Closed, name)
		}
	}
	m.names, m.servers = names, next
	for _, s := range changed {
		if m.ctx != nil {
			m.launch(s)
		}
	}
	m.mu.Unlock()
	for _, s := range stopping {
		if s.stop != nil {
			s.stop()
			<-s.done
		}
	}
	m.publish()
	if r.Changed() {
		m.opts.Logger.Info("mcp servers reloaded", "connected", r.Connected, "closed", r.Closed, "kept", r.Kept)
	}
	return r
}

// snapshot is the servers, by name.
func (m *Manager) snapshot() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*server, len(m.names))
	for i, name := range m.names {
		out[i] = m.servers[name]
	}
	return out
}

// Shutdown closes each session, then ends its server's process group,
// and waits for the servers' loops within ctx.
func (m *Manager) Shutdown(ctx context.Context) error {
	if m.cancel == nil {
		return nil
	}
	m.mu.Lock()
	m.cancel()
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run keeps s connected until ctx ends: connect, serve until the session
// ends, then wait the backoff and connect again.
func (m *Manager) run(ctx context.Context, s *server) {
	log := m.opts.Logger.With("mcp_server", s.name)
	failures := 0
	for ctx.Err() == nil {
		m.set(s, StateConnecting, "", nil, nil)
		sess, err := m.dial.connect(ctx, s.cfg, func() {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		})
		var list []tools.Tool
		if err == nil {
			list, err = m.toolsOf(ctx, s, sess, log)
			if err != nil {
				sess.close()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.set(s, StateFailed, err.Error(), nil, nil)
			wait := backoff(failures)
			failures++
			log.Warn("mcp server failed", "err", err, "retry_in", wait)
			if !m.sleep(ctx, wait) {
				return
			}
			continue
		}
		failures = 0
		m.set(s, StateReady, "", sess, list)
		log.Info("mcp server ready", "transport", TransportOf(s.cfg), "tools", len(list))
		err = m.serve(ctx, s, sess, log)
		sess.close()
		if ctx.Err() != nil {
			m.set(s, StateFailed, "herald is shutting down", nil, nil)
			return
		}
		msg := "the server ended the session"
		if err != nil {
			msg += ": " + err.Error()
		}
		m.set(s, StateFailed, msg, nil, nil)
		log.Warn("mcp server went away", "err", msg)
		if !m.sleep(ctx, backoff(0)) {
			return
		}
	}
}

// serve waits for the session to end, refreshing the tools when the
// server says they changed.
func (m *Manager) serve(ctx context.Context, s *server, sess *session, log *slog.Logger) error {
	ended := make(chan error, 1)
	go func() { ended <- sess.cs.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			return err
		case <-s.refresh:
			list, err := m.toolsOf(ctx, s, sess, log)
			if err != nil {
				log.Warn("mcp server's new tools could not be listed", "err", err)
				continue
			}
			m.set(s, StateReady, "", sess, list)
			log.Info("mcp server's tools changed", "tools", len(list))
		}
	}
}

// toolsOf lists sess's tools as herald offers them, filtered.
func (m *Manager) toolsOf(ctx context.Context, s *server, sess *session, log *slog.Logger) ([]tools.Tool, error) {
	listed, err := sess.listTools(ctx, s.cfg.DialTimeout())
	if err != nil {
		return nil, fmt.Errorf("listing its tools: %w", err)
	}
	var out []tools.Tool
	for _, t := range listed {
		if !offered(s.cfg.Tools, t.Name) {
			continue
		}
		out = append(out, m.tool(s, t))
	}
	if len(listed) > 0 && len(out) == 0 {
		log.Warn("mcp server's tools.include and tools.exclude leave it no tools", "listed", len(listed))
	}
	return out, nil
}

// set records s's state. A server that is not ready keeps the tools it
// last listed, so the model calling one reads why it cannot run rather
// than that it does not exist; a ready one's tools are published before
// it is seen ready.
func (m *Manager) set(s *server, state, lastErr string, sess *session, list []tools.Tool) {
	s.mu.Lock()
	s.sess = sess
	if state != StateReady {
		s.state = state
		if lastErr != "" {
			s.lastErr = lastErr
		}
		s.mu.Unlock()
		return
	}
	s.tools = list
	s.mu.Unlock()
	m.publish()
	s.mu.Lock()
	s.state, s.lastErr = StateReady, ""
	s.mu.Unlock()
}

// publish hands the live toolset every server's tools.
func (m *Manager) publish() {
	if m.opts.Live == nil {
		return
	}
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	if err := m.opts.Live.Replace(m.Tools()...); err != nil {
		m.opts.Logger.Error("mcp tools refused", "err", err)
	}
}

// Tools are the servers' tools as offered to the model (those a server
// listed last), by server name then the server's order.
func (m *Manager) Tools() []tools.Tool {
	var out []tools.Tool
	for _, s := range m.snapshot() {
		s.mu.Lock()
		out = append(out, s.tools...)
		s.mu.Unlock()
	}
	return out
}

// Statuses are the servers' states, by name.
func (m *Manager) Statuses() []Status {
	var out []Status
	for _, s := range m.snapshot() {
		s.mu.Lock()
		st := Status{Name: s.name, Transport: TransportOf(s.cfg), State: s.state, LastError: s.lastErr, Tools: []string{}}
		for _, t := range s.tools {
			st.Tools = append(st.Tools, t.Name)
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}

// sleep waits d on the clock; false when ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	t := m.opts.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func backoff(failures int) time.Duration {
	d := firstBackoff << min(failures, 6)
	return min(d, maxBackoff)
}

// current is s's session when it is ready, or an error for the model.
func (s *server) current() (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateReady && s.sess != nil {
		return s.sess, nil
	}
	msg := fmt.Sprintf("MCP server %s is not connected (%s)", s.name, s.state)
	if s.lastErr != "" {
		msg += ": " + s.lastErr
	}
	return nil, errors.New(msg + "; herald keeps retrying it, try again later or do without it")
}
