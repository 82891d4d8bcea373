package signals

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/errs"
)

// Defaults for TailerOptions.
const (
	DefaultInterval = 100 * time.Millisecond
	DefaultBatch    = 256
)

// Handler takes the signals a tailer reads. The turn worker
// (sessions.TurnWorker) is one; a domain with kinds of its own
// (delegation.stop) is another. It is given
// every signal, and drops those that are not its own. It must not block:
// the handlers after it, and the next read, wait for it.
type Handler interface {
	HandleSignal(s Signal)
}

// TailerOptions configure NewTailer. At least one of Handler
// and Handlers is required.
type TailerOptions struct {
	Store Store // required
	// Handler, when set, is the first handler: usually this process's
	// turn worker.
	Handler Handler
	// Handlers take every signal after Handler, in order.
	Handlers []Handler
	// Interval is the wait between reads; 0 means DefaultInterval.
	// A Poke reads at once.
	Interval time.Duration
	// Batch is how many signals one read asks for; 0 means
	// DefaultBatch.
	Batch  int
	Logger *slog.Logger // nil means slog.Default()
	// Read counts the signals read, when set; for a metric.
	Read func(n int)
}

// Tailer is a process's one reader of the shared signal log. It
// reads whatever the number of turns the process runs, and hands each
// signal to every handler in order; each drops those for what it does not
// run. A handler that panics is logged and the others still get the
// signal: one domain's bug does not deafen the process's turns.
type Tailer struct {
	store    Store
	handlers []Handler
	interval time.Duration
	batch    int
	log      *slog.Logger
	read     func(n int)

	poke chan struct{}
	loop bgloop.Loop

	// mu makes Start and Shutdown one at a time: a Shutdown waits for a
	// Start under way, and stops the loop it started.
	mu sync.Mutex
	// cursor is where the next read starts, once positioned: a read from
	// "" only finds the log's end. Start sets it before the loop runs;
	// then the loop alone reads and sets it.
	cursor     string
	positioned bool
}

// NewTailer returns a tailer; Start runs it. Errors: Invalid (no
// store, no handler, or a nil one among Handlers).
func NewTailer(opts TailerOptions) (*Tailer, error) {
	const op = "signals.NewTailer"
	var handlers []Handler
	if opts.Handler != nil {
		handlers = append(handlers, opts.Handler)
	}
	for i, h := range opts.Handlers {
		if h == nil {
			return nil, errs.E(op, errs.Invalid, "signal handler %d is nil", i)
		}
		handlers = append(handlers, h)
	}
	if opts.Store == nil || len(handlers) == 0 {
		return nil, errs.E(op, errs.Invalid, "a signal tailer needs a store and a handler")
	}
	t := &Tailer{
		store:    opts.Store,
		handlers: handlers,
		interval: opts.Interval,
		batch:    opts.Batch,
		log:      opts.Logger,
		read:     opts.Read,
		poke:     make(chan struct{}, 1),
	}
	if t.interval <= 0 {
		t.interval = DefaultInterval
	}
	if t.batch <= 0 {
		t.batch = DefaultBatch
	}
	if t.log == nil {
		t.log = slog.Default()
	}
	return t, nil
}

// Start takes the log's current end as its starting point, so every
// signal sent after Start returns is read, then starts reading. A store
// that cannot be reached now does not fail Start: the loop keeps trying.
// Errors: Conflict (started before).
func (t *Tailer) Start(ctx context.Context) error {
	const op = "signals.Tailer.Start"
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loop.Started() {
		return errs.E(op, errs.Conflict, "the signal tailer was started before")
	}
	if _, cursor, err := t.store.SignalsAfter(ctx, "", t.batch); err != nil {
		t.log.Warn("reading the signal log's end failed; retrying", "err", err)
	} else {
		t.cursor, t.positioned = cursor, true
	}
	return t.loop.Start(ctx, op, t.tail)
}

// Shutdown stops reading and waits for the loop to end, or for ctx.
// Shut the turn worker down first: its turns hear signals until they end.
func (t *Tailer) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.loop.Stop(ctx); err != nil {
		return errs.Wrap("signals.Tailer.Shutdown", errs.Unavailable, err)
	}
	return nil
}

// Poke makes the tailer read now: this process just sent a signal, and a
// turn it runs itself should not wait for the next read.
func (t *Tailer) Poke() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// tail reads on every tick and poke until ctx ends.
func (t *Tailer) tail(ctx context.Context) {
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.poke:
		}
		t.readAll(ctx)
	}
}

// readAll reads until the log's end, in batches.
func (t *Tailer) readAll(ctx context.Context) {
	for ctx.Err() == nil {
		after, positioned := t.cursor, t.positioned
		if !positioned {
			after = ""
		}
		sigs, next, err := t.store.SignalsAfter(ctx, after, t.batch)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn("reading signals failed", "err", err)
			}
			return
		}
		t.cursor, t.positioned = next, true
		if !positioned {
			return // that read only found the end to start from
		}
		if t.read != nil && len(sigs) > 0 {
			t.read(len(sigs))
		}
		for _, s := range sigs {
			for _, h := range t.handlers {
				t.hand(h, s)
			}
		}
		if len(sigs) < t.batch {
			return
		}
	}
}

// hand gives s to h, and logs a panic of h instead of letting it end the
// loop: the other handlers and the reads that follow go on.
func (t *Tailer) hand(h Handler, s Signal) {
	defer func() {
		if r := recover(); r != nil {
			t.log.Error("a signal handler panicked", "handler", fmt.Sprintf("%T", h),
				"conv", s.Conv, "kind", s.Kind, "target", s.Target, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	h.HandleSignal(s)
}
