package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/signals"
)

// SignalReload asks every gateway to reload its MCP servers from its
// config file (/reload-mcp); Text names the gateway that asked, which
// reloaded already.
const SignalReload signals.Kind = "mcp.reload"

// WatchInterval is how often the config file is looked at for a change.
const WatchInterval = 2 * time.Second

// errNoFile is why a gateway started without a config file reloads
// nothing.
var errNoFile = errors.New("herald was started without a config file; mcp_servers is read from one (--config, $HERALD_CONFIG or $HERALD_HOME/herald.yaml)")

// Reloader reloads a Manager's servers from the config file: when asked
// (/reload-mcp, another gateway's SignalReload) and when the file
// changes, which it looks at every WatchInterval.
type Reloader struct {
	opts ReloaderOptions

	mu   sync.Mutex // one reload at a time
	seen fileState  // the file as last looked at

	loop bgloop.Loop // the watch of the file
}

// ReloaderOptions are what a Reloader is made with.
type ReloaderOptions struct {
	Manager *Manager
	// File is the config file; empty: the gateway read none, and a
	// reload says so.
	File string
	// Load reads the servers of the file again; an error (the file has
	// problems) leaves the servers as they are.
	Load   func() (map[string]config.MCPServer, error)
	Clock  clock.Clock
	Logger *slog.Logger
	// Name is this gateway's, which its SignalReload carries.
	Name string
}

// NewReloader returns a Reloader of o.Manager's servers.
func NewReloader(o ReloaderOptions) *Reloader {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Reloader{opts: o}
}

// fileState is what changes when a file is written or replaced.
type fileState struct {
	mod  time.Time
	size int64
	ok   bool
}

func stat(file string) fileState {
	fi, err := os.Stat(file)
	if err != nil {
		return fileState{}
	}
	return fileState{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

// Reload reads the config file again and reloads the servers it names.
func (r *Reloader) Reload() (Reloaded, error) {
	if r.opts.File == "" || r.opts.Load == nil {
		return Reloaded{}, errNoFile
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = stat(r.opts.File)
	servers, err := r.opts.Load()
	if err != nil {
		return Reloaded{}, fmt.Errorf("%s has problems, so the MCP servers are left as they are: %v", r.opts.File, err)
	}
	return r.opts.Manager.Reload(servers), nil
}

// Start looks at the config file every WatchInterval until Shutdown.
// Errors: Conflict (started before).
func (r *Reloader) Start(ctx context.Context) error {
	if r.opts.File == "" {
		return nil
	}
	r.mu.Lock()
	r.seen = stat(r.opts.File)
	r.mu.Unlock()
	return r.loop.Start(context.WithoutCancel(ctx), "mcp.Reloader.Start", r.watch)
}

// watch reloads whenever the file's size or time changed since it was
// last read.
func (r *Reloader) watch(ctx context.Context) {
	for {
		t := r.opts.Clock.NewTimer(WatchInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		r.mu.Lock()
		changed := stat(r.opts.File) != r.seen
		r.mu.Unlock()
		if !changed {
			continue
		}
		if _, err := r.Reload(); err != nil {
			r.opts.Logger.Error("the config file changed and could not be read; the MCP servers are unchanged", "file", r.opts.File, "err", err)
		}
	}
}

// Shutdown stops looking at the file.
func (r *Reloader) Shutdown(ctx context.Context) error { return r.loop.Stop(ctx) }

// HandleSignal reloads on another gateway's SignalReload.
func (r *Reloader) HandleSignal(s signals.Signal) {
	if s.Kind != SignalReload || s.Text == r.opts.Name {
		return
	}
	go func() {
		if _, err := r.Reload(); err != nil {
			r.opts.Logger.Error("another gateway asked for an MCP reload; the config file could not be read", "asked_by", s.Text, "err", err)
		}
	}()
}

// ReloadedText is what /reload-mcp answers.
func ReloadedText(file string, r Reloaded) string {
	if !r.Changed() {
		if len(r.Kept) == 0 {
			return fmt.Sprintf("No MCP servers are configured in %s.", file)
		}
		return fmt.Sprintf("The MCP servers in %s are unchanged (%s).", file, strings.Join(r.Kept, ", "))
	}
	parts := []string{}
	if len(r.Connected) > 0 {
		parts = append(parts, "connecting "+strings.Join(r.Connected, ", "))
	}
	if len(r.Closed) > 0 {
		parts = append(parts, "closed "+strings.Join(r.Closed, ", "))
	}
	if len(r.Kept) > 0 {
		parts = append(parts, "unchanged "+strings.Join(r.Kept, ", "))
	}
	return fmt.Sprintf("MCP servers reloaded from %s: %s. /mcp shows their state.", file, strings.Join(parts, "; "))
}
