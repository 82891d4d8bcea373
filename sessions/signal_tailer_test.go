package sessions_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// handled records the signals a tailer hands on.
type handled struct {
	mu   sync.Mutex
	got  []string
	seen chan struct{} // closed and replaced on every signal
}

func newHandled() *handled { return &handled{seen: make(chan struct{})} }

func (h *handled) HandleSignal(s sessions.Signal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, s.Conv+" "+string(s.Kind))
	close(h.seen)
	h.seen = make(chan struct{})
}

func (h *handled) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

func TestSignalTailer(t *testing.T) {
	tests := []struct {
		desc     string
		before   []string // conversations signalled before Start: never handed on
		after    []string // signalled after Start
		batch    int
		interval time.Duration
		poke     bool
	}{
		{desc: "a poke reads at once", before: []string{"a:1"}, after: []string{"a:2", "a:3"}, interval: time.Hour, poke: true},
		{desc: "reads in batches until the end", after: []string{"a:1", "a:2", "a:3", "a:4", "a:5"}, batch: 2, interval: time.Hour, poke: true},
		{desc: "reads on its own", after: []string{"a:1"}, interval: 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			ctx := context.Background()
			sig := newFakeSignals(clock.Real{})
			for _, c := range tc.before {
				if err := sig.Signal(ctx, sessions.Signal{Conv: c, Kind: sessions.SignalStop}); err != nil {
					t.Fatal(err)
				}
			}
			h := newHandled()
			tl, err := sessions.NewSignalTailer(sessions.SignalTailerOptions{Signals: sig, Handler: h, Batch: tc.batch, Interval: tc.interval, Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			if err := tl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tl.Shutdown(ctx) })
			var want []string
			for _, c := range tc.after {
				if err := sig.Signal(ctx, sessions.Signal{Conv: c, Kind: sessions.SignalStop}); err != nil {
					t.Fatal(err)
				}
				want = append(want, c+" stop")
			}
			if tc.poke {
				tl.Poke()
			}
			waitFor(t, "every signal handed on", func() bool { return len(h.list()) >= len(want) })
			if diff := cmp.Diff(want, h.list()); diff != "" {
				t.Errorf("handed on (-want +got):\n%s", diff)
			}
			if err := tl.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

func TestSignalTailerStartsTwice(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	tl, err := sessions.NewSignalTailer(sessions.SignalTailerOptions{Signals: newFakeSignals(clock.Real{}), Handler: newHandled(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer tl.Shutdown(ctx)
	if err := tl.Start(ctx); !errs.Is(err, errs.Conflict) {
		t.Errorf("second Start: %v, want a Conflict error", err)
	}
}
