package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newFake(t *testing.T) (*DB, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(epoch)
	return openDB(t, testkit.StartRedis(t), clk, sessions.Limits{}), clk
}

func mustAppend(t *testing.T, s sessions.Store, in sessions.Inbound) sessions.AppendResult {
	t.Helper()
	r, err := s.Append(context.Background(), in)
	if err != nil {
		t.Fatalf("Append(%+v): %v", in, err)
	}
	return r
}

func mustClaim(t *testing.T, s sessions.Store, worker string, ttl time.Duration) *sessions.Turn {
	t.Helper()
	turn, err := s.Claim(context.Background(), worker, ttl)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if turn == nil {
		t.Fatalf("Claim: nothing ready")
	}
	return turn
}

func wantCode(t *testing.T, what string, err error, code errs.Code) {
	t.Helper()
	if !errs.Is(err, code) {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
}

func TestClaimOrder(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Sessions()
	c := "slack:C1"
	for _, in := range []sessions.Inbound{
		{Text: "syn-low", Kind: sessions.KindSynthetic, Priority: sessions.PriorityLow},
		{Text: "syn", Kind: sessions.KindSynthetic},
		{Text: "user-1"},
		{Text: "user-low", Priority: sessions.PriorityLow},
		{Text: "user-high", Priority: sessions.PriorityHigh},
		{Text: "user-2"},
		{Text: "syn-high", Kind: sessions.KindSynthetic, Priority: sessions.PriorityHigh},
	} {
		in.Conv = c
		mustAppend(t, s, in)
		clk.Advance(time.Millisecond)
	}
	turn := mustClaim(t, s, "w", time.Minute)
	var got []string
	entry := &turn.Entry
	for entry != nil {
		got = append(got, entry.Text)
		if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: entry.ID}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		var err error
		if entry, err = s.Next(ctx, turn.Lease); err != nil {
			t.Fatalf("Next: %v", err)
		}
	}
	want := []string{"user-high", "user-1", "user-2", "user-low", "syn-high", "syn", "syn-low"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestClaimOldestReadyFirstAndReleaseGoesBehind(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Sessions()
	for _, c := range []string{"a", "b", "c"} {
		mustAppend(t, s, sessions.Inbound{Conv: c, Text: c + "1"})
		mustAppend(t, s, sessions.Inbound{Conv: c, Text: c + "2"})
		clk.Advance(time.Millisecond)
	}
	var got []string
	for range 6 {
		turn := mustClaim(t, s, "w", time.Minute)
		got = append(got, turn.Entry.Text)
		if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		clk.Advance(time.Millisecond)
	}
	want := []string{"a1", "b1", "c1", "a2", "b2", "c2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("claims (-want +got):\n%s", diff)
	}
	if turn, err := s.Claim(ctx, "w", time.Minute); err != nil || turn != nil {
		t.Fatalf("Claim on empty store = %+v, %v; want nil, nil", turn, err)
	}
}

func TestOneHolderPerConversation(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "2"})
	mustClaim(t, s, "w1", time.Minute)
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Fatalf("second Claim = %+v, %v; want nil while leased", turn, err)
	}
	// An append while leased must not make the conversation ready.
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "3"})
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Fatalf("Claim after append = %+v, %v; want nil while leased", turn, err)
	}
}

func TestFencingAfterTakeover(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	old := mustClaim(t, s, "w1", 10*time.Second)

	// Expired but not taken over: the token is still current.
	clk.Advance(11 * time.Second)
	renewed, err := s.Renew(ctx, old.Lease, 10*time.Second)
	if err != nil {
		t.Fatalf("Renew of an expired lease nobody took: %v", err)
	}
	if !renewed.Expires.Equal(clk.Now().Add(10 * time.Second)) {
		t.Fatalf("Renew expires %v, want %v", renewed.Expires, clk.Now().Add(10*time.Second))
	}
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Fatalf("Claim of a renewed lease = %+v, %v", turn, err)
	}

	clk.Advance(11 * time.Second)
	taken := mustClaim(t, s, "w2", time.Minute)
	if taken.Lease.Token <= old.Lease.Token {
		t.Fatalf("takeover token %d not above %d", taken.Lease.Token, old.Lease.Token)
	}
	if taken.Entry.ID != old.Entry.ID || taken.Entry.Deliveries != 2 {
		t.Fatalf("takeover entry = %s (deliveries %d), want %s redelivered (2)", taken.Entry.ID, taken.Entry.Deliveries, old.Entry.ID)
	}

	stale := old.Lease
	fin := sessions.Finish{
		EntryID: old.Entry.ID,
		History: []chat.Message{{Role: "assistant", Content: "stale"}},
		Outbox:  []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "stale"}},
		Release: true,
	}
	wantCode(t, "stale Finish", s.Finish(ctx, stale, fin), errs.LeaseLost)
	wantCode(t, "stale AppendHistory", s.AppendHistory(ctx, stale, chat.Message{Role: "user"}), errs.LeaseLost)
	_, err = s.Renew(ctx, stale, time.Minute)
	wantCode(t, "stale Renew", err, errs.LeaseLost)
	_, err = s.Next(ctx, stale)
	wantCode(t, "stale Next", err, errs.LeaseLost)
	wantCode(t, "stale Release", s.Release(ctx, stale), errs.LeaseLost)

	if h, _ := s.History(ctx, "x"); len(h) != 0 {
		t.Fatalf("stale writes reached history: %+v", h)
	}
	if p, _ := db.Outbox().Pending(ctx, 0); len(p) != 0 {
		t.Fatalf("stale writes reached the outbox: %+v", p)
	}
	// The new holder still commits.
	if err := s.Finish(ctx, taken.Lease, sessions.Finish{EntryID: taken.Entry.ID, Release: true}); err != nil {
		t.Fatalf("new holder Finish: %v", err)
	}
	// A released lease is no longer current either.
	wantCode(t, "released Renew", func() error { _, err := s.Renew(ctx, taken.Lease, time.Minute); return err }(), errs.LeaseLost)
}

func TestLeaseKeptWhenRenewedAndLostWhenNot(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	turn := mustClaim(t, s, "w1", 30*time.Second)
	l := turn.Lease
	for range 10 {
		clk.Advance(10 * time.Second)
		var err error
		if l, err = s.Renew(ctx, l, 30*time.Second); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if got, err := s.Claim(ctx, "w2", time.Minute); err != nil || got != nil {
			t.Fatalf("Claim of a live lease = %+v, %v", got, err)
		}
	}
	clk.Advance(30 * time.Second)
	got := mustClaim(t, s, "w2", time.Minute)
	if got.Lease.Worker != "w2" || got.Entry.Deliveries != 2 {
		t.Fatalf("after expiry: %+v", got)
	}
}

func TestFinishNotFoundWritesNothing(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "2"})
	turn := mustClaim(t, s, "w1", time.Minute)
	fin := sessions.Finish{
		History: []chat.Message{{Role: "assistant", Content: "r"}},
		Outbox:  []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "r"}},
	}
	for _, id := range []string{"", "nope", "99-1", "2-1" /* queued, not delivered */} {
		fin.EntryID = id
		wantCode(t, "Finish "+id, s.Finish(ctx, turn.Lease, fin), errs.NotFound)
	}
	if h, _ := s.History(ctx, "x"); len(h) != 0 {
		t.Fatalf("history written: %+v", h)
	}
	if p, _ := db.Outbox().Pending(ctx, 0); len(p) != 0 {
		t.Fatalf("outbox written: %+v", p)
	}
	fin.EntryID = turn.Entry.ID
	if err := s.Finish(ctx, turn.Lease, fin); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	wantCode(t, "second Finish", s.Finish(ctx, turn.Lease, fin), errs.NotFound)
	h, _ := s.History(ctx, "x")
	p, _ := db.Outbox().Pending(ctx, 0)
	if len(h) != 1 || len(p) != 1 {
		t.Fatalf("after Finish: history %d, outbox %d; want 1, 1", len(h), len(p))
	}
}

func TestDedupe(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(epoch)
	lim := sessions.Limits{DedupeWindow: time.Hour}
	db := openDB(t, r, clk, lim)
	s := db.Sessions()

	first := mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"})
	if dup := mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"}); !dup.Duplicate || dup.EntryID != first.EntryID {
		t.Fatalf("duplicate = %+v, want Duplicate of %s", dup, first.EntryID)
	}
	// The same message id in another conversation is another message.
	if other := mustAppend(t, s, sessions.Inbound{Conv: "y", MessageID: "m1", Text: "a"}); other.Duplicate {
		t.Fatalf("message id deduped across conversations")
	}
	db.Close()

	// Reopened (and, with a launched server, restarted), it still remembers.
	r.Restart(t)
	db = openDB(t, r, clk, lim)
	s = db.Sessions()
	if dup := mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"}); !dup.Duplicate {
		t.Fatalf("not a duplicate after reopening: %+v", dup)
	}
	// The window is read on the store's clock.
	clk.Advance(time.Hour + time.Millisecond)
	if again := mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"}); again.Duplicate {
		t.Fatalf("still a duplicate after the window: %+v", again)
	}
	var texts []string
	for {
		turn, err := s.Claim(ctx, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if turn == nil {
			break
		}
		texts = append(texts, turn.Lease.Conv+":"+turn.Entry.Text)
		for e := &turn.Entry; e != nil; e, _ = s.Next(ctx, turn.Lease) {
			if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: e.ID}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Release(ctx, turn.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if len(texts) != 2 {
		t.Fatalf("claimed %v, want one turn per conversation", texts)
	}
}

func TestDuplicateRepairsReadyIndex(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"})
	// Lose the conversation from the index, as a bug or an operator might.
	if err := db.client.Del(ctx, readyKey(db.prefix)).Err(); err != nil {
		t.Fatal(err)
	}
	if turn, _ := s.Claim(ctx, "w", time.Minute); turn != nil {
		t.Fatalf("claimed without an index entry")
	}
	mustAppend(t, s, sessions.Inbound{Conv: "x", MessageID: "m1", Text: "a"})
	if turn := mustClaim(t, s, "w", time.Minute); turn.Entry.Text != "a" {
		t.Fatalf("claimed %+v", turn.Entry)
	}
}

func TestRedeliveryAfterRelease(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "2", Priority: sessions.PriorityHigh})
	first := mustClaim(t, s, "w1", time.Minute)
	if first.Entry.Text != "2" {
		t.Fatalf("first = %q, want the high-priority entry", first.Entry.Text)
	}
	// A worker shutting down hands its in-flight entry back.
	if err := s.Release(ctx, first.Lease); err != nil {
		t.Fatal(err)
	}
	// A new high-priority entry does not overtake the unacked one.
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "3", Priority: sessions.PriorityHigh})
	again := mustClaim(t, s, "w2", time.Minute)
	if again.Entry.ID != first.Entry.ID || again.Entry.Deliveries != 2 {
		t.Fatalf("redelivered %+v, want %s with 2 deliveries", again.Entry, first.Entry.ID)
	}
	if !again.Entry.EnqueuedAt.Equal(epoch) {
		t.Fatalf("EnqueuedAt = %v, want %v", again.Entry.EnqueuedAt, epoch)
	}
}

func TestHistoryAndMeta(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	turn := mustClaim(t, s, "w", time.Minute)
	msgs := []chat.Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "t1", Name: "memory", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "t1", Content: "ok", At: epoch},
	}
	if err := s.AppendHistory(ctx, turn.Lease, msgs[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendHistory(ctx, turn.Lease); err != nil {
		t.Fatalf("empty AppendHistory: %v", err)
	}
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: msgs[2:]}); err != nil {
		t.Fatal(err)
	}
	got, err := s.History(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msgs, got); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	if err := s.ClearHistory(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.History(ctx, "x"); len(got) != 0 {
		t.Fatalf("history after clear: %+v", got)
	}

	for _, kv := range [][2]string{{"busy", "queue"}, {"goal", "ship"}, {"goal", ""}} {
		if err := s.SetMeta(ctx, "x", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := s.Meta(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"busy": "queue"}, meta); diff != "" {
		t.Fatalf("meta (-want +got):\n%s", diff)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	db := openDB(t, r, clock.NewFake(epoch), sessions.Limits{MaxEntryBytes: 1024})
	s := db.Sessions()
	_, err := s.Append(ctx, sessions.Inbound{Conv: " ", Text: "x"})
	wantCode(t, "empty conversation", err, errs.Invalid)
	_, err = s.Append(ctx, sessions.Inbound{Conv: "x", Text: "x", Kind: "robot"})
	wantCode(t, "unknown kind", err, errs.Invalid)
	_, err = s.Append(ctx, sessions.Inbound{Conv: "x", Text: strings.Repeat("a", 2048)})
	wantCode(t, "too large", err, errs.TooLarge)

	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "ok"})
	turn := mustClaim(t, s, "w", time.Minute)
	big := sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{{Target: outbox.Target{Platform: "p", Chat: "c"}, Text: strings.Repeat("a", 2048)}}}
	wantCode(t, "too large outbox", s.Finish(ctx, turn.Lease, big), errs.TooLarge)
	bad := sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{{Target: outbox.Target{Platform: "p"}}}}
	wantCode(t, "bad target", s.Finish(ctx, turn.Lease, bad), errs.Invalid)
	// Nothing was half-written: the entry is still pending and acks now.
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}); err != nil {
		t.Fatalf("Finish after rejected ones: %v", err)
	}
	// Conversation keys with hash-tag and escape characters stay apart.
	for _, c := range []string{"a}b", "a%7Db", "{x}", "%"} {
		mustAppend(t, s, sessions.Inbound{Conv: c, Text: c})
	}
	seen := map[string]bool{}
	for range 4 {
		turn := mustClaim(t, s, "w", time.Minute)
		if turn.Lease.Conv != turn.Entry.Text || seen[turn.Lease.Conv] {
			t.Fatalf("claimed %q with entry %q", turn.Lease.Conv, turn.Entry.Text)
		}
		seen[turn.Lease.Conv] = true
	}

	if _, err := Open(ctx, Options{URL: r.URL(), Prefix: "x{"}); !errs.Is(err, errs.Invalid) {
		t.Fatalf("Open with a brace in the prefix: %v", err)
	}
}

func TestClosedAndUnavailable(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, o := db.Sessions(), db.Outbox()
	l := sessions.Lease{Conv: "x", Token: 1}
	_, err := s.Append(ctx, sessions.Inbound{Conv: "x"})
	wantCode(t, "Append", err, errs.Closed)
	_, err = s.Claim(ctx, "w", time.Minute)
	wantCode(t, "Claim", err, errs.Closed)
	_, err = s.Next(ctx, l)
	wantCode(t, "Next", err, errs.Closed)
	wantCode(t, "Finish", s.Finish(ctx, l, sessions.Finish{EntryID: "1-1"}), errs.Closed)
	_, err = s.History(ctx, "x")
	wantCode(t, "History", err, errs.Closed)
	wantCode(t, "SetMeta", s.SetMeta(ctx, "x", "k", "v"), errs.Closed)
	_, _, err = o.Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "p", Chat: "c"}})
	wantCode(t, "Enqueue", err, errs.Closed)
	_, err = o.Claim(ctx, "w", []string{"p"}, 1, time.Minute)
	wantCode(t, "OutboxClaim", err, errs.Closed)
	_, err = o.Pending(ctx, 0)
	wantCode(t, "Pending", err, errs.Closed)
	wantCode(t, "Requeue", o.Requeue(ctx, "1"), errs.Closed)
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// A port nobody listens on.
	_, err = Open(ctx, Options{URL: "redis://127.0.0.1:1/0"})
	wantCode(t, "Open unreachable", err, errs.Unavailable)
}

func TestRestartKeepsEverything(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	if r.External() {
		t.Skip("an external server cannot be restarted")
	}
	clk := clock.NewFake(epoch)
	db := openDB(t, r, clk, sessions.Limits{})
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "1"})
	mustAppend(t, s, sessions.Inbound{Conv: "x", Text: "2"})
	turn := mustClaim(t, s, "w", time.Minute)
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{
		EntryID: turn.Entry.ID,
		History: []chat.Message{{Role: "assistant", Content: "r1"}},
		Outbox:  []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "r1"}},
	}); err != nil {
		t.Fatal(err)
	}
	next, err := s.Next(ctx, turn.Lease)
	if err != nil || next == nil {
		t.Fatalf("Next = %v, %v", next, err)
	}
	if err := s.SetMeta(ctx, "x", "k", "v"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	r.Restart(t)
	clk.Advance(2 * time.Minute) // the worker died with the restart
	db = openDB(t, r, clk, sessions.Limits{})
	s = db.Sessions()
	again := mustClaim(t, s, "w2", time.Minute)
	if again.Entry.ID != next.ID || again.Entry.Deliveries != 2 || again.Lease.Token <= turn.Lease.Token {
		t.Fatalf("after restart claimed %+v", again)
	}
	if h, _ := s.History(ctx, "x"); len(h) != 1 {
		t.Fatalf("history after restart: %+v", h)
	}
	if m, _ := s.Meta(ctx, "x"); m["k"] != "v" {
		t.Fatalf("meta after restart: %+v", m)
	}
	if p, _ := db.Outbox().Pending(ctx, 0); len(p) != 1 || p[0].Text != "r1" {
		t.Fatalf("outbox after restart: %+v", p)
	}
}

// TestManyConversationsManyWorkers runs conversations through concurrent
// workers on the real clock and checks per-conversation order, that no
// two turns of one conversation overlap, and that nothing is lost.
func TestManyConversationsManyWorkers(t *testing.T) {
	const convs, perConv, workers = 200, 25, 4
	ctx := context.Background()
	db := openDB(t, testkit.StartRedis(t), nil, sessions.Limits{})
	s := db.Sessions()
	for i := range perConv {
		for c := range convs {
			mustAppend(t, s, sessions.Inbound{Conv: fmt.Sprintf("c%d", c), Text: fmt.Sprint(i)})
		}
	}

	var mu sync.Mutex
	running := map[string]bool{}
	got := map[string][]string{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", w)
			for {
				turn, err := s.Claim(ctx, name, 30*time.Second)
				if err != nil {
					errc <- err
					return
				}
				if turn == nil {
					return
				}
				conv := turn.Lease.Conv
				mu.Lock()
				if running[conv] {
					mu.Unlock()
					errc <- fmt.Errorf("%s: two turns at once", conv)
					return
				}
				running[conv] = true
				got[conv] = append(got[conv], turn.Entry.Text)
				mu.Unlock()
				time.Sleep(time.Duration(len(conv)) * 10 * time.Microsecond) // the turn
				mu.Lock()
				running[conv] = false
				mu.Unlock()
				if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for c := range convs {
		conv := fmt.Sprintf("c%d", c)
		var want []string
		for i := range perConv {
			want = append(want, fmt.Sprint(i))
		}
		if diff := cmp.Diff(want, got[conv]); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", conv, diff)
		}
	}
	// Acked entries do not accumulate.
	for lane := range sessions.Lanes {
		n, err := db.client.XLen(ctx, db.convKey("c1", fmt.Sprint("q", lane))).Result()
		if err != nil || n != 0 {
			t.Fatalf("lane %d keeps %d entries (%v)", lane, n, err)
		}
	}
}

// A large entry a live lease holds its conversation with is told to Meta
// slimmed, what the running-turn mark reads of it, not whole.
func TestMetaTellsALargeRunningEntrySlimmed(t *testing.T) {
	db, _ := newFake(t)
	ctx := context.Background()
	s := db.Sessions()
	text := strings.Repeat("a long message ", 10_000)
	mustAppend(t, s, sessions.Inbound{Conv: "api:big", Text: text})
	mustClaim(t, s, "w1", time.Minute)
	tag, pfx := convTag("api:big"), db.convPfx("api:big")
	v, err := db.run(ctx, "test", scriptQMeta, []string{convKeyIn(pfx, tag, "state"), convKeyIn(pfx, tag, "meta")}, pfx, tag, db.nowArg())
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 4 {
		t.Fatalf("q_meta = %v, want the running entry", v)
	}
	if data := str(v[2]); len(data) > 2048 || !strings.HasPrefix(data, `{"text":"a long message a long`) {
		t.Errorf("q_meta told the entry in %d bytes (%.60q…), want it slimmed to its text's start", len(data), data)
	}
	m, err := s.Meta(ctx, "api:big")
	if err != nil || !strings.Contains(m[sessions.ConvMetaTurn], `"text":"a long message a long message`) {
		t.Errorf("Meta = %v, %v; want the running turn told with its text's start", m, err)
	}
}
