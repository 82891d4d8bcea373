package sessions_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/signals/signalstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
)

func TestPlainTurnEndToEnd(t *testing.T) {
	noLeaks(t)
	ms := testkit.NewModelServer(t)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: "test-model", Timeout: 10 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, gatewayOptions{runner: &agent.Agent{Client: client, Logger: quietLog()}})

	g.deliver(sessions.Inbound{Text: "hello", Sender: "42", MessageID: "m1"})
	g.waitSent(conv, "echo: hello")

	msgs, err := g.outbox.Pending(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []outbox.Message{{
		Target:  outbox.Target{Platform: "telegram", Chat: "100"},
		Conv:    conv,
		Text:    "echo: hello",
		ReplyTo: "m1",
		Kind:    agent.KindReply,
		// The model server counts words.
		Meta: map[string]string{sessions.ReplyMetaEnd: "done", sessions.ReplyMetaPromptTokens: "2", sessions.ReplyMetaCompletionTokens: "2"},
	}}
	opts := cmpopts.IgnoreFields(outbox.Message{}, "ID", "CreatedAt", "NextAttempt")
	if diff := cmp.Diff(want, msgs, opts); diff != "" {
		t.Errorf("outbox (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"user: hello", "assistant: echo: hello"}, g.history(conv)); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	testkit.Eventually(t, "the finished turn counted", func() bool {
		return g.metrics.get(func(c *counters) int { return c.finished[sessions.TurnDone] }) == 1
	})
}

func TestFIFOPerConversation(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r, worker: sessions.TurnWorkerOptions{Turns: 8}, mode: sessions.BusyQueue})

	const convs, perConv = 40, 6
	var wg sync.WaitGroup
	errc := make(chan error, convs)
	for c := range convs {
		wg.Go(func() {
			for i := range perConv {
				in := sessions.Inbound{Conv: fmt.Sprintf("api:c%d", c), Text: fmt.Sprintf("c%d m%d", c, i), MessageID: fmt.Sprint(i)}
				if err := g.router.Deliver(context.Background(), in); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	r.waitCalls(t, convs*perConv)

	r.mu.Lock()
	overlap := r.overlap
	r.mu.Unlock()
	if overlap {
		t.Error("two turns of one conversation ran at once")
	}
	ran := map[string][]string{}
	for _, c := range r.waitCalls(t, convs*perConv) {
		ran[c.In.Conv] = append(ran[c.In.Conv], c.In.Entry.Text)
	}
	for c := range convs {
		key := fmt.Sprintf("api:c%d", c)
		var want, wantSent []string
		for i := range perConv {
			want = append(want, fmt.Sprintf("c%d m%d", c, i))
			wantSent = append(wantSent, fmt.Sprintf("re: c%d m%d", c, i))
		}
		if diff := cmp.Diff(want, ran[key]); diff != "" {
			t.Errorf("%s ran out of order (-want +got):\n%s", key, diff)
		}
		testkit.Eventually(t, key+" replies", func() bool { return len(g.sent(key)) == perConv })
		if diff := cmp.Diff(wantSent, g.sent(key)); diff != "" {
			t.Errorf("%s replies (-want +got):\n%s", key, diff)
		}
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		desc     string
		slow     bool
		wantSent []string
		wantHist []string
	}{
		{
			desc:     "a running turn is cancelled and what it did is kept",
			slow:     true,
			wantSent: []string{"Stopping the running turn", "Stopped."},
			wantHist: []string{"user: slow job", "assistant: partial: slow job"},
		},
		{
			desc:     "nothing running",
			wantSent: []string{"re: quick job", "Nothing is running."},
			wantHist: []string{"user: quick job", "assistant: re: quick job"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r})
			if tc.slow {
				g.say("slow job")
			} else {
				g.say("quick job")
				g.waitSent(conv, "re: quick job")
			}
			calls := r.waitCalls(t, 1)

			g.say("/stop")
			// Deliver itself answered: the answer does not wait for the turn.
			sent := g.sent(conv)
			idx := len(tc.wantSent) - 1
			if tc.slow {
				idx = 0
			}
			if len(sent) <= idx || !strings.HasPrefix(sent[idx], tc.wantSent[idx]) {
				t.Fatalf("right after /stop, sent %q, want %q at %d", sent, tc.wantSent[idx], idx)
			}
			<-calls[0].done
			testkit.Eventually(t, "the stop committed", func() bool { return len(g.sent(conv)) == len(tc.wantSent) })
			sent = g.sent(conv)
			for i, want := range tc.wantSent {
				if !strings.HasPrefix(sent[i], want) {
					t.Errorf("sent[%d] = %q, want it to start with %q", i, sent[i], want)
				}
			}
			if diff := cmp.Diff(tc.wantHist, g.history(conv)); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}

			// The stopped entry was acked: the next message runs next.
			g.say("after")
			g.waitSent(conv, "re: after")
			if diff := cmp.Diff([]string{calls[0].In.Entry.Text, "after"}, r.texts()); diff != "" {
				t.Errorf("turns run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCommandsAnswerWhileATurnRuns(t *testing.T) {
	tests := []struct {
		desc string
		text string
		meta map[string]string
		want []string // parts of the answer
	}{
		{desc: "status", text: "/status", want: []string{"Running a turn (", "): “slow job”.", "Busy input mode: interrupt"}},
		{desc: "status with the conversation's mode", text: "/status", meta: map[string]string{sessions.ConvMetaBusyInputMode: "steer"}, want: []string{"Running a turn", "Busy input mode: steer"}},
		{desc: "status with a bot mention", text: "/STATUS@herald_bot", want: []string{"Running a turn"}},
		{desc: "help", text: "/help", want: []string{"/stop — stop the running turn", "/queue MESSAGE — ", "/agents (/tasks) — ", "/background PROMPT (/bg) — "}},
		{desc: "a later command", text: "/tasks", want: []string{"/agents is not available yet"}},
		{desc: "a later command by alias", text: "/bg index the repo", want: []string{"/background is not available yet"}},
		{desc: "queue without a message", text: "/queue", want: []string{"Usage: /queue MESSAGE"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r})
			for k, v := range tc.meta {
				if err := g.store.SetMeta(context.Background(), conv, k, v); err != nil {
					t.Fatal(err)
				}
			}
			g.say("slow job")
			calls := r.waitCalls(t, 1)

			g.say(tc.text)
			sent := g.sent(conv)
			if len(sent) != 1 {
				t.Fatalf("right after %s, sent %q, want one answer", tc.text, sent)
			}
			for _, part := range tc.want {
				if !strings.Contains(sent[0], part) {
					t.Errorf("answer %q lacks %q", sent[0], part)
				}
			}
			select {
			case <-calls[0].done:
				t.Errorf("%s ended the running turn", tc.text)
			default:
			}
			calls[0].Release()
			g.waitSent(conv, "re: slow job")
			settle()
			if got := r.count(); got != 1 {
				t.Errorf("%d turns ran, want only the slow one: the command is no message for the agent", got)
			}
		})
	}
}

func TestStatusWhenIdle(t *testing.T) {
	noLeaks(t)
	g := startGateway(t, gatewayOptions{runner: newGateRunner(), mode: sessions.BusyQueue})
	g.say("/status")
	want := []string{"Idle: no turn is running.\nBusy input mode: queue — a new message waits until the running turn ends."}
	if diff := cmp.Diff(want, g.sent(conv)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
}

// A redelivered /stop or /new was answered, and its stop sent, the first
// time: it stops no turn that started since.
func TestRedeliveredStopTouchesNoNewerTurn(t *testing.T) {
	tests := []struct {
		command string
		answer  string
	}{
		{command: "/stop", answer: "Nothing is running."},
		{command: "/new", answer: freshSession},
	}
	for _, tc := range tests {
		t.Run(tc.command, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r})
			g.say(tc.command)
			g.waitSent(conv, tc.answer)
			g.say("slow job")
			calls := r.waitCalls(t, 1)

			g.say(tc.command) // the same message id: a redelivery
			settle()
			select {
			case <-calls[0].done:
				t.Fatalf("the redelivered %s stopped the turn that started after it (sent %q)", tc.command, g.sent(conv))
			default:
			}
			calls[0].Release()
			g.waitSent(conv, "re: slow job")
			if got := g.history(conv); !slices.Contains(got, "assistant: re: slow job") {
				t.Errorf("history %q: want the turn's reply kept", got)
			}
			if sent := g.sent(conv); slices.Contains(sent, "Stopped.") || len(sent) != 2 {
				t.Errorf("sent %q: want the first answer and the turn's reply only", sent)
			}
		})
	}
}

// freshSession is /new's answer.
const freshSession = "Started a fresh session. What I remember about you is kept."

func TestNewClearsHistory(t *testing.T) {
	const fresh = freshSession
	tests := []struct {
		desc  string
		first string
	}{
		{desc: "idle", first: "first"},
		{desc: "while a turn runs", first: "slow first"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r, mode: sessions.BusyQueue})
			g.say(tc.first)
			calls := r.waitCalls(t, 1)
			if !strings.HasPrefix(tc.first, "slow") {
				g.waitSent(conv, "re: "+tc.first)
			}

			g.say("/new")
			g.waitSent(conv, fresh)
			<-calls[0].done
			if got := g.history(conv); len(got) != 0 {
				t.Errorf("history after /new = %q, want none", got)
			}
			if slices.Contains(g.sent(conv), "Stopped.") {
				t.Error(`/new's stop said "Stopped." as well as starting afresh`)
			}

			g.say("second")
			g.waitSent(conv, "re: second")
			calls = r.waitCalls(t, 2)
			if h := calls[1].In.History; len(h) != 0 {
				t.Errorf("the turn after /new saw history %q", contents(h))
			}
		})
	}
}

func TestBusyInputModes(t *testing.T) {
	tests := []struct {
		desc       string
		mode       sessions.BusyInputMode // the router's default
		meta       string                 // the conversation's mode
		text       string                 // sent while "slow A" runs
		wantTurns  []string
		wantSent   []string
		wantSecond []string // the history the second turn saw; nil when there is none
		wantHist   []string
	}{
		{
			desc:       "interrupt by default",
			text:       "B",
			wantTurns:  []string{"slow A", "B"},
			wantSent:   []string{"re: B"},
			wantSecond: []string{"user: slow A", "assistant: partial: slow A"},
			wantHist:   []string{"user: slow A", "assistant: partial: slow A", "user: B", "assistant: re: B"},
		},
		{
			desc:       "interrupt set on the conversation",
			mode:       sessions.BusyQueue,
			meta:       "interrupt",
			text:       "B",
			wantTurns:  []string{"slow A", "B"},
			wantSent:   []string{"re: B"},
			wantSecond: []string{"user: slow A", "assistant: partial: slow A"},
			wantHist:   []string{"user: slow A", "assistant: partial: slow A", "user: B", "assistant: re: B"},
		},
		{
			desc:       "queue set on the conversation",
			meta:       "queue",
			text:       "B",
			wantTurns:  []string{"slow A", "B"},
			wantSent:   []string{"re: slow A", "re: B"},
			wantSecond: []string{"user: slow A", "assistant: ", "tool: ok", "assistant: re: slow A"},
		},
		{
			desc:       "/queue in interrupt mode",
			text:       "/queue B",
			wantTurns:  []string{"slow A", "B"},
			wantSent:   []string{"re: slow A", "re: B"},
			wantSecond: []string{"user: slow A", "assistant: ", "tool: ok", "assistant: re: slow A"},
		},
		{
			desc:      "steer set on the conversation",
			meta:      "steer",
			text:      "B",
			wantTurns: []string{"slow A"},
			wantSent:  []string{"re: slow A"},
			wantHist:  []string{"user: slow A", "assistant: ", "tool: ok", "user: B", "assistant: re: slow A"},
		},
		{
			desc:      "/steer in queue mode",
			mode:      sessions.BusyQueue,
			text:      "/steer B",
			wantTurns: []string{"slow A"},
			wantSent:  []string{"re: slow A"},
			wantHist:  []string{"user: slow A", "assistant: ", "tool: ok", "user: B", "assistant: re: slow A"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r, mode: tc.mode})
			if tc.meta != "" {
				if err := g.store.SetMeta(context.Background(), conv, sessions.ConvMetaBusyInputMode, tc.meta); err != nil {
					t.Fatal(err)
				}
			}
			g.say("slow A")
			first := r.waitCalls(t, 1)[0]

			g.say(tc.text)
			steered := strings.Contains(tc.desc, "steer")
			switch {
			case len(tc.wantTurns) > 1 && tc.wantSent[0] == "re: B": // interrupted
				<-first.done
			case steered:
				testkit.Eventually(t, "the steer reaching the turn", func() bool { return first.In.Steer.Len() == 1 })
				first.Release()
			default: // queued: the first turn runs on
				settle()
				if got := r.count(); got != 1 {
					t.Fatalf("%d turns started while the first ran, want 1", got)
				}
				first.Release()
			}
			testkit.Eventually(t, "every reply", func() bool { return len(g.sent(conv)) >= len(tc.wantSent) })
			settle()
			if diff := cmp.Diff(tc.wantTurns, r.texts()); diff != "" {
				t.Errorf("turns run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSent, g.sent(conv)); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
			if tc.wantSecond != nil {
				if diff := cmp.Diff(tc.wantSecond, contents(r.waitCalls(t, 2)[1].In.History)); diff != "" {
					t.Errorf("history the second turn saw (-want +got):\n%s", diff)
				}
			}
			if tc.wantHist != nil {
				if diff := cmp.Diff(tc.wantHist, g.history(conv)); diff != "" {
					t.Errorf("history (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// A steered message the turn never takes (it ends without another tool
// result) is not lost: it runs as a turn of its own.
func TestSteerNotTakenRunsOnItsOwn(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r, mode: sessions.BusySteer})
	g.say("slow-notool A")
	first := r.waitCalls(t, 1)[0]
	g.say("B")
	testkit.Eventually(t, "the steer reaching the turn", func() bool { return first.In.Steer.Len() == 1 })
	first.Release()
	g.waitSent(conv, "re: B")
	if diff := cmp.Diff([]string{"slow-notool A", "B"}, r.texts()); diff != "" {
		t.Errorf("turns run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"re: slow-notool A", "re: B"}, g.sent(conv)); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}

// The real agent takes a steered message after its next tool result, and
// the model sees it there.
func TestSteerReachesTheAgent(t *testing.T) {
	noLeaks(t)
	ms := testkit.NewModelServer(t)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: "test-model", Timeout: 10 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	gate := testkit.NewGate()
	ms.Script(
		testkit.CallTools(testkit.ToolCall("probe", `{}`)).Until(gate),
		testkit.Reply("done, with B in mind"),
	)
	g := startGateway(t, gatewayOptions{runner: &agent.Agent{Client: client, Logger: quietLog()}, mode: sessions.BusySteer})
	g.say("A")
	testkit.Eventually(t, "the model call waiting", func() bool { return gate.Waiting() == 1 })
	g.say("B")
	testkit.Eventually(t, "the steer signal sent", func() bool { return len(g.signals.Sent()) == 1 })
	// The tailer hands the signal to the turn on its next read.
	time.Sleep(60 * time.Millisecond)
	gate.Release()
	g.waitSent(conv, "done, with B in mind")

	reqs := ms.WaitRequests(2)
	last := reqs[1].Messages
	if n := len(last); n < 2 || last[n-2].Role != "tool" || last[n-1].Role != "user" || last[n-1].Content != "B" {
		t.Errorf("the second model call did not end with the tool result, then B: %+v", last)
	}
	settle()
	if got := ms.Count(); got != 2 {
		t.Errorf("the model was called %d times, want 2: the steered entry must not run again", got)
	}
}

func TestSignalsForOtherTurnsAreIgnored(t *testing.T) {
	tests := []struct {
		desc   string
		signal func(entryID string) signals.Signal
		stops  bool
	}{
		{desc: "a stop sent before the turn started", signal: func(string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: signals.Stop, At: t0}
		}},
		{desc: "an interrupt about the turn's own entry", signal: func(id string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: signals.Interrupt, EntryID: id, At: time.Now().Add(time.Second)}
		}},
		{desc: "a stop for another conversation", signal: func(string) signals.Signal {
			return signals.Signal{Conv: "telegram:999", Kind: signals.Stop, At: time.Now().Add(time.Second)}
		}},
		{desc: "a domain's stop for a sub-agent of the conversation", signal: func(string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: "delegation.stop", Target: "sub-1", At: time.Now().Add(time.Second)}
		}},
		{desc: "a domain's stop from this process", signal: func(string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: "delegation.stop", Target: "sub-1"}
		}},
		{desc: "a stop sent while the turn runs", stops: true, signal: func(string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: signals.Stop, At: time.Now().Add(time.Second)}
		}},
		{desc: "a stop from this process", stops: true, signal: func(string) signals.Signal {
			return signals.Signal{Conv: conv, Kind: signals.Stop}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r})
			g.say("slow job")
			call := r.waitCalls(t, 1)[0]
			g.worker.HandleSignal(tc.signal(call.In.Entry.ID))
			if tc.stops {
				<-call.done
				return
			}
			settle()
			select {
			case <-call.done:
				t.Fatal("the signal ended the turn")
			default:
			}
			call.Release()
			g.waitSent(conv, "re: slow job")
		})
	}
}

func TestLeaseLostCommitsNothing(t *testing.T) {
	tests := []struct {
		desc string
		ttl  time.Duration
		// foundAtRenewal: the lease is so short it is renewed during the
		// test, and the failed renewal cancels the turn; else the turn
		// finds out when it commits.
		foundAtRenewal bool
	}{
		{desc: "found at commit", ttl: 30 * time.Second},
		{desc: "found at renewal", ttl: 300 * time.Millisecond, foundAtRenewal: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			clk := clock.NewFake(t0)
			r := newGateRunner()
			// One slot: the worker cannot claim the expired conversation
			// back itself while its turn runs.
			g := startGateway(t, gatewayOptions{clock: clk, runner: r, worker: sessions.TurnWorkerOptions{Turns: 1, LeaseTTL: tc.ttl}})
			g.say("slow job")
			call := r.waitCalls(t, 1)[0]

			ctx := context.Background()
			var stolen *sessions.Turn
			for stolen == nil {
				clk.Advance(tc.ttl + time.Second)
				var err error
				if stolen, err = g.store.Claim(ctx, "thief", time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			if stolen.Entry.Deliveries != 2 {
				t.Errorf("the taken-over entry has Deliveries %d, want 2", stolen.Entry.Deliveries)
			}
			if !tc.foundAtRenewal {
				call.Release()
			}
			<-call.done
			testkit.Eventually(t, "the lost lease counted", func() bool { return g.metrics.get(func(c *counters) int { return c.lost }) == 1 })
			settle()
			if got := g.sent(conv); len(got) != 0 {
				t.Errorf("the turn that lost its lease sent %q", got)
			}
			if got := g.history(conv); len(got) != 0 {
				t.Errorf("the turn that lost its lease wrote history %q", got)
			}
			// The new holder commits as usual.
			err := g.store.Finish(ctx, stolen.Lease, sessions.Finish{
				EntryID: stolen.Entry.ID, History: []chat.Message{{Role: "assistant", Content: "thief"}}, Release: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"assistant: thief"}, g.history(conv)); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShutdown(t *testing.T) {
	tests := []struct {
		desc      string
		grace     time.Duration
		release   bool // the turn ends within the grace period
		wantSent  []string
		wantRerun bool
	}{
		{desc: "a turn ending within the grace period commits", grace: 5 * time.Second, release: true, wantSent: []string{"re: slow job"}},
		{desc: "a turn past the grace period is handed back", grace: 50 * time.Millisecond, wantRerun: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			db := openDB(t, clock.Real{})
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{db: db, runner: r, worker: sessions.TurnWorkerOptions{Grace: tc.grace}})
			g.say("slow job")
			call := r.waitCalls(t, 1)[0]
			if tc.release {
				time.AfterFunc(50*time.Millisecond, call.Release)
			}
			start := time.Now()
			if err := g.shutdown(10 * time.Second); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			if took := time.Since(start); !tc.release && took < tc.grace {
				t.Errorf("Shutdown returned after %s, before the grace period of %s", took, tc.grace)
			}
			select {
			case <-call.done:
			default:
				t.Fatal("Shutdown returned while the turn still ran")
			}
			if diff := cmp.Diff(tc.wantSent, g.sent(conv)); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
			if !tc.wantRerun {
				return
			}
			if got := g.history(conv); len(got) != 0 {
				t.Errorf("the handed-back turn wrote history %q", got)
			}
			// A new process runs the entry again, at once: the lease was
			// released, not left to expire.
			r2 := newGateRunner()
			g2 := startGateway(t, gatewayOptions{db: db, runner: r2})
			call2 := r2.waitCalls(t, 1)[0]
			if call2.In.Entry.Deliveries != 2 {
				t.Errorf("re-run entry has Deliveries %d, want 2", call2.In.Entry.Deliveries)
			}
			call2.Release()
			g2.waitSent(conv, "re: slow job")
			if got := g2.metrics.get(func(c *counters) int { return c.takeover }); got != 1 {
				t.Errorf("takeovers = %d, want 1", got)
			}
		})
	}
}

func TestDuplicateDeliverMakesOneTurn(t *testing.T) {
	tests := []struct {
		desc  string
		text  string
		want  func(sent []string) bool
		turns int
	}{
		{desc: "a message", text: "hi", want: func(sent []string) bool { return cmp.Equal(sent, []string{"re: hi"}) }, turns: 1},
		{desc: "a command", text: "/help", want: func(sent []string) bool { return len(sent) == 1 && strings.HasPrefix(sent[0], "Commands:") }},
		{desc: "a command that routes a message", text: "/queue hi", want: func(sent []string) bool { return cmp.Equal(sent, []string{"re: hi"}) }, turns: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			noLeaks(t)
			r := newGateRunner()
			g := startGateway(t, gatewayOptions{runner: r})
			in := sessions.Inbound{Conv: conv, Text: tc.text, MessageID: "m1"}
			var wg sync.WaitGroup
			var dups atomic.Int32
			for range 3 {
				wg.Go(func() {
					dup, err := g.router.DeliverReport(context.Background(), in)
					if err != nil {
						t.Error(err)
					}
					if dup {
						dups.Add(1)
					}
				})
			}
			wg.Wait()
			testkit.Eventually(t, "an answer", func() bool { return len(g.sent(conv)) > 0 })
			settle()
			if sent := g.sent(conv); !tc.want(sent) {
				t.Errorf("sent %q", sent)
			}
			if got := r.count(); got != tc.turns {
				t.Errorf("%d turns ran, want %d", got, tc.turns)
			}
			// The first delivery is the message; the others say they
			// were redeliveries, which the local API answers from the
			// timeline.
			if got := dups.Load(); got != 2 {
				t.Errorf("%d of 3 deliveries reported a duplicate, want 2", got)
			}
		})
	}
}

func TestSyntheticEntriesWaitBehindUserEntries(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r})
	g.say("slow A")
	first := r.waitCalls(t, 1)[0]

	// A synthetic entry never touches the running turn, whatever the mode.
	g.deliver(sessions.Inbound{Kind: sessions.KindSynthetic, Text: "S (a sub-agent finished)"})
	settle()
	select {
	case <-first.done:
		t.Fatal("a synthetic entry interrupted the running turn")
	default:
	}
	g.say("/queue U")
	first.Release()
	r.waitCalls(t, 3)
	if diff := cmp.Diff([]string{"slow A", "U", "S (a sub-agent finished)"}, r.texts()); diff != "" {
		t.Errorf("turns run (-want +got):\n%s", diff)
	}
}

func TestEntryThatKeepsFailingIsDropped(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	r.panics = true
	g := startGateway(t, gatewayOptions{runner: r, worker: sessions.TurnWorkerOptions{MaxDeliveries: 2, RetryDelay: 10 * time.Millisecond}})
	g.say("boom")
	g.waitSent(conv, "I could not answer this message: it failed 2 times, so I dropped it.")
	if got := r.count(); got != 2 {
		t.Errorf("the runner ran %d times, want 2", got)
	}
	// The count follows the commit.
	testkit.Eventually(t, "two runner failures and a drop counted", func() bool {
		return g.metrics.get(func(c *counters) int { return c.failed["runner"]*10 + c.failed["dropped"] }) == 21
	})
	// The conversation goes on.
	r.mu.Lock()
	r.panics = false
	r.mu.Unlock()
	g.say("next")
	g.waitSent(conv, "re: next")
}

// flakyStore fails the first History reads, as an unreachable store does.
// Its claims bring no history, as a backend's that could not read it with
// the claim, so the worker reads it itself.
type flakyStore struct {
	sessions.Store
	mu       sync.Mutex
	failures int
}

func (s *flakyStore) Claim(ctx context.Context, worker string, ttl time.Duration) (*sessions.Turn, error) {
	return withoutHistory(s.Store.Claim(ctx, worker, ttl))
}

func (s *flakyStore) ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	turns, err := s.Store.ClaimMany(ctx, worker, n, ttl)
	for _, turn := range turns {
		_, _ = withoutHistory(turn, nil)
	}
	return turns, err
}

func (s *flakyStore) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	return withoutHistory(s.Store.FinishAndClaim(ctx, l, f, worker, ttl))
}

func withoutHistory(turn *sessions.Turn, err error) (*sessions.Turn, error) {
	if turn != nil {
		turn.History, turn.HistoryRead = nil, false
	}
	return turn, err
}

func (s *flakyStore) History(ctx context.Context, conv string) ([]chat.Message, error) {
	s.mu.Lock()
	fail := s.failures > 0
	s.failures--
	s.mu.Unlock()
	if fail {
		return nil, errs.E("flakyStore.History", errs.Unavailable, "the disk went away")
	}
	return s.Store.History(ctx, conv)
}

func TestFailedHistoryReadRetriesTheEntry(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	store := &flakyStore{Store: db.Sessions(), failures: 1}
	r := newGateRunner()
	m := &counters{}
	startWorker(t, sessions.TurnWorkerOptions{
		Store: store, Runner: r, RetryDelay: 10 * time.Millisecond, PollMax: 10 * time.Millisecond,
		Metrics: m.hooks(),
	})
	ctx := context.Background()
	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	call := r.waitCalls(t, 1)[0]
	if call.In.Entry.Deliveries != 2 {
		t.Errorf("the entry ran at delivery %d, want 2", call.In.Entry.Deliveries)
	}
	got := m.get(func(c *counters) int { return c.failed["history"]*10 + c.takeover })
	if got != 11 {
		t.Errorf("failed history*10+takeovers = %d, want 11", got)
	}
}

// historyCounter counts History reads.
type historyCounter struct {
	sessions.Store
	reads atomic.Int32
}

func (s *historyCounter) History(ctx context.Context, conv string) ([]chat.Message, error) {
	s.reads.Add(1)
	return s.Store.History(ctx, conv)
}

func TestClaimedHistoryIsReadOnce(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	store := &historyCounter{Store: db.Sessions()}
	r := newGateRunner()
	startWorker(t, sessions.TurnWorkerOptions{Store: store, Runner: r, PollMax: 10 * time.Millisecond})
	ctx := context.Background()
	for i, text := range []string{"one", "two"} {
		if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: text}); err != nil {
			t.Fatal(err)
		}
		r.waitCalls(t, i+1)
		testkit.Eventually(t, "the turn committed", func() bool { return len(historyTexts(t, db.Sessions())) == 2*(i+1) })
	}
	got := r.waitCalls(t, 2)[1].In.History
	if d := cmp.Diff([]string{"user: one", "assistant: re: one"}, contents(got)); d != "" {
		t.Errorf("the second turn's history (-want +got):\n%s", d)
	}
	if n := store.reads.Load(); n != 0 {
		t.Errorf("the worker read the history %d times; the claims brought it", n)
	}
}

func historyTexts(t *testing.T, s sessions.Store) []string {
	t.Helper()
	h, err := s.History(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	return contents(h)
}

// metaCounter counts SetMeta writes.
type metaCounter struct {
	sessions.Store
	writes atomic.Int32
}

func (s *metaCounter) SetMeta(ctx context.Context, conv, key, value string) error {
	s.writes.Add(1)
	return s.Store.SetMeta(ctx, conv, key, value)
}

// A running turn is told to other processes by its lease alone: the
// store's Meta makes the mark from it, from the claim on, and the worker
// writes no metadata for it.
func TestRunningTurnIsToldByItsLease(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	store := &metaCounter{Store: db.Sessions()}
	r := newGateRunner()
	w := startWorker(t, sessions.TurnWorkerOptions{Store: store, Runner: r, PollMax: 10 * time.Millisecond})
	ctx := context.Background()
	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: "slow one"}); err != nil {
		t.Fatal(err)
	}
	call := r.waitCalls(t, 1)[0]
	mark := func() string {
		m, err := db.Sessions().Meta(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		return m[sessions.ConvMetaTurn]
	}
	if m := mark(); !strings.Contains(m, `"text":"slow one"`) {
		t.Errorf("mark while the turn runs = %q, want the running entry's text", m)
	}
	call.Release()
	testkit.Eventually(t, "the turn ended", func() bool { return len(historyTexts(t, db.Sessions())) > 0 && w.Running() == 0 })
	if m := mark(); m != "" {
		t.Errorf("mark after the commit = %s, want none", m)
	}
	if n := store.writes.Load(); n != 0 {
		t.Errorf("SetMeta was called %d times, want none", n)
	}
}

func TestStartAndShutdownOrder(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	ctx := context.Background()
	newWorker := func() *sessions.TurnWorker {
		w, err := sessions.NewTurnWorker(sessions.TurnWorkerOptions{Store: db.Sessions(), Runner: newGateRunner(), Logger: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := newWorker()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); !errs.Is(err, errs.Conflict) {
		t.Errorf("second Start: %v, want a Conflict error", err)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	w = newWorker()
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
	if err := w.Start(ctx); !errs.Is(err, errs.Closed) {
		t.Errorf("Start after Shutdown: %v, want a Closed error", err)
	}
	if _, err := sessions.NewTurnWorker(sessions.TurnWorkerOptions{Store: db.Sessions()}); !errs.Is(err, errs.Invalid) {
		t.Errorf("NewTurnWorker without a runner: %v, want an Invalid error", err)
	}
}

// finishRecorder records every FinishAndClaim as
// "conv:any->claimed" or "conv:left->claimed", left when the commit asked
// to claim only its own conversation's leftovers (Finish.ClaimIfLeft),
// claimed empty when it claimed nothing.
type finishRecorder struct {
	sessions.Store
	mu    sync.Mutex
	calls []string
}

func (s *finishRecorder) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	turn, err := s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
	mode, claimed := "any", ""
	if f.ClaimIfLeft {
		mode = "left"
	}
	if turn != nil {
		claimed = turn.Lease.Conv
	}
	s.mu.Lock()
	s.calls = append(s.calls, l.Conv+":"+mode+"->"+claimed)
	s.mu.Unlock()
	return turn, err
}

// recorded reports whether n commits are recorded since the last take.
func (s *finishRecorder) recorded(n int) func() bool {
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.calls) == n
	}
}

func (s *finishRecorder) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

func TestCommitsLookForOtherTurnsOnlyWhenSomeMayWait(t *testing.T) {
	noLeaks(t)
	rec := &finishRecorder{}
	r := newGateRunner()
	// One slot, and a claim loop that, once it found nothing, claims
	// again only when woken.
	g := startGateway(t, gatewayOptions{
		runner: r,
		worker: sessions.TurnWorkerOptions{Turns: 1, PollMin: time.Hour, PollMax: time.Hour},
		wrap: func(s sessions.Store) sessions.Store {
			rec.Store = s
			return rec
		},
	})
	g.say("one")
	g.waitSent(conv, "re: one")
	testkit.Eventually(t, "the first commit", rec.recorded(1))
	settle() // the claim loop's first claim is over too
	rec.take()

	// Nothing waits: the commit of a turn the router started does not
	// look for other conversations.
	g.say("two")
	g.waitSent(conv, "re: two")
	// The reply is handed to the delivery worker inside the commit, so it
	// can be sent before the recorder sees the commit return.
	testkit.Eventually(t, "the commit", rec.recorded(1))
	if d := cmp.Diff([]string{conv + ":left->"}, rec.take()); d != "" {
		t.Errorf("commits with nothing waiting (-want +got):\n%s", d)
	}

	// A message the router queued because the one slot was taken wakes
	// the worker: the commit that frees the slot claims it, and the
	// commit of that turn looks once more and finds nothing.
	const other = "api:other"
	g.say("slow one")
	call := r.waitCalls(t, 3)[2]
	g.deliver(sessions.Inbound{Conv: other, Text: "hello", Sender: "42", MessageID: "o-1"})
	call.Release()
	g.waitSent(other, "re: hello")
	testkit.Eventually(t, "both commits", rec.recorded(2))
	if d := cmp.Diff([]string{conv + ":any->" + other, other + ":any->"}, rec.take()); d != "" {
		t.Errorf("commits with a message waiting (-want +got):\n%s", d)
	}
}

// A turn in another process is told of a new message: the append says a
// live lease held the conversation, and which turn runs under it.
func TestBusyInputReachesATurnInAnotherProcess(t *testing.T) {
	for _, mode := range []sessions.BusyInputMode{sessions.BusyInterrupt, sessions.BusySteer} {
		t.Run(string(mode), func(t *testing.T) {
			noLeaks(t)
			db := openDB(t, clock.Real{})
			signals := signalstest.NewLog(clock.Real{})
			r := newGateRunner()
			opts := gatewayOptions{db: db, signals: signals, runner: r, mode: mode}
			a, b := startGateway(t, opts), startGateway(t, opts)
			a.say("slow A")
			first := r.waitCalls(t, 1)[0]
			b.say("B")
			if mode == sessions.BusySteer {
				testkit.Eventually(t, "the steer reaching the turn in the other process", func() bool { return first.In.Steer.Len() == 1 })
				first.Release()
				testkit.Eventually(t, "the reply", func() bool { return len(a.sent(conv)) == 1 })
				settle()
				if d := cmp.Diff([]string{"re: slow A"}, a.sent(conv)); d != "" {
					t.Errorf("sent (-want +got):\n%s", d)
				}
				return
			}
			select {
			case <-first.done:
			case <-time.After(5 * time.Second):
				first.Release()
				t.Fatal("the turn in the other process was not interrupted")
			}
			testkit.Eventually(t, "the reply", func() bool { return len(a.sent(conv)) == 1 })
			settle()
			if d := cmp.Diff([]string{"re: B"}, a.sent(conv)); d != "" {
				t.Errorf("sent (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"slow A", "B"}, r.texts()); d != "" {
				t.Errorf("turns run (-want +got):\n%s", d)
			}
		})
	}
}

// A lease in another process with no entry handed out (its holder
// committed and kept it) tells no running turn, but the append says a
// live lease held the conversation: the message still signals whatever
// turn the holder runs next.
func TestBusyInputReachesALeaseBetweenEntries(t *testing.T) {
	noLeaks(t)
	db := openDB(t, clock.Real{})
	g := startGateway(t, gatewayOptions{db: db, runner: newGateRunner(), mode: sessions.BusyInterrupt})
	ctx := context.Background()
	in := sessions.Inbound{Conv: conv, Text: "elsewhere", Sender: "42", MessageID: "m-0"}
	_, turn, err := db.Sessions().AppendClaim(ctx, in, "another-process", time.Hour)
	if err != nil || turn == nil {
		t.Fatalf("AppendClaim for another process = %v, %v; want its turn", turn, err)
	}
	if err := db.Sessions().Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}); err != nil {
		t.Fatalf("Finish keeping the lease: %v", err)
	}
	if m, err := db.Sessions().Meta(ctx, conv); err != nil || m[sessions.ConvMetaTurn] != "" {
		t.Fatalf("Meta between entries = %v, %v; want no running turn", m, err)
	}
	g.say("B")
	testkit.Eventually(t, "the signal", func() bool { return len(g.signals.Sent()) > 0 })
	if got := g.signals.Sent(); len(got) != 1 || got[0].Kind != signals.Interrupt || got[0].Conv != conv {
		t.Errorf("signals = %+v, want one interrupt of %s", got, conv)
	}
}

// A message queued where no lease holds the conversation tells no one:
// no turn of it runs anywhere.
func TestQueuedMessageWithoutALeaseSignalsNothing(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	// One slot, taken by another conversation's turn, so the message to
	// conv is queued rather than started.
	g := startGateway(t, gatewayOptions{runner: r, worker: sessions.TurnWorkerOptions{Turns: 1}})
	g.deliver(sessions.Inbound{Conv: "api:other", Text: "slow other", Sender: "42", MessageID: "o-1"})
	busy := r.waitCalls(t, 1)[0]
	g.say("queued")
	settle()
	if got := g.signals.Sent(); len(got) != 0 {
		t.Errorf("signals after a message to a conversation no lease holds = %+v, want none", got)
	}
	busy.Release()
	g.waitSent(conv, "re: queued")
}

func TestSyntheticEntryOfAnEarlierSessionIsShownNotRun(t *testing.T) {
	noLeaks(t)
	r := newGateRunner()
	g := startGateway(t, gatewayOptions{runner: r})
	if err := g.store.SetMeta(context.Background(), conv, sessions.ConvMetaSession, "s-new"); err != nil {
		t.Fatal(err)
	}
	g.deliver(sessions.Inbound{Kind: sessions.KindSynthetic, MessageID: "cmp_1", Text: "old results",
		Meta: map[string]string{sessions.MetaSession: "s-old"}})
	g.waitSent(conv, "This arrived for a session that was started anew since, so it was not acted on:\n\nold results")
	g.deliver(sessions.Inbound{Kind: sessions.KindSynthetic, MessageID: "cmp_2", Text: "new results",
		Meta: map[string]string{sessions.MetaSession: "s-new"}})
	r.waitCalls(t, 1)[0].Release()
	if diff := cmp.Diff([]string{"new results"}, r.texts()); diff != "" {
		t.Errorf("turns run (-want +got):\n%s", diff)
	}
	if h := g.history(conv); len(h) != 0 && slices.Contains(h, "old results") {
		t.Errorf("history %q holds the earlier session's entry", h)
	}
}

// refusingCommits refuses the commits made under the first lease, as a
// full disk or a store out of memory does, Unavailable: refuse of them,
// or all with refuse < 0, and their renewals too when renewals is set.
type refusingCommits struct {
	sessions.Store
	refuse   int
	renewals bool

	mu      sync.Mutex
	refused int
}

func (s *refusingCommits) refusal(l sessions.Lease, commit bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Token != 1 || (!commit && !s.renewals) || (commit && s.refuse >= 0 && s.refused >= s.refuse) {
		return nil
	}
	if commit {
		s.refused++
	}
	return errs.E("refusingCommits", errs.Unavailable, "database or disk is full")
}

func (s *refusingCommits) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	if err := s.refusal(l, true); err != nil {
		return err
	}
	return s.Store.Finish(ctx, l, f)
}

func (s *refusingCommits) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	if err := s.refusal(l, true); err != nil {
		return nil, err
	}
	return s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
}

func (s *refusingCommits) Renew(ctx context.Context, l sessions.Lease, ttl time.Duration) (sessions.Lease, error) {
	if err := s.refusal(l, false); err != nil {
		return sessions.Lease{}, err
	}
	return s.Store.Renew(ctx, l, ttl)
}

// A commit the store refuses for a while lands once it takes it again,
// while the turn holds its lease: the turn does not run twice. A lease
// that runs out meanwhile, unrenewed, hands the entry back to run again.
func TestARefusedCommitLandsWhileTheLeaseHolds(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		store func(sessions.Store) *refusingCommits
		runs  int
	}{
		// Five refusals take 1.5 s of pauses; the 30 s lease holds past
		// them (four tries were all a commit had).
		{"within the lease", 30 * time.Second, func(s sessions.Store) *refusingCommits {
			return &refusingCommits{Store: s, refuse: 5}
		}, 1},
		// Every commit and renewal of the first lease refused: its 1 s
		// runs out during the pauses, and the entry runs again under a
		// second lease, whose commit lands.
		{"past the lease", time.Second, func(s sessions.Store) *refusingCommits {
			return &refusingCommits{Store: s, refuse: -1, renewals: true}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, clock.Real{})
			r := newGateRunner()
			startWorker(t, sessions.TurnWorkerOptions{
				Store: tc.store(db.Sessions()), Runner: r, LeaseTTL: tc.ttl, RetryDelay: 10 * time.Millisecond, PollMax: 10 * time.Millisecond,
			})
			if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, "the turn committed", func() bool { return len(historyTexts(t, db.Sessions())) == 2 })
			if got := len(r.waitCalls(t, 1)); got != tc.runs {
				t.Errorf("the turn ran %d times, want %d", got, tc.runs)
			}
			if d := cmp.Diff([]string{"user: hi", "assistant: re: hi"}, historyTexts(t, db.Sessions())); d != "" {
				t.Errorf("the history (-want +got):\n%s", d)
			}
		})
	}
}
