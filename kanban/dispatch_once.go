package kanban

import (
	"context"
	"maps"
	"sync"
	"time"
)

// onceStopTimeout bounds the stop of an interrupted OnceDispatch's
// workers and the read of how each card was left.
const onceStopTimeout = 30 * time.Second

// OnceDispatch is one dispatch whose workers are waited for, by a
// process that dispatches no more after it: the dispatcher renews their
// claims until each has ended, so a worker is never left running
// without the claim that keeps other dispatchers off its card.
type OnceDispatch struct {
	d           *Dispatcher
	interrupted string // the reason recorded on the claims an interrupt releases

	mu      sync.Mutex
	live    map[string]onceWorker // card → its worker, until it ended
	changed chan struct{}         // a worker ended
}

// onceWorker is a worker the dispatch started, under the claim of token.
type onceWorker struct {
	token  int64
	worker Worker
}

// NewOnceDispatch is one dispatch of a dispatcher of opts, whose Ended
// is its own. interrupted is why the claims of the workers an interrupt
// stops are released (Wait). Errors: those of NewDispatcher.
func NewOnceDispatch(opts DispatcherOptions, interrupted string) (*OnceDispatch, error) {
	o := &OnceDispatch{interrupted: interrupted, live: map[string]onceWorker{}, changed: make(chan struct{}, 1)}
	lanes := make(map[string]LaneConfig, len(opts.Lanes))
	for name, lc := range opts.Lanes {
		lc.Lane = recordingLane{Lane: lc.Lane, o: o}
		lanes[name] = lc
	}
	opts.Lanes, opts.Ended = lanes, o.ended
	var err error
	if o.d, err = NewDispatcher(opts); err != nil {
		return nil, err
	}
	return o, nil
}

// Tick runs the dispatch: release what died, promote, claim and start.
func (o *OnceDispatch) Tick(ctx context.Context) (TickReport, error) {
	return o.d.Tick(ctx, false)
}

// Running is how many of the workers the dispatch started run still.
func (o *OnceDispatch) Running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.live)
}

// Wait renews the claims of the workers the dispatch started until each
// has ended, and returns the status each card of claimed was left in.
// When ctx ends first it releases their claims, uncounted, stops them,
// and reports interrupted.
func (o *OnceDispatch) Wait(ctx context.Context, claimed []string) (ended map[string]Status, interrupted bool) {
	interrupted = o.wait(ctx)
	ended = map[string]Status{}
	// Read without ctx: it may have ended with an interrupt.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), onceStopTimeout)
	defer cancel()
	for _, id := range claimed {
		if k, err := o.d.svc.Store.Card(rctx, id); err == nil {
			ended[id] = k.Status
		}
	}
	return ended, interrupted
}

func (o *OnceDispatch) wait(ctx context.Context) bool {
	every := max(o.d.opts.ClaimTTL/3, time.Second)
	for o.Running() > 0 {
		t := o.d.clk.NewTimer(every)
		select {
		case <-o.changed:
		case <-t.C():
			o.d.Heartbeat(ctx)
		case <-ctx.Done():
			t.Stop()
			o.stop()
			return true
		}
		t.Stop()
	}
	return false
}

// stop releases each live worker's claim, so what it reported no more
// counts, and stops it; it returns once their ends are recorded.
func (o *OnceDispatch) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), onceStopTimeout)
	defer cancel()
	o.mu.Lock()
	live := maps.Clone(o.live)
	o.mu.Unlock()
	for card, w := range live {
		_, _ = o.d.svc.Release(ctx, card, w.token, Ending{Outcome: OutcomeReclaimed, Reason: o.interrupted, Uncounted: true})
		_ = w.worker.Stop(ctx)
	}
	for o.Running() > 0 {
		select {
		case <-o.changed:
		case <-ctx.Done():
			return
		}
	}
}

// ended is the dispatcher's word that card's worker ended and how it
// ended is recorded.
func (o *OnceDispatch) ended(card string, _ Exit) {
	o.mu.Lock()
	delete(o.live, card)
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// recordingLane is a lane whose workers o knows of.
type recordingLane struct {
	Lane
	o *OnceDispatch
}

func (l recordingLane) Start(ctx context.Context, spec WorkerSpec) (Worker, error) {
	w, err := l.Lane.Start(ctx, spec)
	if err == nil {
		l.o.mu.Lock()
		l.o.live[spec.Card.ID] = onceWorker{token: spec.Token, worker: w}
		l.o.mu.Unlock()
	}
	return w, err
}
