package sessions_test

import (
	"time"

	"context"
	"slices"
	"sync"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"

	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// streamRunner streams its reply in pieces through TurnInput.Delta, then
// answers with the pieces joined.
type streamRunner struct{ pieces []string }

func (r streamRunner) Run(_ context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	var text string
	for _, p := range r.pieces {
		if in.Delta != nil {
			in.Delta(p)
		}
		text += p
	}
	return &sessions.TurnOutput{
		History: []chat.Message{{Role: "user", Content: in.Entry.Text}, {Role: "assistant", Content: text}},
		Outbox:  []outbox.Message{{Target: in.Origin, Conv: in.Conv, Text: text, ReplyTo: in.Entry.MessageID, Kind: "reply"}},
		End:     sessions.TurnDone,
	}, nil
}

// recordedStream is a TurnStream that keeps what it is told, and whether
// the turn's reply was already committed when it ended.
type recordedStream struct {
	mu             sync.Mutex
	entry          sessions.Entry
	origin         outbox.Target
	pieces         []string
	ends           int
	replied        bool
	committedFirst bool
	committed      func() bool
}

func (s *recordedStream) Delta(text string) {
	s.mu.Lock()
	s.pieces = append(s.pieces, text)
	s.mu.Unlock()
}

func (s *recordedStream) End(replied bool) map[string]string {
	committed := s.committed()
	s.mu.Lock()
	s.ends++
	s.replied = replied
	s.committedFirst = committed
	s.mu.Unlock()
	return map[string]string{sessions.ReplyMetaStreamed: "shown-1"}
}

// A turn whose origin streams hands it every piece of its model's text
// in order, names the entry and where the reply goes, and ends the stream
// once, before the commit that writes the reply.
func TestStreamTakesTheTurnsText(t *testing.T) {
	var g *gateway
	rec := &recordedStream{}
	rec.committed = func() bool { return len(g.sent(conv)) > 0 }
	g = startGateway(t, gatewayOptions{
		runner: streamRunner{pieces: []string{"Hel", "lo", " there"}},
		worker: sessions.TurnWorkerOptions{Stream: func(_ context.Context, c string, e sessions.Entry, origin outbox.Target) sessions.TurnStream {
			rec.mu.Lock()
			rec.entry, rec.origin = e, origin
			rec.mu.Unlock()
			return rec
		}},
	})
	g.deliver(sessions.Inbound{Text: "hi", Sender: "42", MessageID: "m-1"})
	g.waitSent(conv, "Hello there")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{"Hel", "lo", " there"}; !slices.Equal(rec.pieces, want) {
		t.Errorf("pieces %q, want %q", rec.pieces, want)
	}
	if rec.entry.MessageID != "m-1" || rec.origin.String() != conv {
		t.Errorf("streamed the entry of message %q to %s, want m-1 to %s", rec.entry.MessageID, rec.origin, conv)
	}
	if rec.ends != 1 || rec.committedFirst || !rec.replied {
		t.Errorf("ended %d times, after the commit: %v, replied: %v; want once, before it, replied", rec.ends, rec.committedFirst, rec.replied)
	}
	// The reply carries the message that showed it, for its delivery.
	msgs, err := g.outbox.Pending(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Meta[sessions.ReplyMetaStreamed] != "shown-1" {
		t.Errorf("outbox %+v, want the reply with %s shown-1", msgs, sessions.ReplyMetaStreamed)
	}
}

// A turn for which Stream returns nil runs as before: no Delta, so its
// model is not asked to stream.
func TestNoStreamNoDelta(t *testing.T) {
	var delta bool
	var mu sync.Mutex
	g := startGateway(t, gatewayOptions{
		runner: runnerFunc(func(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
			mu.Lock()
			delta = in.Delta != nil
			mu.Unlock()
			return streamRunner{pieces: []string{"ok"}}.Run(ctx, in)
		}),
		worker: sessions.TurnWorkerOptions{Stream: func(context.Context, string, sessions.Entry, outbox.Target) sessions.TurnStream {
			return nil
		}},
	})
	g.say("hi")
	g.waitSent(conv, "ok")
	mu.Lock()
	defer mu.Unlock()
	if delta {
		t.Error("the turn got a Delta with nothing to take it")
	}
}

type runnerFunc func(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error)

func (f runnerFunc) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	return f(ctx, in)
}

// A turn /stop ends commits no reply: its stream is told so, before the
// "Stopped." notice is written.
func TestStreamOfAStoppedTurnEndsWithoutReply(t *testing.T) {
	r := newGateRunner()
	var g *gateway
	rec := &recordedStream{}
	rec.committed = func() bool { return slices.Contains(g.sent(conv), "Stopped.") }
	g = startGateway(t, gatewayOptions{
		runner: r,
		worker: sessions.TurnWorkerOptions{Stream: func(context.Context, string, sessions.Entry, outbox.Target) sessions.TurnStream {
			return rec
		}},
	})
	g.say("slow job")
	r.waitCalls(t, 1)
	g.say("/stop")
	g.waitSent(conv, "Stopped.")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.ends != 1 || rec.replied || rec.committedFirst {
		t.Errorf("ended %d times, replied: %v, after the commit: %v; want once, with no reply, before the commit",
			rec.ends, rec.replied, rec.committedFirst)
	}
}

// A turn that lost its lease, or that the worker handed back as it
// stopped, runs again in another process, which shows and sends its own
// reply: its stream is told no reply comes from here, so the message it
// showed does not stay beside the other's. A lease found lost only at
// the commit takes back the reply its stream was told would come.
func TestStreamOfATurnRunElsewhereEndsWithoutReply(t *testing.T) {
	tests := []struct {
		desc     string
		lost     bool // the lease is lost; else the worker stops
		atCommit bool // the lease is found lost at the commit
		ttl      time.Duration
		grace    time.Duration
		wantEnds int
	}{
		{desc: "lease lost", lost: true, ttl: 300 * time.Millisecond, wantEnds: 1},
		{desc: "lease found lost at the commit", lost: true, atCommit: true, ttl: 30 * time.Second, wantEnds: 2},
		{desc: "handed back at shutdown", grace: 50 * time.Millisecond, wantEnds: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			opts := gatewayOptions{clock: clk, runner: newGateRunner()}
			if !tc.lost {
				opts.clock = nil
			}
			r := opts.runner.(*gateRunner)
			rec := &recordedStream{committed: func() bool { return false }}
			opts.worker = sessions.TurnWorkerOptions{Turns: 1, LeaseTTL: tc.ttl, Grace: tc.grace,
				Stream: func(context.Context, string, sessions.Entry, outbox.Target) sessions.TurnStream { return rec }}
			g := startGateway(t, opts)
			g.say("slow job")
			call := r.waitCalls(t, 1)[0]
			if tc.lost {
				for stolen := (*sessions.Turn)(nil); stolen == nil; {
					clk.Advance(tc.ttl + time.Second)
					var err error
					if stolen, err = g.store.Claim(context.Background(), "thief", time.Hour); err != nil {
						t.Fatal(err)
					}
				}
				if tc.atCommit {
					call.Release()
				}
			} else if err := g.shutdown(10 * time.Second); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			<-call.done
			testkit.Eventually(t, "the stream ended", func() bool {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return rec.ends >= tc.wantEnds
			})
			settle()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.ends != tc.wantEnds || rec.replied {
				t.Errorf("ended %d times, last replied: %v; want %d, the last with no reply from here", rec.ends, rec.replied, tc.wantEnds)
			}
		})
	}
}
