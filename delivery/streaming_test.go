package delivery

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// startStreaming runs a driver over a, on clk, until the test ends.
func startStreaming(t *testing.T, a adapters.Adapter, clk clock.Clock) *Streaming {
	t.Helper()
	s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{a}, Every: 1500 * time.Millisecond, Clock: clk,
		Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	shutdownAtCleanup(t, s)
	return s
}

// shutdownAtCleanup shuts s down when the test ends. A test that failed
// before its turn ended leaves that turn's goroutine running: the bound
// cuts it off, and the failure is reported then rather than at the
// package's timeout.
func shutdownAtCleanup(t *testing.T, s *Streaming) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

// streamedHello is a driver on a fake clock over p's adapter, following
// one turn that has streamed "Hello", posted as the reply in progress.
type streamedHello struct {
	clk   *clock.Fake
	a     adapters.Adapter
	s     *Streaming
	ts    sessions.TurnStream
	first adaptertest.Message // the reply in progress
}

func streamHello(t *testing.T, p adaptertest.Chat) streamedHello {
	t.Helper()
	h := streamedHello{clk: clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)), a: p.Adapter(nil)}
	h.s = startStreaming(t, h.a, h.clk)
	h.ts = h.s.Stream(context.Background(), p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
	if h.ts == nil {
		t.Fatal("Stream = nil, want the turn streamed")
	}
	h.ts.Delta("Hello")
	h.first = adaptertest.WaitShown(t, p, "the reply in progress posted", p.Render("Hello")...)[0]
	waitPosted(t, h.ts)
	return h
}

// waitPosted waits until the driver has the answer to the post of ts's
// reply in progress, which the chat may show before.
func waitPosted(t *testing.T, ts sessions.TurnStream) {
	t.Helper()
	testkit.Eventually(t, "the post's answer", func() bool { return ts.(*replyStream).shownID() != "" })
}

// deliver sends m as the delivery worker does: through the driver when it
// showed m in progress, else through the adapter's Send.
func deliver(s *Streaming, a adapters.Adapter, m outbox.Message) adapters.SendResult {
	if res, ok := s.Send(context.Background(), a, m); ok {
		return res
	}
	return a.Send(context.Background(), m)
}

func reply(p adaptertest.Chat, text string) outbox.Message {
	return outbox.Message{ID: "ob-1", Target: p.Target, ReplyTo: p.ReplyTo, Kind: agent.KindReply, Text: text}
}

// A reply in progress is one message, edited no more often than the
// interval by the driver's clock, and its delivery makes that message the
// reply, formatted and split as any reply: the first part edited in, the
// rest sent after it. A retry of that delivery posts nothing more.
func TestStreamedReplyIsEditedByTheClockThenFinalized(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, a, s, ts := h.clk, h.a, h.s, h.ts
			first := h.first
			ts.Delta(" there,")
			// The edit's timer, set for the interval after the post; text
			// that comes before it fires is in the edit, whether or not the
			// driver has taken it yet.
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			ts.Delta(" and")
			clk.Advance(1400 * time.Millisecond)
			if n := p.Edits(); n != 0 {
				t.Errorf("%d edits within the interval, want none", n)
			}
			clk.Advance(100 * time.Millisecond)
			adaptertest.WaitShown(t, p, "the text so far edited in", p.Render("Hello there, and")...)
			if n := p.Edits(); n != 1 {
				t.Errorf("%d edits after one interval, want 1", n)
			}
			ts.Delta(" more")
			ts.End(true)

			final := "Hello **there**, and more.\n\n" + strings.Repeat("A longer paragraph of the reply. ", 150)
			parts := p.Render(final)
			if len(parts) < 2 {
				t.Fatalf("the final reply renders as %d parts, want several", len(parts))
			}
			p.FailEdit()
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Transient {
				t.Fatalf("delivery with the edit failing = %+v, want Transient", res)
			}
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted || res.MessageID != first.ID {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, first.ID)
			}
			got := adaptertest.WaitShown(t, p, "the reply in place of the one in progress", parts...)
			if got[0].ID != first.ID {
				t.Errorf("the reply's first part is message %s, want the one in progress, %s", got[0].ID, first.ID)
			}

			// A short reply's delivery retried (its ack lost) edits again.
			short := "Hello **there**."
			for range 2 {
				if res := deliver(s, a, outbox.Message{ID: "ob-2", Target: p.Target, ReplyTo: p.ReplyTo, Kind: agent.KindReply, Text: short}); res.Outcome != adapters.Accepted {
					t.Fatalf("delivery = %+v, want accepted", res)
				}
			}
			want := append(p.Render(short), parts[1:]...)
			adaptertest.WaitShown(t, p, "the short reply edited in, nothing posted", want...)
		})
	}
}

// An edit the platform rate-limits is tried again no sooner than the
// platform asked, and no sooner than twice the interval, by the driver's
// clock.
func TestStreamedReplyWaitsOutARateLimit(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, ts := h.clk, h.ts
			defer ts.End(true)
			wait := max(3*time.Second, p.RateLimitEdit())
			ts.Delta(" there")
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(1500 * time.Millisecond) // the edit, refused
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(wait - 100*time.Millisecond)
			if n := clk.Waiters(); n != 1 {
				t.Fatalf("%d timers armed %s after the rate limit, want the driver's still waiting", n, wait-100*time.Millisecond)
			}
			clk.Advance(100 * time.Millisecond)
			adaptertest.WaitShown(t, p, "the edit after the wait", p.Render("Hello there")...)
		})
	}
}

// A reply delivered by another process than the one that showed it (no
// stream state there) names the message that showed it, which becomes
// the reply all the same.
func TestStreamedReplyDeliveredElsewhereIsEditedIn(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			meta := h.ts.End(true)
			if got := meta[sessions.ReplyMetaStreamed]; got != h.first.ID {
				t.Fatalf("End's meta names message %q, want %q", got, h.first.ID)
			}
			elsewhere := startStreaming(t, h.a, h.clk)
			final := "Hello **there**."
			m := reply(p, final)
			m.Meta = meta
			if res := deliver(elsewhere, h.a, m); res.Outcome != adapters.Accepted || res.MessageID != h.first.ID {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, h.first.ID)
			}
			adaptertest.WaitShown(t, p, "the reply in place of the one in progress", p.Render(final)...)
		})
	}
}

// A first post of the reply in progress that failed for now (a 5xx, a
// timeout) may have been posted all the same: the driver posts nothing
// more for that reply, which is sent as usual when it is done, once.
func TestStreamedReplyPostFailedIsNotPostedAgain(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			a := p.Adapter(nil)
			s := startStreaming(t, a, clk)
			ts := s.Stream(context.Background(), p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn streamed")
			}
			t.Cleanup(func() { ts.End(true) }) // before the driver's shutdown
			p.FailPost()
			ts.Delta("Hello")
			testkit.Eventually(t, "the driver to stop showing the reply", func() bool {
				select {
				case <-ts.(*replyStream).done:
					return true
				default:
					// Without the stop, the next try comes after a wait.
					clk.Advance(time.Second)
					return false
				}
			})
			if meta := ts.End(true); len(meta) != 0 {
				t.Errorf("End's meta = %v, want none: no message was surely posted", meta)
			}
			final := "Hello **there**."
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			adaptertest.WaitShown(t, p, "the reply posted once", p.Render(final)...)
		})
	}
}

// A reply committed by another process's run of the turn, delivered by a
// process whose own run showed another message, becomes the message it
// names: the other process's.
func TestStreamedReplyNamedByItsCommitWins(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			elsewhere := startStreaming(t, h.a, h.clk)
			ts := elsewhere.Stream(context.Background(), p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			ts.Delta("Hi")
			second := adaptertest.WaitShown(t, p, "the other run's reply in progress", append(p.Render("Hello"), p.Render("Hi")...)...)[1]
			waitPosted(t, ts)
			meta := ts.End(true)
			if meta[sessions.ReplyMetaStreamed] != second.ID {
				t.Fatalf("End's meta = %v, want message %s", meta, second.ID)
			}
			final := "Hi **there**."
			m := reply(p, final)
			m.Meta = meta
			if res := deliver(h.s, h.a, m); res.Outcome != adapters.Accepted || res.MessageID != second.ID {
				t.Fatalf("delivery = %+v, want accepted as message %s", res, second.ID)
			}
			adaptertest.WaitShown(t, p, "the reply in the message its commit named", append(p.Render("Hello"), p.Render(final)...)...)
		})
	}
}

// A turn handed back and run again in the same process goes on in the
// message its first run showed.
func TestStreamedReplyOfARerunGoesOnInTheSameMessage(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true) // handed back: its reply may still come
			again := h.s.Stream(context.Background(), p.Target.String(),
				sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			defer again.End(true)
			again.Delta("Hello again")
			// The chat was called for the first run's post an instant ago:
			// the rerun's edit waits the interval.
			if err := h.clk.BlockUntil(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(1500 * time.Millisecond)
			got := adaptertest.WaitShown(t, p, "the rerun's text in the same message", p.Render("Hello again")...)
			if got[0].ID != h.first.ID {
				t.Errorf("the rerun shows message %s, want %s", got[0].ID, h.first.ID)
			}
		})
	}
}

// A turn that ended without a reply (stopped, interrupted) has its reply
// in progress deleted: no reply will take its place, and its text is in
// no history.
func TestStreamedReplyOfAStoppedTurnIsDeleted(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(false)
			adaptertest.WaitShown(t, p, "the reply in progress deleted")
		})
	}
}

// A turn said to have a reply to come whose commit then found its lease
// lost takes that back: its reply in progress is deleted all the same,
// as the turn's next run, elsewhere, shows its own.
func TestStreamedReplyTakenBackIsDeleted(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			h.ts.End(false)
			adaptertest.WaitShown(t, p, "the reply in progress deleted")
		})
	}
}

// A platform that refuses to edit the reply in progress gets the reply
// posted anew, and the message in progress is deleted.
func TestStreamedReplyRefusedEditIsSentPlainly(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			a, s := h.a, h.s
			first := h.first
			h.ts.End(true)

			p.RefuseEdit()
			final := "Hello **there**."
			if res := deliver(s, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			got := adaptertest.WaitShown(t, p, "the reply alone", p.Render(final)...)
			if got[0].ID == first.ID {
				t.Errorf("the reply is message %s, the one whose edit was refused", got[0].ID)
			}
		})
	}
}

// A reply in parts whose first part was posted anew (the edit refused)
// and whose later part failed is finished by a retry that starts after
// the parts that went, and still deletes the message in progress.
func TestStreamedReplyRefusedEditThenRetriedDeletesTheMessageInProgress(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			h := streamHello(t, p)
			h.ts.End(true)
			final := "Hello **there**.\n\n" + strings.Repeat("A longer paragraph of the reply. ", 150)
			parts := p.Render(final)
			if len(parts) < 2 {
				t.Fatalf("the final reply renders as %d parts, want several", len(parts))
			}
			m := reply(p, final)
			// The outbox keeps the parts as they go; the part after the
			// first fails for now.
			ctx := adapters.WithParts(context.Background(), func(got outbox.Parts) error {
				if m.Parts == (outbox.Parts{}) {
					p.FailPost()
				}
				m.Parts = got
				return nil
			})
			p.RefuseEdit()
			if res, ok := h.s.Send(ctx, h.a, m); !ok || res.Outcome != adapters.Transient {
				t.Fatalf("delivery with the second part failing = %+v (through the driver: %v), want Transient", res, ok)
			}
			if m.Parts.Done != 1 {
				t.Fatalf("parts kept %+v, want the first one done", m.Parts)
			}
			if res, ok := h.s.Send(ctx, h.a, m); !ok || res.Outcome != adapters.Accepted {
				t.Fatalf("retried delivery = %+v (through the driver: %v), want accepted", res, ok)
			}
			got := adaptertest.WaitShown(t, p, "the reply alone, the message in progress deleted", parts...)
			if got[0].ID == h.first.ID {
				t.Errorf("the reply is message %s, the one whose edit was refused", got[0].ID)
			}
		})
	}
}

// A process that dies mid-stream leaves its message in progress as it
// was; the reply, delivered by a process that streamed nothing, is sent
// once as usual.
func TestStreamedReplyAfterACrashIsSentOnce(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			clk, a, dead := h.clk, h.a, h.s
			fresh := startStreaming(t, a, clk)
			final := "Hello **there**."
			if res := deliver(fresh, a, reply(p, final)); res.Outcome != adapters.Accepted {
				t.Fatalf("delivery = %+v, want accepted", res)
			}
			adaptertest.WaitShown(t, p, "the partial message and the reply once", append(p.Render("Hello"), p.Render(final)...)...)
			// The dead process's turn never ends: its driver is cut off.
			gone, cancel := context.WithCancel(ctx)
			cancel()
			if err := dead.Shutdown(gone); !errors.Is(err, context.Canceled) {
				t.Errorf("Shutdown = %v, want the context's end", err)
			}
		})
	}
}

// The driver reads the outbox once, before the first post: a chat with a
// message not sent yet, or an outbox it cannot read, shows nothing in
// progress, and the driver leaves the turn at once; the reply is then
// sent as usual.
func TestStreamedReplyIsNotShownWhileTheOutboxHoldsAnEarlierMessage(t *testing.T) {
	target := outbox.Target{Platform: "telegram", Chat: "4242"}
	for _, tc := range []struct {
		name string
		ob   func(t *testing.T, clk clock.Clock) outbox.Store
	}{
		{"unsent", func(t *testing.T, clk clock.Clock) outbox.Store {
			ob := openSQLite(t, clk).Outbox()
			m := outbox.Message{Target: target, Kind: agent.KindReply, Text: "Earlier", NextAttempt: clk.Now().Add(time.Minute)}
			if _, _, err := ob.Enqueue(context.Background(), m); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			return ob
		}},
		{"read fails", func(t *testing.T, clk clock.Clock) outbox.Store {
			db := openSQLite(t, clk)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return db.Outbox()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := adaptertest.StreamingChats(t)[0]
			if p.Target != target {
				t.Fatalf("the platform's target is %s, want %s", p.Target, target)
			}
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			a := p.Adapter(nil)
			s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{a}, Clock: clk, Logger: quietLogger(), Outbox: tc.ob(t, clk)})
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			shutdownAtCleanup(t, s)
			ts := s.Stream(context.Background(), p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn followed")
			}
			ts.Delta("Hello")
			// Were it shown, the driver would follow the turn until End.
			done := ts.(*replyStream).done
			testkit.Eventually(t, "the driver leaving the turn", func() bool {
				select {
				case <-done:
					return true
				default:
					return false
				}
			})
			if got := p.Shown(); len(got) != 0 {
				t.Fatalf("the chat shows %q, want nothing", got)
			}
			if meta := ts.End(true); meta != nil {
				t.Errorf("End = %v, want no message named", meta)
			}
			m := reply(p, "Hello there")
			if res := deliver(s, a, m); res.Outcome != adapters.Accepted {
				t.Fatalf("deliver = %+v", res)
			}
			adaptertest.WaitShown(t, p, "the reply, sent as usual", p.Render("Hello there")...)
		})
	}
}

// The reply shown in progress is masked as the delivered one is: a
// secret the model writes never appears in the chat, not even for the
// moments before the reply is done.
func TestStreamedReplyIsRedacted(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{p.Adapter(nil)}, Every: 1500 * time.Millisecond, Clock: clk,
				Logger: slog.New(slog.DiscardHandler), Redact: redact.New([]string{"sk-stream-secret"}).String})
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			shutdownAtCleanup(t, s)
			ts := s.Stream(context.Background(), p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn streamed")
			}
			ts.Delta("the key is sk-stream-secret")
			var shown []adaptertest.Message
			testkit.Eventually(t, "the reply in progress posted", func() bool { shown = p.Shown(); return len(shown) == 1 })
			if text := shown[0].Text; !strings.Contains(text, "the key is") || strings.Contains(text, "sk-stream-secret") {
				t.Errorf("the chat shows %q, want the reply with its secret masked", text)
			}
			waitPosted(t, ts)
			ts.End(false)
		})
	}
}

// A secret the model writes across pieces never shows in part: the text
// shown holds back an end that may be the start of a secret until the
// rest of it comes, then shows the secret masked whole.
func TestStreamedReplyNeverShowsPartOfASecret(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			clk := clock.NewFake(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
			r := redact.New([]string{"sk-stream-secret"})
			s := NewStreaming(StreamingOptions{Adapters: []adapters.Adapter{p.Adapter(nil)}, Every: 1500 * time.Millisecond, Clock: clk,
				Logger: slog.New(slog.DiscardHandler), Redact: r.String, Hold: r.Unsettled})
			if err := s.Start(ctx); err != nil {
				t.Fatal(err)
			}
			shutdownAtCleanup(t, s)
			ts := s.Stream(ctx, p.Target.String(), sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: p.ReplyTo}}, p.Target)
			if ts == nil {
				t.Fatal("Stream = nil, want the turn streamed")
			}
			ts.Delta("the key is sk-stre")
			adaptertest.WaitShown(t, p, "the text before the secret's start", p.Render("the key is")...)
			ts.Delta("am-secret, done")
			// The edit's timer, set for the interval after the post.
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(1500 * time.Millisecond)
			adaptertest.WaitShown(t, p, "the secret masked whole", p.Render("the key is "+redact.Mask+", done")...)
			for _, m := range p.Shown() {
				if strings.Contains(m.Text, "sk-") {
					t.Errorf("the chat shows %q", m.Text)
				}
			}
			waitPosted(t, ts)
			ts.End(false)
		})
	}
}

// Two replies in progress in one chat share its pace: the second's post
// waits until the interval since the first's has passed, by the
// driver's clock, so the chat gets no more than one call an interval.
func TestStreamedRepliesInOneChatShareItsPace(t *testing.T) {
	for _, p := range adaptertest.StreamingChats(t) {
		t.Run(p.Name, func(t *testing.T) {
			ctx := context.Background()
			h := streamHello(t, p)
			defer h.ts.End(true)
			other := h.s.Stream(ctx, p.Target.String(), sessions.Entry{ID: "e2", Inbound: sessions.Inbound{MessageID: p.ReplyTo + "0"}}, p.Target)
			if other == nil {
				t.Fatal("Stream = nil, want the second turn streamed")
			}
			defer other.End(true)
			other.Delta("Other")
			if err := h.clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(1400 * time.Millisecond)
			if got := p.Shown(); len(got) != 1 {
				t.Fatalf("the chat shows %q within the interval of the first post, want the first alone", got)
			}
			h.clk.Advance(100 * time.Millisecond)
			adaptertest.WaitShown(t, p, "the second reply posted after the interval", append(p.Render("Hello"), p.Render("Other")...)...)
		})
	}
}
