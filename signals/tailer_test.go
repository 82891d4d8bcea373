package signals_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/signals/signalstest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/signals"
)

// handled records the signals a tailer hands on, as "conv kind".
type handled struct{ testkit.Recorder[string] }

func newHandled() *handled { return &handled{} }

func (h *handled) HandleSignal(s signals.Signal) { h.Add(s.Conv + " " + string(s.Kind)) }

func TestTailer(t *testing.T) {
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
			sig := signalstest.NewLog(clock.Real{})
			for _, c := range tc.before {
				if err := sig.Signal(ctx, signals.Signal{Conv: c, Kind: signals.Stop}); err != nil {
					t.Fatal(err)
				}
			}
			h := newHandled()
			tl, err := signals.NewTailer(signals.TailerOptions{Store: sig, Handler: h, Batch: tc.batch, Interval: tc.interval, Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			if err := tl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tl.Shutdown(ctx) })
			var want []string
			for _, c := range tc.after {
				if err := sig.Signal(ctx, signals.Signal{Conv: c, Kind: signals.Stop}); err != nil {
					t.Fatal(err)
				}
				want = append(want, c+" stop")
			}
			if tc.poke {
				tl.Poke()
			}
			h.Wait(t, len(want))
			if diff := cmp.Diff(want, h.All()); diff != "" {
				t.Errorf("handed on (-want +got):\n%s", diff)
			}
			if err := tl.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

func TestTailerStartsTwice(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	tl, err := signals.NewTailer(signals.TailerOptions{Store: signalstest.NewLog(clock.Real{}), Handler: newHandled(), Logger: quietLog()})
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

// ledgerHandler writes what it is handed into a ledger, one list of
// what each of several handlers was handed, so a test sees the order
// across handlers too; then it panics when panics is set.
type ledgerHandler struct {
	name   string
	l      *testkit.Recorder[string]
	panics bool
}

func (h ledgerHandler) HandleSignal(s signals.Signal) {
	h.l.Add(h.name + " " + s.Conv + " " + string(s.Kind) + " " + s.Target)
	if h.panics {
		panic("a bug in " + h.name)
	}
}

func TestTailerFansOut(t *testing.T) {
	tests := []struct {
		desc string
		// handler, when set, is passed as Handler; handlers as Handlers.
		handler  string
		handlers []string
		panics   map[string]bool
	}{
		{desc: "every handler gets every signal, in order", handlers: []string{"worker", "delegation"}},
		{desc: "Handler comes before Handlers", handler: "worker", handlers: []string{"delegation"}},
		{desc: "a handler that panics stops neither the others nor the reads", handlers: []string{"buggy", "worker", "delegation"}, panics: map[string]bool{"buggy": true}},
		{desc: "the last handler panicking", handler: "worker", handlers: []string{"buggy"}, panics: map[string]bool{"buggy": true}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			ctx := context.Background()
			sig := signalstest.NewLog(clock.Real{})
			l := &testkit.Recorder[string]{}
			opts := signals.TailerOptions{Store: sig, Interval: time.Hour}
			var order []string
			if tc.handler != "" {
				opts.Handler = ledgerHandler{name: tc.handler, l: l, panics: tc.panics[tc.handler]}
				order = append(order, tc.handler)
			}
			for _, name := range tc.handlers {
				opts.Handlers = append(opts.Handlers, ledgerHandler{name: name, l: l, panics: tc.panics[name]})
				order = append(order, name)
			}
			logs := &testkit.LogBuffer{}
			opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
			tl, err := signals.NewTailer(opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := tl.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tl.Shutdown(ctx) })

			// Two rounds: the loop still reads after a handler panicked.
			rounds := [][]signals.Signal{
				{{Conv: "a:1", Kind: signals.Stop}, {Conv: "a:1", Kind: "delegation.stop", Target: "sub-1"}},
				{{Conv: "a:2", Kind: "delegation.steer", Target: "sub-2"}},
			}
			var want []string
			for _, round := range rounds {
				for _, s := range round {
					if err := sig.Signal(ctx, s); err != nil {
						t.Fatal(err)
					}
					for _, name := range order {
						want = append(want, name+" "+s.Conv+" "+string(s.Kind)+" "+s.Target)
					}
				}
				tl.Poke()
				l.Wait(t, len(want))
			}
			if diff := cmp.Diff(want, l.All()); diff != "" {
				t.Errorf("handed on (-want +got):\n%s", diff)
			}
			// The ledger is written before a handler panics and the panic is
			// logged after: the loop has ended once Shutdown returns, and so
			// has its last log line.
			if err := tl.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			wantPanics := 0
			for _, name := range order {
				if tc.panics[name] {
					wantPanics += 3
				}
			}
			if n := strings.Count(logs.String(), "a signal handler panicked"); n != wantPanics {
				t.Errorf("%d panics logged, want %d:\n%s", n, wantPanics, logs)
			}
		})
	}
}

func TestNewTailerRefuses(t *testing.T) {
	sig := signalstest.NewLog(clock.Real{})
	tests := []struct {
		desc string
		opts signals.TailerOptions
	}{
		{desc: "no store", opts: signals.TailerOptions{Handler: newHandled()}},
		{desc: "no handler", opts: signals.TailerOptions{Store: sig}},
		{desc: "an empty list of handlers", opts: signals.TailerOptions{Store: sig, Handlers: []signals.Handler{}}},
		{desc: "a nil handler in the list", opts: signals.TailerOptions{Store: sig, Handlers: []signals.Handler{newHandled(), nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := signals.NewTailer(tc.opts); !errs.Is(err, errs.Invalid) {
				t.Errorf("NewTailer: %v, want an Invalid error", err)
			}
		})
	}
}

func TestKindDomain(t *testing.T) {
	tests := []struct {
		desc string
		kind signals.Kind
		want string
	}{
		{desc: "a domain's kind", kind: "delegation.stop", want: "delegation"},
		{desc: "digits and underscores", kind: "kan_ban2.move_card", want: "kan_ban2"},
		{desc: "the turn's own kind", kind: signals.Stop},
		{desc: "upper case", kind: "Delegation.Stop"},
		{desc: "no name", kind: "delegation."},
		{desc: "no domain", kind: ".stop"},
		{desc: "nested", kind: "a.b.c"},
		{desc: "a dash", kind: "dele-gation.stop"},
		{desc: "a space", kind: "delegation. stop"},
		{desc: "empty", kind: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.kind.Domain(); got != tc.want {
				t.Errorf("Kind(%q).Domain() = %q, want %q", tc.kind, got, tc.want)
			}
		})
	}
}

// noLeaks checks, at the end of the test, after every cleanup registered
// later, that the test left no goroutine behind.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// quietLog keeps test output readable; set HERALD_TEST_LOG to see it.
func quietLog() *slog.Logger {
	if os.Getenv("HERALD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
