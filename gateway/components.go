package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/heraldgw/herald/delivery"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/metrics"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// Component is one of the gateway's background loops. Each is registered
// once, in dependency order: the gateway's own with Gateway.add in build,
// then a capability's in its Capability.Components. A component starts
// after every one above it and stops before them, so one that needs
// another (the turns need the delivery worker to send their replies) is
// added below it. A new background loop is one more entry there; neither
// Start nor Shutdown changes.
type Component interface {
	// Start starts the loop under ctx, whose end stops it hard.
	Start(ctx context.Context) error
	// Shutdown stops it gracefully within ctx, and returns when it ended.
	Shutdown(ctx context.Context) error
}

var (
	_ Component = (*delivery.Worker)(nil)
	_ Component = (*delivery.Presence)(nil)
	_ Component = (*instances.Heartbeat)(nil)
	_ Component = (*delivery.Streaming)(nil)
	_ Component = (*metrics.StoreGauges)(nil)
	_ Component = (*sessions.TurnWorker)(nil)
	_ Component = (*signals.Tailer)(nil)
)

// namedComponent is a component and the name its start and stop are
// logged and reported under.
type namedComponent struct {
	name string
	c    Component
}

// components are the gateway's background loops in start order.
type components []namedComponent

// add registers c under name, after every component added before it.
func (g *Gateway) add(name string, c Component) {
	g.parts = append(g.parts, namedComponent{name: name, c: c})
}

// start starts each component in order. When one fails, those started
// are shut down, in reverse, within ctx, and the error names the one
// that failed.
func (cs components) start(ctx context.Context, log *slog.Logger) error {
	for i, nc := range cs {
		if err := nc.c.Start(ctx); err != nil {
			err = fmt.Errorf("starting %s: %w", nc.name, err)
			return errors.Join(err, cs[:i].shutdown(ctx, log))
		}
	}
	return nil
}

// shutdown stops every component, the last started first, each within
// ctx, and joins what they report; one failing does not keep the ones
// before it running.
func (cs components) shutdown(ctx context.Context, log *slog.Logger) error {
	var problems []error
	for _, nc := range slices.Backward(cs) {
		began := time.Now()
		err := nc.c.Shutdown(ctx)
		took := time.Since(began).Milliseconds()
		if err != nil {
			log.Warn("part stopped with a problem", "part", nc.name, "took_ms", took, "err", err)
			problems = append(problems, fmt.Errorf("stopping %s: %w", nc.name, err))
			continue
		}
		log.Info("part stopped", "part", nc.name, "took_ms", took)
	}
	return errors.Join(problems...)
}

// bounded is c, whose Shutdown has at most d besides the ctx it is
// given: for a component whose graceful stop has a budget of its own,
// as the delivery worker's drain.
func bounded(c Component, d time.Duration) Component { return boundedComponent{c, d} }

type boundedComponent struct {
	Component
	d time.Duration
}

func (b boundedComponent) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.d)
	defer cancel()
	return b.Component.Shutdown(ctx)
}
