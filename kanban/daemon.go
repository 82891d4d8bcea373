package kanban

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// Daemon is a dispatcher that runs outside a gateway (`herald kanban
// daemon`): the dispatcher, and the signal tailer through which it hears
// of cards made ready on other instances, as a gateway's does. It is a
// component: Start, Shutdown.
type Daemon struct {
	dispatcher *Dispatcher
	tailer     *signals.Tailer
	lanes      []string
	log        *slog.Logger
}

// NewDaemon returns a daemon dispatching with opts, whose Signals it
// tails; a card made ready through opts.Service wakes it. Errors:
// Invalid (no Signals, and NewDispatcher's).
func NewDaemon(opts DispatcherOptions) (*Daemon, error) {
	if opts.Signals == nil {
		return nil, errs.E("kanban.NewDaemon", errs.Invalid, "the daemon needs the signal log")
	}
	d, err := NewDispatcher(opts)
	if err != nil {
		return nil, err
	}
	opts.Service.Ready = d.Wake
	tailer, err := signals.NewTailer(signals.TailerOptions{Store: opts.Signals, Handlers: []signals.Handler{d}, Logger: d.log})
	if err != nil {
		return nil, err
	}
	return &Daemon{dispatcher: d, tailer: tailer, lanes: slices.Sorted(maps.Keys(opts.Lanes)), log: d.log}, nil
}

// Start starts the dispatcher, then the tailer; ctx's end stops them
// hard. Errors: Conflict (started before).
func (d *Daemon) Start(ctx context.Context) error {
	if len(d.lanes) == 0 {
		d.log.Warn("kanban.lanes has no command lane: this daemon dispatches nothing")
	}
	if err := d.dispatcher.Start(ctx); err != nil {
		return err
	}
	if err := d.tailer.Start(ctx); err != nil {
		return errors.Join(err, d.dispatcher.Shutdown(context.Background()))
	}
	d.log.Info("the kanban daemon runs", "lanes", d.lanes)
	return nil
}

// Shutdown stops the dispatcher within ctx (its workers are stopped and
// their claims released, uncounted, for another dispatcher to run them
// again), then the tailer.
func (d *Daemon) Shutdown(ctx context.Context) error {
	err := d.dispatcher.Shutdown(ctx)
	_ = d.tailer.Shutdown(context.Background())
	if err != nil {
		return fmt.Errorf("stopping the kanban daemon: %w", err)
	}
	d.log.Info("the kanban daemon stopped")
	return nil
}
