package delivery

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

var chatRoom = outbox.Target{Platform: "chat", Chat: "room"}

// startPresence starts a driver for pa, shut down when the test ends.
func startPresence(t *testing.T, opts PresenceOptions, pa ...adapters.Adapter) *Presence {
	t.Helper()
	opts.Adapters = pa
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	p := NewPresence(opts)
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

// shutdown stops p, which waits for every watched turn's calls to end,
// so that what pa recorded afterwards is final.
func shutdown(t *testing.T, p *Presence) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// lastStatus is the text of the last post or edit.
func lastStatus(calls []adaptertest.PresenceCall) string {
	for i := len(calls) - 1; i >= 0; i-- {
		if k := calls[i].Kind; k == "post" || k == "edit" {
			return calls[i].Text
		}
	}
	return ""
}

func kinds(calls []adaptertest.PresenceCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Kind
		if c.Text != "" {
			out[i] += " " + c.Text
		}
		if c.Kind == "clear" {
			out[i] += " " + c.ID
		}
	}
	return out
}

// On a clock that stands still no edit is due, so every step given before
// the clock moves is coalesced into the one edit after it: the last wins.
func TestPresenceCoalescesStepsByTheClock(t *testing.T) {
	clk := clock.NewFake(t0)
	pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "chat"}}
	p := startPresence(t, PresenceOptions{Clock: clk, TypingEvery: 40 * time.Millisecond, StatusEvery: 50 * time.Millisecond}, pa)

	w := p.Watch(context.Background(), "chat:room", chatRoom)
	w.Progress(sessions.Progress{Tool: "web_search"})
	testkit.Eventually(t, "the status line", func() bool { return pa.Count("post") == 1 })
	for _, tool := range []string{"read_file", "memory", "send_message"} {
		w.Progress(sessions.Progress{Tool: tool})
	}
	clk.Advance(50 * time.Millisecond)
	testkit.Eventually(t, "the edit", func() bool { return pa.Count("edit") == 1 })
	w.End()
	shutdown(t, p)

	want := []string{
		"typing",
		"post Working… (tool: web_search)",
		"edit Working… (tool: send_message)",
		"typing", // due with the edit: the clock moved past TypingEvery
		"clear s1",
	}
	calls := pa.Calls()
	if d := cmp.Diff(want, kinds(calls)); d != "" {
		t.Errorf("presence calls (-want +got):\n%s", d)
	}
	for _, c := range calls {
		if c.Target != chatRoom {
			t.Errorf("%s went to %+v, want %+v", c.Kind, c.Target, chatRoom)
		}
		if c.Kind == "edit" && c.ID != "s1" {
			t.Errorf("edit of status line %q, want s1", c.ID)
		}
	}
}

// On the wall clock, steps coming faster than StatusEvery make at most
// one edit per StatusEvery, the typing indicator is sent again every
// TypingEvery, and the line ends showing the latest step.
func TestPresenceRatesOnTheWallClock(t *testing.T) {
	const typingEvery, statusEvery = 25 * time.Millisecond, 60 * time.Millisecond
	pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "chat"}}
	p := startPresence(t, PresenceOptions{TypingEvery: typingEvery, StatusEvery: statusEvery}, pa)

	w := p.Watch(context.Background(), "chat:room", chatRoom)
	start := time.Now()
	pace := time.NewTicker(2 * time.Millisecond) // a busy turn's tools
	defer pace.Stop()
	var last string
	for i := 0; time.Since(start) < 8*statusEvery; i++ {
		last = "tool" + strings.Repeat("x", i%7)
		w.Progress(sessions.Progress{Tool: last})
		<-pace.C
	}
	testkit.Eventually(t, "the line to show the last step", func() bool { return lastStatus(pa.Calls()) == statusText(last) })
	w.End()
	shutdown(t, p)
	took := time.Since(start)

	calls := pa.Calls()
	if got := pa.Count("post"); got != 1 {
		t.Errorf("%d status lines posted, want 1", got)
	}
	var lastTyping, lastStatus time.Time
	for _, c := range calls {
		switch c.Kind {
		case "typing":
			if !lastTyping.IsZero() && c.At.Sub(lastTyping) < typingEvery {
				t.Errorf("typing %v after the one before, want at least %v", c.At.Sub(lastTyping), typingEvery)
			}
			lastTyping = c.At
		case "post", "edit":
			if !lastStatus.IsZero() && c.At.Sub(lastStatus) < statusEvery {
				t.Errorf("status %v after the one before, want at least %v", c.At.Sub(lastStatus), statusEvery)
			}
			lastStatus = c.At
		}
	}
	if n, most := pa.Count("edit"), int(took/statusEvery)+1; n < 2 || n > most {
		t.Errorf("%d edits in %v, want 2 to %d", n, took, most)
	}
	if n := pa.Count("typing"); n < 3 {
		t.Errorf("%d typing calls in %v, want the indicator kept up", n, took)
	}
	if c := calls[len(calls)-1]; c.Kind != "clear" || c.ID != "s1" {
		t.Errorf("the last call is %s %s, want clear s1", c.Kind, c.ID)
	}
}

// A slow or failing platform never holds the turn up: Progress and End
// return at once, each call is cut at Timeout, a failed post is tried
// again, and nothing runs after the turn ended.
func TestPresenceNeverHoldsTheTurn(t *testing.T) {
	var failPosts atomic.Int32
	failPosts.Store(1)
	pa := &adaptertest.Presence{
		Adapter: adaptertest.Adapter{Name: "chat"},
		OnTyping: func(ctx context.Context) error {
			<-ctx.Done() // a platform that never answers
			return ctx.Err()
		},
		OnStatus: func(ctx context.Context, id, text string) error {
			if failPosts.Add(-1) >= 0 {
				return errors.New("502 bad gateway")
			}
			return nil
		},
	}
	p := startPresence(t, PresenceOptions{Timeout: 30 * time.Millisecond, TypingEvery: time.Hour, StatusEvery: 40 * time.Millisecond}, pa)

	w := p.Watch(context.Background(), "chat:room", chatRoom)
	returned := make(chan struct{})
	go func() {
		// Each of these would block behind the hung typing call if it
		// made a platform call itself.
		for range 100 {
			w.Progress(sessions.Progress{Tool: "web_search"})
		}
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(time.Second):
		t.Fatal("Progress blocked on the platform")
	}
	testkit.Eventually(t, "the post after the failed one", func() bool { return pa.Count("post") == 2 })
	w.End()
	w.End() // a second End is harmless
	shutdown(t, p)

	want := []string{"typing", "post Working… (tool: web_search)", "post Working… (tool: web_search)", "clear s1"}
	if d := cmp.Diff(want, kinds(pa.Calls())); d != "" {
		t.Errorf("presence calls (-want +got):\n%s", d)
	}
}

func TestPresenceFollowsOnlyItsPlatforms(t *testing.T) {
	pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "chat"}}
	plain := &adaptertest.Adapter{Name: "other"}
	p := startPresence(t, PresenceOptions{}, pa, plain)
	if !p.Drives() {
		t.Error("Drives = false with a presence adapter")
	}
	if NewPresence(PresenceOptions{Adapters: []adapters.Adapter{plain}}).Drives() {
		t.Error("Drives = true without a presence adapter")
	}
	w := p.Watch(context.Background(), "other:1", outbox.Target{Platform: "other", Chat: "1"})
	if _, ok := w.(noWatch); !ok {
		t.Errorf("Watch of a platform without presence = %T, want noWatch", w)
	}
	w.Progress(sessions.Progress{Tool: "x"})
	w.End()
	shutdown(t, p)
	// After Shutdown no turn is followed.
	if w := p.Watch(context.Background(), "chat:room", chatRoom); w != (noWatch{}) {
		t.Errorf("Watch after Shutdown = %T, want noWatch", w)
	}
	if n := len(pa.Calls()); n != 0 {
		t.Errorf("%d presence calls, want none", n)
	}
}

// A turn still running when the driver must stop is cut off at the
// deadline, and its goroutine ends with Shutdown.
func TestPresenceShutdownCutsOffARunningTurn(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "chat"}}
	p := startPresence(t, PresenceOptions{TypingEvery: 10 * time.Millisecond}, pa)
	p.Watch(context.Background(), "chat:room", chatRoom) // never ends
	testkit.Eventually(t, "typing", func() bool { return pa.Count("typing") > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline", err)
	}
}
