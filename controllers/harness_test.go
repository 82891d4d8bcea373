package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// backend is one opened store serving what the controllers use.
type backend interface {
	Sessions() sessions.Store
	Outbox() outbox.Store
	Once() lease.OnceStore
	Controllers() controllers.Store
	Close() error
}

// place opens the same store again, as a restarted gateway would.
type place func(t *testing.T, clk clock.Clock) backend

// eachPlace runs f on each backend, on a fake clock.
func eachPlace(t *testing.T, f func(t *testing.T, open place)) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			var open place
			switch name {
			case "sqlite":
				path := filepath.Join(t.TempDir(), "herald.db")
				open = func(t *testing.T, clk clock.Clock) backend {
					db, err := sqlite.Open(path, sqlite.Options{Clock: clk})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					return db
				}
			case "redis":
				srv := testkit.StartRedis(t)
				open = func(t *testing.T, clk clock.Clock) backend {
					db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix(), Clock: clk})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					return db
				}
			}
			f(t, open)
		})
	}
}

// agent is a scripted agent: it answers each turn with reply(text), and
// holds a turn whose text has a prefix in hold until it is let go.
type agent struct {
	clk   clock.Clock
	reply func(text string) string

	mu      sync.Mutex
	ran     []string // the texts of the turns run, in order
	holds   map[string]chan struct{}
	holding int // turns waiting on their hold now
}

func (a *agent) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	text := in.Entry.Text
	a.mu.Lock()
	a.ran = append(a.ran, text)
	var hold chan struct{}
	for p, ch := range a.holds {
		if strings.HasPrefix(text, p) {
			hold = ch
			delete(a.holds, p)
		}
	}
	a.mu.Unlock()
	if hold != nil {
		a.setHolding(+1)
		select {
		case <-hold:
			a.setHolding(-1)
		case <-ctx.Done():
			a.setHolding(-1)
			return &sessions.TurnOutput{End: sessions.TurnInterrupted}, ctx.Err()
		}
	}
	reply := "ok: " + text
	if a.reply != nil {
		reply = a.reply(text)
	}
	now := a.clk.Now()
	return &sessions.TurnOutput{
		History: []chat.Message{{Role: "user", Content: text, At: now}, {Role: "assistant", Content: reply, At: now}},
		Outbox:  []outbox.Message{{Target: in.Origin, Text: reply, Kind: "reply", ReplyTo: in.Entry.MessageID}},
		End:     sessions.TurnDone,
	}, nil
}

// hold makes the next turn whose text starts with prefix wait until the
// returned func is called.
func (a *agent) hold(prefix string) func() {
	ch := make(chan struct{})
	a.mu.Lock()
	if a.holds == nil {
		a.holds = map[string]chan struct{}{}
	}
	a.holds[prefix] = ch
	a.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

func (a *agent) setHolding(d int) {
	a.mu.Lock()
	a.holding += d
	a.mu.Unlock()
}

func (a *agent) held() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holding > 0
}

func (a *agent) turns() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ran)
}

// judge answers with its script, one answer a call, then with
// continue; an answer "ERROR" is a failed call.
type judge struct {
	mu      sync.Mutex
	answers []string
	calls   []string // the user prompt of each call
}

func (j *judge) say(answers ...string) {
	j.mu.Lock()
	j.answers = append(j.answers, answers...)
	j.mu.Unlock()
}

func (j *judge) ask(_ context.Context, _, user string) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, user)
	a := `{"verdict":"continue"}`
	if len(j.answers) > 0 {
		a, j.answers = j.answers[0], j.answers[1:]
	}
	if a == "ERROR" {
		return "", errors.New("the judge's model is down")
	}
	return a, nil
}

func (j *judge) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.calls)
}

// harness is one gateway's worth of the parts the controllers run in,
// on one store and a fake clock: the router, a turn worker whose runner
// is the controllers' around the scripted agent, and the scheduler,
// ticked by the test.
type harness struct {
	t      *testing.T
	ctx    context.Context
	clk    *clock.Fake
	db     backend
	agent  *agent
	judge  *judge
	router *sessions.Router
	worker *sessions.TurnWorker
	sched  *controllers.Scheduler
	set    controllers.Set
	busy   bool
}

const hconv = "api:goal"

type harnessOpts struct {
	maxTicks int
	ended    func(context.Context, string, controllers.Wait) bool
	busy     sessions.BusyInputMode
	name     string
}

func newHarness(t *testing.T, open place, clk *clock.Fake, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), clk: clk, db: open(t, clk), agent: &agent{clk: clk}, judge: &judge{}}
	st := h.db.Controllers()
	h.set = controllers.Set{
		Goals:      &controllers.Goals{Store: st},
		Loops:      &controllers.Loops{Store: st},
		Heartbeats: &controllers.Heartbeats{Store: st},
	}
	cmds := sessions.DefaultCommands()
	if err := controllers.RegisterCommands(cmds, h.set); err != nil {
		t.Fatal(err)
	}
	runner, err := controllers.NewRunner(controllers.RunnerOptions{
		Agent: h.agent, Store: st, Judge: h.judge.ask, LoopMaxTicks: o.maxTicks, Ended: o.ended, Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.set.Changed = runner.Forget
	name := o.name
	if name == "" {
		name = "gw-1"
	}
	h.worker, err = sessions.NewTurnWorker(sessions.TurnWorkerOptions{
		Store: h.db.Sessions(), Runner: runner, Commands: cmds, Name: name, Turns: 2,
		LeaseTTL: 48 * time.Hour, Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	mode := o.busy
	if mode == "" {
		mode = sessions.BusyQueue
	}
	h.router, err = sessions.NewRouter(sessions.RouterOptions{
		Store: h.db.Sessions(), Outbox: h.db.Outbox(), Commands: cmds, BusyInputMode: mode,
		Turns: h.worker, Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sched, err = controllers.NewScheduler(controllers.SchedulerOptions{
		Store: st, Once: h.db.Once(), Inbox: h.router, Outbox: h.db.Outbox(), Name: name,
		Busy:  func(context.Context, string) bool { return h.busy },
		Ended: o.ended,
		Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.worker.Start(h.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = h.worker.Shutdown(ctx)
}

// say sends text to the conversation as its user.
func (h *harness) say(text string) {
	h.t.Helper()
	in := sessions.Inbound{Conv: hconv, Sender: "u1", Text: text, MessageID: fmt.Sprintf("m%d", time.Now().UnixNano())}
	if err := h.router.Deliver(h.ctx, in); err != nil {
		h.t.Fatalf("Deliver(%q): %v", text, err)
	}
}

// waitRunning waits until a held turn (what) runs in the agent: past
// the worker's lease and the controllers' check of its entry, which a
// command sent next could otherwise overtake.
func (h *harness) waitRunning(what string) {
	h.t.Helper()
	testkit.Eventually(h.t, what+" running", func() bool { return h.worker.Running() == 1 && h.agent.held() })
}

// tick runs the scheduler once.
func (h *harness) tick() { h.sched.Tick(h.ctx) }

// waitTurns waits until nothing is queued or running, and fails unless
// the agent ran n turns by then.
func (h *harness) waitTurns(n int) []string {
	h.t.Helper()
	testkit.Eventually(h.t, fmt.Sprintf("%d turns run", n), func() bool {
		depth, err := h.db.Sessions().QueueDepth(h.ctx, 100)
		return err == nil && depth == 0 && h.worker.Running() == 0
	})
	got := h.agent.turns()
	if len(got) != n {
		h.t.Fatalf("turns run = %d %q, want %d", len(got), got, n)
	}
	return got
}

// settle ticks the scheduler and waits for the turns that brings, until
// the agent has run n turns.
func (h *harness) settle(n int) []string {
	h.t.Helper()
	testkit.Eventually(h.t, fmt.Sprintf("%d turns run", n), func() bool {
		idle := h.worker.Running() == 0
		if len(h.agent.turns()) >= n {
			return idle
		}
		if idle {
			h.tick()
		}
		return false
	})
	got := h.agent.turns()
	if len(got) != n {
		h.t.Fatalf("turns run = %d %q, want %d", len(got), got, n)
	}
	return got
}

// notices are the texts the conversation was told, in order: command
// answers and the controllers' notices.
func (h *harness) notices() []string {
	h.t.Helper()
	ms, err := h.db.Outbox().Pending(h.ctx, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.Kind != "reply" {
			out = append(out, m.Text)
		}
	}
	return out
}

// wantNotice fails unless some notice contains want.
func (h *harness) wantNotice(want string) {
	h.t.Helper()
	testkit.Eventually(h.t, fmt.Sprintf("a notice saying %q", want), func() bool {
		return slices.ContainsFunc(h.notices(), func(s string) bool { return strings.Contains(s, want) })
	})
}

func (h *harness) goal() controllers.Goal {
	h.t.Helper()
	g, _, err := h.set.Goals.Get(h.ctx, hconv)
	if err != nil {
		h.t.Fatalf("the goal: %v", err)
	}
	return g
}
