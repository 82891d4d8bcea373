package sessions_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/signals/signalstest"

	"go.uber.org/goleak"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/store/sqlite"
)

const conv = "telegram:100"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openDB opens a store on a fresh file; the test closes it at its end.
func openDB(t *testing.T, clk clock.Clock) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// counters records the worker's metric hooks.
type counters struct {
	mu       sync.Mutex
	started  int
	finished map[sessions.TurnEnd]int
	failed   map[string]int
	takeover int
	lost     int
}

func (c *counters) hooks() sessions.TurnMetrics {
	c.finished, c.failed = map[sessions.TurnEnd]int{}, map[string]int{}
	return sessions.TurnMetrics{
		Started:   func() { c.mu.Lock(); c.started++; c.mu.Unlock() },
		Finished:  func(end sessions.TurnEnd, _ time.Duration) { c.mu.Lock(); c.finished[end]++; c.mu.Unlock() },
		Failed:    func(reason string) { c.mu.Lock(); c.failed[reason]++; c.mu.Unlock() },
		Takeover:  func() { c.mu.Lock(); c.takeover++; c.mu.Unlock() },
		LeaseLost: func() { c.mu.Lock(); c.lost++; c.mu.Unlock() },
	}
}

func (c *counters) get(f func(c *counters) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c)
}

// gateway is one process's sessions side: router, turn worker and signal
// tailer on a shared store.
type gateway struct {
	t       *testing.T
	db      *sqlite.DB
	store   sessions.Store
	outbox  outbox.Store
	signals *signalstest.Log
	worker  *sessions.TurnWorker
	tailer  *signals.Tailer
	router  *sessions.Router
	metrics *counters
	stopped bool
}

type gatewayOptions struct {
	db       *sqlite.DB // nil opens a new one
	signals  *signalstest.Log
	clock    clock.Clock
	runner   sessions.TurnRunner
	worker   sessions.TurnWorkerOptions // Store, Runner, Metrics are filled in
	mode     sessions.BusyInputMode
	commands *sessions.Commands                  // shared by router and worker; nil means the defaults
	wrap     func(sessions.Store) sessions.Store // wraps the store router and worker use
}

// startWorker starts a turn worker with o, quiet, shut down when the
// test ends.
func startWorker(t *testing.T, o sessions.TurnWorkerOptions) *sessions.TurnWorker {
	t.Helper()
	o.Logger = quietLog()
	w, err := sessions.NewTurnWorker(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Shutdown(ctx) })
	return w
}

// quietLog keeps test output readable; set HERALD_TEST_LOG to see it.
func quietLog() *slog.Logger {
	if os.Getenv("HERALD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startGateway(t *testing.T, o gatewayOptions) *gateway {
	t.Helper()
	if o.clock == nil {
		o.clock = clock.Real{}
	}
	if o.db == nil {
		o.db = openDB(t, o.clock)
	}
	if o.signals == nil {
		o.signals = signalstest.NewLog(o.clock)
	}
	g := &gateway{t: t, db: o.db, store: o.db.Sessions(), outbox: o.db.Outbox(), signals: o.signals, metrics: &counters{}}
	if o.wrap != nil {
		g.store = o.wrap(g.store)
	}
	wo := o.worker
	wo.Store, wo.Runner, wo.Metrics, wo.Commands = g.store, o.runner, g.metrics.hooks(), o.commands
	if wo.Clock == nil {
		wo.Clock = o.clock
	}
	if wo.PollMax == 0 {
		wo.PollMax = 20 * time.Millisecond
	}
	wo.Logger = quietLog()
	var err error
	if g.worker, err = sessions.NewTurnWorker(wo); err != nil {
		t.Fatal(err)
	}
	if g.tailer, err = signals.NewTailer(signals.TailerOptions{Store: g.signals, Handler: g.worker, Interval: 20 * time.Millisecond, Logger: quietLog()}); err != nil {
		t.Fatal(err)
	}
	g.router, err = sessions.NewRouter(sessions.RouterOptions{
		Store: g.store, Outbox: g.outbox, Signals: g.signals, BusyInputMode: o.mode, Commands: o.commands,
		Turns: g.worker, Tailer: g.tailer, Clock: o.clock, Logger: quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.tailer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.shutdown(5 * time.Second) })
	return g
}

// shutdown stops the worker, then the tailer, giving turns grace.
func (g *gateway) shutdown(timeout time.Duration) error {
	if g.stopped {
		return nil
	}
	g.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := g.worker.Shutdown(ctx)
	if terr := g.tailer.Shutdown(ctx); err == nil {
		err = terr
	}
	return err
}

func (g *gateway) deliver(in sessions.Inbound) {
	g.t.Helper()
	if in.Conv == "" {
		in.Conv = conv
	}
	if err := g.router.Deliver(context.Background(), in); err != nil {
		g.t.Fatalf("Deliver(%q): %v", in.Text, err)
	}
}

// say delivers text as a user message with a message id of its own.
func (g *gateway) say(text string) {
	g.t.Helper()
	g.deliver(sessions.Inbound{Text: text, Sender: "42", MessageID: "m-" + text})
}

// sent is the text of every outbox message of conv, oldest first.
func (g *gateway) sent(conv string) []string {
	g.t.Helper()
	msgs, err := g.outbox.Pending(context.Background(), 10_000)
	if err != nil {
		g.t.Fatalf("Pending: %v", err)
	}
	var out []string
	for _, m := range msgs {
		if m.Conv == conv {
			out = append(out, m.Text)
		}
	}
	return out
}

func (g *gateway) history(conv string) []string {
	g.t.Helper()
	h, err := g.store.History(context.Background(), conv)
	if err != nil {
		g.t.Fatalf("History: %v", err)
	}
	return contents(h)
}

func contents(h []chat.Message) []string {
	out := make([]string, 0, len(h))
	for _, m := range h {
		out = append(out, m.Role+": "+m.Content)
	}
	return out
}

func (g *gateway) waitSent(conv, text string) {
	g.t.Helper()
	testkit.Eventually(g.t, fmt.Sprintf("%q sent to %s (sent: %q)", text, conv, g.sent(conv)), func() bool {
		return slices.Contains(g.sent(conv), text)
	})
}

// noLeaks checks, at the end of the test, after every cleanup registered
// later, that the test left no goroutine behind.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// gateRunner is a TurnRunner whose turns the test drives. A turn whose
// text starts with "slow" waits until the test releases it or its context
// ends; others answer at once with "re: TEXT". A released slow turn acts
// as if a tool had run: it takes the steered messages waiting, as the
// agent does after a batch of tool results, unless its text starts with
// "slow-notool", then answers.
type gateRunner struct {
	mu      sync.Mutex
	calls   []*runCall
	running map[string]int // turns in flight by conversation
	overlap bool           // two turns of one conversation ran at once
	arrived chan struct{}  // closed and replaced on every call
	panics  bool           // every Run panics
}

type runCall struct {
	In      sessions.TurnInput
	release chan struct{}
	once    sync.Once
	done    chan struct{} // closed when Run returned
}

func (c *runCall) Release() { c.once.Do(func() { close(c.release) }) }

func newGateRunner() *gateRunner {
	return &gateRunner{running: map[string]int{}, arrived: make(chan struct{})}
}

var _ sessions.TurnRunner = (*gateRunner)(nil)

func (r *gateRunner) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	c := &runCall{In: *in, release: make(chan struct{}), done: make(chan struct{})}
	defer close(c.done)
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.running[in.Conv]++
	if r.running[in.Conv] > 1 {
		r.overlap = true
	}
	close(r.arrived)
	r.arrived = make(chan struct{})
	panics := r.panics
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running[in.Conv]--
		r.mu.Unlock()
	}()
	if panics {
		panic("the runner broke")
	}

	text := in.Entry.Text
	hist := []chat.Message{{Role: "user", Content: text}}
	if strings.HasPrefix(text, "slow") {
		select {
		case <-c.release:
		case <-ctx.Done():
			hist = append(hist, chat.Message{Role: "assistant", Content: "partial: " + text})
			return &sessions.TurnOutput{History: hist, End: sessions.TurnInterrupted}, context.Cause(ctx)
		}
		if !strings.HasPrefix(text, "slow-notool") {
			hist = append(hist,
				chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "probe", Arguments: "{}"}}},
				chat.Message{Role: "tool", ToolCallID: "c1", Name: "probe", Content: "ok"})
			for {
				s, ok := in.Steer.Take()
				if !ok {
					break
				}
				hist = append(hist, chat.Message{Role: "user", Content: s})
			}
		}
	}
	reply := "re: " + text
	hist = append(hist, chat.Message{Role: "assistant", Content: reply})
	return &sessions.TurnOutput{
		History: hist,
		Outbox:  []outbox.Message{{Target: in.Origin, Conv: in.Conv, Text: reply, ReplyTo: in.Entry.MessageID, Kind: "reply"}},
		End:     sessions.TurnDone,
	}, nil
}

// waitCalls waits until n turns started and returns them.
func (r *gateRunner) waitCalls(t *testing.T, n int) []*runCall {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		if len(r.calls) >= n {
			calls := slices.Clone(r.calls)
			r.mu.Unlock()
			return calls
		}
		arrived, got := r.arrived, len(r.calls)
		r.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			t.Fatalf("runner got %d turns, want %d", got, n)
		}
	}
}

func (r *gateRunner) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// texts are the entry texts of the turns run, in order.
func (r *gateRunner) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		out = append(out, c.In.Entry.Text)
	}
	return out
}

// settle gives the worker time to do what it should not: tests that
// check something did not happen wait this long first.
func settle() { time.Sleep(100 * time.Millisecond) }
