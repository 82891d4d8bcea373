package api_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
)

// A list route asked for text/event-stream answers with the list at
// once and again each time it changes, read every half second on the
// API's clock; an unchanged list sends nothing, and a bad request is
// refused with its status before any stream starts.
func TestLiveRouteStreamsChanges(t *testing.T) {
	clk := clock.NewFake(epoch)
	var mu sync.Mutex
	var pending []outbox.Message
	set := func(ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		pending = nil
		for _, id := range ids {
			pending = append(pending, outbox.Message{ID: id, Target: outbox.Target{Platform: "telegram", Chat: "42"}, Text: "hi"})
		}
	}
	ob := &fakeOutbox{pending: func(context.Context, int) ([]outbox.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		return pending, nil
	}}
	f := newFixture(t, func(o *api.Options) {
		o.Clock = clk
		o.Routes = []api.Routes{api.OutboxRoutes(ob)}
	})

	bad, err := http.NewRequest("GET", f.srv.URL+"/api/v1/outbox/pending?limit=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	bad.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(bad)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad limit streamed: %d", res.StatusCode)
	}

	next := f.stream(t, "/api/v1/outbox/pending")
	if ev := next(); ev != `{"messages":[]}` {
		t.Fatalf("first event %s", ev)
	}
	// Unchanged: a read, and nothing sent.
	waitArmed(t, clk, 2) // the poll and the keep-alive
	clk.Advance(500 * time.Millisecond)
	waitArmed(t, clk, 2)
	set("m1")
	clk.Advance(500 * time.Millisecond)
	if ev := next(); !strings.Contains(ev, `"id":"m1"`) {
		t.Fatalf("after the change: %s", ev)
	}
	waitArmed(t, clk, 2)
	set("m1", "m2")
	clk.Advance(500 * time.Millisecond)
	if ev := next(); !strings.Contains(ev, `"id":"m2"`) || !strings.Contains(ev, `"id":"m1"`) {
		t.Fatalf("after the second change: %s", ev)
	}
}

// stream opens path as server-sent events, as a dashboard's page does,
// with header's pairs set, and returns what reads its next "data:"
// event (failing the test when none comes within 10 s). The stream ends
// with the test.
func (f *fixture) stream(t *testing.T, path string, header ...string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream %s: %d %q", path, res.StatusCode, ct)
	}
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
		close(events)
	}()
	return func() string {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
			return ""
		}
	}
}

// waitArmed waits until n timers or tickers of clk are armed.
func waitArmed(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
}
