package adapters

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// The pause before an adapter that stopped runs again: restartMin after
// a failure, doubling up to restartMax; an adapter that ran longer than
// restartFresh before it failed starts again from restartMin.
const (
	restartMin   = time.Second
	restartMax   = time.Minute
	restartFresh = time.Minute
)

// SupervisorOptions are what a Supervisor is made with.
type SupervisorOptions struct {
	Adapter Adapter // required
	Inbox   Inbox   // what the adapter's Run is given; required
	// Owner, when set, runs the adapter only while this process holds
	// its ownership lease: an Exclusive adapter's.
	Owner *Owner
	// Up is called before each run and Down after it: the adapter's
	// platform is a route meanwhile, while an exclusive adapter waits
	// for its lease too, since sending never needs the lease. Nil: none.
	Up   func()
	Down func()
	// Clock times the runs and the pauses between them; nil: the wall
	// clock.
	Clock clock.Clock
	// Logger logs each stop, with the adapter's platform; nil: the
	// default.
	Logger *slog.Logger
}

// Supervisor runs one adapter until its context ends or Shutdown: a Run
// that returns, fails or panics is logged and run again after a pause
// of a second doubling to a minute. It is a component: Start, Shutdown.
type Supervisor struct {
	o    SupervisorOptions
	log  *slog.Logger
	loop bgloop.Loop
}

// NewSupervisor returns the supervisor of o.Adapter; Start runs it.
func NewSupervisor(o SupervisorOptions) *Supervisor {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Supervisor{o: o, log: cmp.Or(o.Logger, slog.Default()).With("platform", o.Adapter.Platform())}
}

// Start runs the adapter until ctx ends or Shutdown. Errors: Conflict
// (started before).
func (s *Supervisor) Start(ctx context.Context) error {
	return s.loop.Start(ctx, "adapters.Supervisor.Start", s.run)
}

// Shutdown ends the adapter's Run and waits for it within ctx.
func (s *Supervisor) Shutdown(ctx context.Context) error { return s.loop.Stop(ctx) }

// run runs the adapter, again after a growing pause each time it stops,
// until ctx ends.
func (s *Supervisor) run(ctx context.Context) {
	pause := restartMin
	for {
		s.notify(s.o.Up)
		started := s.o.Clock.Now()
		err := s.runOwned(ctx)
		s.notify(s.o.Down)
		if ctx.Err() != nil {
			return
		}
		if s.o.Clock.Now().Sub(started) > restartFresh {
			pause = restartMin // it ran a good while: a fresh failure
		}
		s.log.Error("the adapter stopped; restarting it", "err", err, "in", pause)
		if !clock.SleepOn(ctx, s.o.Clock, pause) {
			return
		}
		pause = min(2*pause, restartMax)
	}
}

func (s *Supervisor) notify(f func()) {
	if f != nil {
		f()
	}
}

// runOwned runs the adapter once: behind its lease when it has an Owner.
func (s *Supervisor) runOwned(ctx context.Context) error {
	if s.o.Owner == nil {
		return s.runOnce(ctx)
	}
	return s.o.Owner.Run(ctx, s.runOnce)
}

// runOnce runs the adapter once, turning a panic into an error so that
// one adapter cannot take the process down.
func (s *Supervisor) runOnce(ctx context.Context) (err error) {
	const op = "adapters.Supervisor"
	a := s.o.Adapter
	defer func() {
		if p := recover(); p != nil {
			err = errs.E(op, errs.Internal, "the %s adapter panicked: %v", a.Platform(), p)
		}
	}()
	if err := a.Run(ctx, s.o.Inbox); err != nil {
		return err
	}
	if ctx.Err() == nil {
		return errs.E(op, errs.Internal, "the %s adapter returned while the gateway runs", a.Platform())
	}
	return nil
}
