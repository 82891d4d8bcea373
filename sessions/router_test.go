package sessions_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		desc, text string
		name, args string
		ok         bool
	}{
		{desc: "bare", text: "/stop", name: "stop", ok: true},
		{desc: "with arguments", text: "/queue  look at this  ", name: "queue", args: "look at this", ok: true},
		{desc: "arguments on the next line", text: "/steer\nuse the other file", name: "steer", args: "use the other file", ok: true},
		{desc: "upper case", text: "/STOP", name: "stop", ok: true},
		{desc: "bot mention", text: "/status@herald_bot", name: "status", ok: true},
		{desc: "leading space", text: "  /help", name: "help", ok: true},
		{desc: "plain text", text: "stop please"},
		{desc: "a path", text: "/etc/passwd is odd"},
		{desc: "a lone slash", text: "/"},
		{desc: "slash and space", text: "/ stop"},
		{desc: "a dash inside", text: "/reload-mcp now", name: "reload-mcp", args: "now", ok: true},
		{desc: "a dash first", text: "/-x"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			name, args, ok := sessions.ParseCommand(tc.text)
			if name != tc.name || args != tc.args || ok != tc.ok {
				t.Errorf("ParseCommand(%q) = %q, %q, %v; want %q, %q, %v", tc.text, name, args, ok, tc.name, tc.args, tc.ok)
			}
		})
	}
}

func TestCommandsRegister(t *testing.T) {
	handle := func(context.Context, *sessions.CommandCall) error { return nil }
	run := func(context.Context, *sessions.ControlTurn) error { return nil }
	tests := []struct {
		desc string
		cmd  sessions.Command
		code errs.Code
	}{
		{desc: "replaces a placeholder", cmd: sessions.Command{Name: "agents", Aliases: []string{"tasks", "subagents"}, OutOfBand: true, Handle: handle}},
		{desc: "a new command", cmd: sessions.Command{Name: "model", OutOfBand: true, Handle: handle}},
		{desc: "a name that is an alias", cmd: sessions.Command{Name: "bg", OutOfBand: true, Handle: handle}, code: errs.Conflict},
		{desc: "an alias that is a name", cmd: sessions.Command{Name: "model", Aliases: []string{"stop"}, OutOfBand: true, Handle: handle}, code: errs.Conflict},
		{desc: "a bad name", cmd: sessions.Command{Name: "Model", OutOfBand: true, Handle: handle}, code: errs.Invalid},
		{desc: "out of band without Handle", cmd: sessions.Command{Name: "model", OutOfBand: true}, code: errs.Invalid},
		{desc: "queued without Run", cmd: sessions.Command{Name: "model", Handle: handle}, code: errs.Invalid},
		{desc: "queued with a Handle", cmd: sessions.Command{Name: "model", Handle: handle, Run: run}, code: errs.Invalid},
		{desc: "queued", cmd: sessions.Command{Name: "model", Run: run}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := sessions.DefaultCommands()
			err := c.Register(tc.cmd)
			if got := errs.CodeOf(err); got != tc.code {
				t.Fatalf("Register: %v, want code %q", err, tc.code)
			}
			if err != nil {
				return
			}
			for _, n := range append([]string{tc.cmd.Name}, tc.cmd.Aliases...) {
				if got, ok := c.Lookup(n); !ok || got.Name != tc.cmd.Name {
					t.Errorf("Lookup(%q) = %q, %v; want %q", n, got.Name, ok, tc.cmd.Name)
				}
			}
		})
	}
}

func TestDeliverRefuses(t *testing.T) {
	tests := []struct {
		desc string
		in   sessions.Inbound
	}{
		{desc: "an empty conversation key", in: sessions.Inbound{Text: "hi"}},
		{desc: "an unknown kind", in: sessions.Inbound{Conv: conv, Text: "hi", Kind: "robot"}},
		{desc: "no reply target", in: sessions.Inbound{Conv: "nocolon", Text: "hi"}},
		{desc: "a bad reply target", in: sessions.Inbound{Conv: conv, Text: "hi", Meta: map[string]string{sessions.MetaTarget: "telegram:"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			db := openDB(t, clock.Real{})
			r, err := sessions.NewRouter(sessions.RouterOptions{Store: db.Sessions(), Outbox: db.Outbox(), Logger: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Deliver(context.Background(), tc.in); !errs.Is(err, errs.Invalid) {
				t.Errorf("Deliver: %v, want an Invalid error", err)
			}
		})
	}
}

func TestNewRouterRefuses(t *testing.T) {
	db := openDB(t, clock.Real{})
	tests := []struct {
		desc string
		opts sessions.RouterOptions
	}{
		{desc: "no store", opts: sessions.RouterOptions{Outbox: db.Outbox()}},
		{desc: "no outbox", opts: sessions.RouterOptions{Store: db.Sessions()}},
		{desc: "an unknown mode", opts: sessions.RouterOptions{Store: db.Sessions(), Outbox: db.Outbox(), BusyInputMode: "shout"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := sessions.NewRouter(tc.opts); !errs.Is(err, errs.Invalid) {
				t.Errorf("NewRouter: %v, want an Invalid error", err)
			}
		})
	}
}

func TestReplyTarget(t *testing.T) {
	tests := []struct {
		desc string
		in   sessions.Inbound
		want outbox.Target
	}{
		{desc: "the conversation key", in: sessions.Inbound{Conv: "slack:C1:1700.1"}, want: outbox.Target{Platform: "slack", Chat: "C1", Thread: "1700.1"}},
		{desc: "the adapter's target", in: sessions.Inbound{Conv: "api:abc", Meta: map[string]string{sessions.MetaTarget: "discord:9:7"}}, want: outbox.Target{Platform: "discord", Chat: "9", Thread: "7"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := sessions.ReplyTarget(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReplyTarget (-want +got):\n%s", diff)
			}
		})
	}
}

// An adapter cannot make a message pass for a queued command.
func TestDeliverDropsControlMeta(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r})
	g.deliver(sessions.Inbound{Text: "hi", Meta: map[string]string{sessions.MetaControl: "new", "thread": "7"}})
	g.waitSent(conv, "re: hi")
	got := r.waitCalls(t, 1)[0].In.Entry.Meta
	if diff := cmp.Diff(map[string]string{"thread": "7"}, got); diff != "" {
		t.Errorf("entry meta (-want +got):\n%s", diff)
	}
}

// An unknown /word is a message for the agent.
func TestUnknownCommandIsAMessage(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r})
	g.say("/frobnicate the thing")
	g.waitSent(conv, "re: /frobnicate the thing")
}

// Without a shared signal log, signals still reach this process's turns.
func TestRouterWithoutSignals(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	r := newGateRunner()
	w := startWorker(t, sessions.TurnWorkerOptions{Store: db.Sessions(), Runner: r})
	router, err := sessions.NewRouter(sessions.RouterOptions{Store: db.Sessions(), Outbox: db.Outbox(), Turns: w, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := router.Deliver(ctx, sessions.Inbound{Conv: conv, Text: "slow job"}); err != nil {
		t.Fatal(err)
	}
	call := r.waitCalls(t, 1)[0]
	if err := router.Deliver(ctx, sessions.Inbound{Conv: conv, Text: "/stop"}); err != nil {
		t.Fatal(err)
	}
	<-call.done
	testkit.Eventually(t, "the stop committed", func() bool {
		msgs, err := db.Outbox().Pending(ctx, 10)
		return err == nil && len(msgs) == 2 && msgs[1].Text == "Stopped."
	})
	msgs, _ := db.Outbox().Pending(ctx, 10)
	if !strings.HasPrefix(msgs[0].Text, "Stopping the running turn") || msgs[0].Kind != sessions.KindCommand {
		t.Errorf("first message %q (%s), want the /stop answer", msgs[0].Text, msgs[0].Kind)
	}
}

// A command that is not out-of-band waits for its turn like a message,
// and its Run answers it under the conversation's lease.
func TestQueuedCommand(t *testing.T) {
	tests := []struct {
		desc      string
		mode      sessions.BusyInputMode
		interrupt bool // the running turn is interrupted for it
	}{
		{desc: "queue mode", mode: sessions.BusyQueue},
		{desc: "interrupt mode", mode: sessions.BusyInterrupt, interrupt: true},
		{desc: "steer mode keeps it whole", mode: sessions.BusySteer},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			cmds := sessions.DefaultCommands()
			err := cmds.Register(sessions.Command{
				Name: "note", Args: "TEXT", Summary: "answer at the next turn boundary",
				Run: func(_ context.Context, ct *sessions.ControlTurn) error {
					ct.Reply("noted: " + ct.Args + " (held " + ct.Lease.Conv + ")")
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r, mode: tc.mode, commands: cmds})
			g.say("slow A")
			first := r.waitCalls(t, 1)[0]
			g.say("/note buy milk")
			if tc.interrupt {
				<-first.done
			} else {
				settle()
				if got := g.sent(conv); len(got) != 0 {
					t.Fatalf("sent %q while the turn ran, want nothing yet", got)
				}
				first.Release()
			}
			g.waitSent(conv, "noted: buy milk (held "+conv+")")
			for _, s := range g.signals.Sent() {
				if s.Kind == signals.Steer {
					t.Error("the queued command was steered into the running turn")
				}
			}
			if got := r.count(); got != 1 {
				t.Errorf("%d agent turns ran, want 1: the command is no message for the agent", got)
			}
		})
	}
}

// countingClaims counts the claims a turn worker makes.
type countingClaims struct {
	sessions.Store
	claims *atomic.Int32
}

func (s countingClaims) ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	s.claims.Add(1)
	return s.Store.ClaimMany(ctx, worker, n, ttl)
}

// TestMessageStartsItsTurnInTheAppend checks that a message to an idle
// conversation starts its turn in the router's append, with no claim of
// the worker's, while one that finds its conversation busy, or no turn
// free, waits for a claim as before.
func TestMessageStartsItsTurnInTheAppend(t *testing.T) {
	db := openDB(t, clock.Real{})
	claims := &atomic.Int32{}
	store := countingClaims{Store: db.Sessions(), claims: claims}
	runner := newGateRunner()
	worker := startWorker(t, sessions.TurnWorkerOptions{
		// Two slots: the claim loop holds one while it claims, and the
		// other stays free for the appends.
		Store: store, Runner: runner, Turns: 2,
		// The loop claims once as it starts, then only when woken.
		PollMin: time.Hour, PollMax: time.Hour,
	})
	router, err := sessions.NewRouter(sessions.RouterOptions{
		Store: store, Outbox: db.Outbox(), Turns: worker, BusyInputMode: sessions.BusyQueue, Logger: quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the worker's first claim", func() bool { return claims.Load() == 1 })
	ctx := context.Background()
	deliver := func(conv, text string) {
		t.Helper()
		if err := router.Deliver(ctx, sessions.Inbound{Conv: conv, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	startsWithoutClaim := func(text string, n int) *runCall {
		t.Helper()
		before := claims.Load()
		deliver("api:"+text[len(text)-1:], text)
		call := runner.waitCalls(t, n)[n-1]
		if got := claims.Load(); got != before {
			t.Errorf("%q: the worker claimed %d times more, want none", text, got-before)
		}
		if call.In.Entry.Deliveries != 1 || call.In.Entry.Text != text {
			t.Errorf("the turn ran %+v, want %q, delivered once", call.In.Entry, text)
		}
		return call
	}

	a := startsWithoutClaim("slow a", 1)
	// Its conversation is busy: this one waits, with a slot free.
	deliver("api:a", "four")
	settle()
	if n := runner.count(); n != 1 {
		t.Fatalf("%d turns ran with conversation a busy, want 1", n)
	}
	b := startsWithoutClaim("slow b", 2)
	// No slot is free: this one waits.
	deliver("api:c", "three")
	settle()
	if n := runner.count(); n != 2 {
		t.Fatalf("%d turns ran with both slots taken, want 2", n)
	}
	a.Release()
	b.Release()
	runner.waitCalls(t, 4)
	// The two waiting turns start as the two running ones commit, in
	// either order.
	got := runner.texts()
	slices.Sort(got[2:])
	if d := cmp.Diff([]string{"slow a", "slow b", "four", "three"}, got); d != "" {
		t.Errorf("turns ran (-want +got):\n%s", d)
	}
}
