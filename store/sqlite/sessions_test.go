package sqlite

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func TestAppendClaimFinish(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()

	in := sessions.Inbound{
		Conv: "telegram:1", Sender: "u1", MessageID: "m1", Text: "hello",
		Attachments: []sessions.Attachment{{Name: "a.png", MIME: "image/png", Size: 3}},
		Meta:        map[string]string{"reply_to": "9"},
	}
	res := mustAppend(t, s, in)
	if res.Duplicate || res.EntryID == "" {
		t.Fatalf("Append = %+v, want a new entry", res)
	}

	clk.Advance(time.Second)
	turn := mustClaim(t, s, "w1", 30*time.Second)
	want := sessions.Entry{Inbound: in, ID: res.EntryID, EnqueuedAt: t0, Deliveries: 1}
	want.Kind = sessions.KindUser
	if diff := cmp.Diff(want, turn.Entry); diff != "" {
		t.Errorf("claimed entry (-want +got):\n%s", diff)
	}
	wantLease := sessions.Lease{Conv: "telegram:1", Worker: "w1", Token: 1, Expires: t0.Add(31 * time.Second)}
	if diff := cmp.Diff(wantLease, turn.Lease); diff != "" {
		t.Errorf("lease (-want +got):\n%s", diff)
	}
	if again, err := s.Claim(ctx, "w2", time.Minute); err != nil || again != nil {
		t.Fatalf("second Claim = %v, %v; want nothing while leased", again, err)
	}

	reply := outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Conv: "telegram:1", Text: "hi", Kind: "reply"}
	hist := []chat.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}}
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: hist, Outbox: []outbox.Message{reply}, Release: true}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	got, err := s.History(ctx, "telegram:1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hist, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	pending, err := d.Outbox().Pending(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].Text != "hi" || pending[0].Target != reply.Target {
		t.Errorf("pending = %+v, want the reply", pending)
	}
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Errorf("Claim after the queue emptied = %+v, %v; want nothing", turn, err)
	}
}

func TestLanes(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	const conv = "slack:C1"
	appendText := func(text string, kind sessions.Kind, p sessions.Priority) {
		mustAppend(t, s, sessions.Inbound{Conv: conv, Text: text, Kind: kind, Priority: p})
	}
	appendText("synthetic-low", sessions.KindSynthetic, sessions.PriorityLow)
	appendText("synthetic-1", sessions.KindSynthetic, sessions.PriorityNormal)
	appendText("user-low", sessions.KindUser, sessions.PriorityLow)
	appendText("user-1", "", sessions.PriorityNormal)
	appendText("synthetic-high", sessions.KindSynthetic, sessions.PriorityHigh)
	appendText("user-2", sessions.KindUser, sessions.PriorityNormal)
	appendText("user-high", sessions.KindUser, sessions.PriorityHigh)
	appendText("synthetic-2", sessions.KindSynthetic, sessions.PriorityNormal)

	turn := mustClaim(t, s, "w", time.Minute)
	got := []string{turn.Entry.Text}
	entry := &turn.Entry
	for {
		if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: entry.ID}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		var err error
		if entry, err = s.Next(ctx, turn.Lease); err != nil {
			t.Fatalf("Next: %v", err)
		}
		if entry == nil {
			break
		}
		got = append(got, entry.Text)
	}
	want := []string{"user-high", "user-1", "user-2", "user-low", "synthetic-high", "synthetic-1", "synthetic-2", "synthetic-low"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestNextReturnsUnackedEntryAgain(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "slow", Kind: sessions.KindSynthetic})
	turn := mustClaim(t, s, "w", time.Minute)
	// A user message arriving mid-turn waits for the turn boundary: the
	// unacked entry is still the one being worked on.
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "urgent"})
	e, err := s.Next(ctx, turn.Lease)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != turn.Entry.ID || e.Deliveries != 1 {
		t.Errorf("Next = %s (deliveries %d), want the unacked %s once delivered", e.Text, e.Deliveries, turn.Entry.Text)
	}
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: e.ID}); err != nil {
		t.Fatal(err)
	}
	if e, err = s.Next(ctx, turn.Lease); err != nil || e == nil || e.Text != "urgent" || e.Deliveries != 1 {
		t.Errorf("Next after ack = %+v, %v; want urgent, delivered once", e, err)
	}
}

func TestDedupe(t *testing.T) {
	d, clk, path := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	in := sessions.Inbound{Conv: "telegram:7", MessageID: "42", Text: "once"}
	first := mustAppend(t, s, in)

	for _, tc := range []struct {
		desc string
		in   sessions.Inbound
		dup  bool
	}{
		{"same id", in, true},
		{"same id, other text", sessions.Inbound{Conv: "telegram:7", MessageID: "42", Text: "edited"}, true},
		{"same id, other conversation", sessions.Inbound{Conv: "telegram:8", MessageID: "42", Text: "x"}, false},
		{"no id never dedupes", sessions.Inbound{Conv: "telegram:7", Text: "x"}, false},
	} {
		res := mustAppend(t, s, tc.in)
		if res.Duplicate != tc.dup {
			t.Errorf("%s: Duplicate = %v, want %v", tc.desc, res.Duplicate, tc.dup)
		}
		if tc.dup && res.EntryID != first.EntryID {
			t.Errorf("%s: EntryID = %s, want the first entry %s", tc.desc, res.EntryID, first.EntryID)
		}
	}

	// The first entry was handled and acked; a platform redelivering the
	// update after a restart still makes no second turn.
	turn := mustClaim(t, s, "w", time.Minute)
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openAt(t, path, clk, sessions.Limits{})
	s = d.Sessions()
	if res := mustAppend(t, s, in); !res.Duplicate || res.EntryID != first.EntryID {
		t.Errorf("after reopen: %+v, want duplicate of %s", res, first.EntryID)
	}

	clk.Advance(sessions.DefaultDedupeWindow + time.Second)
	if res := mustAppend(t, s, in); res.Duplicate {
		t.Errorf("after the dedupe window: %+v, want a new entry", res)
	}
}

func TestDedupePruned(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	const window = time.Hour
	d.lim.DedupeWindow = window
	for i := range pruneEvery {
		mustAppend(t, s, sessions.Inbound{Conv: "c", MessageID: fmt.Sprint("old", i), Text: "x"})
	}
	clk.Advance(2 * window)
	for i := range pruneEvery {
		mustAppend(t, s, sessions.Inbound{Conv: "c", MessageID: fmt.Sprint("new", i), Text: "x"})
	}
	var n int
	if err := d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM dedupe WHERE message_id LIKE 'old%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d expired message ids still remembered, want them pruned", n)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	d, clk, path := testDB(t)
	s, o, ctx := d.Sessions(), d.Outbox(), context.Background()
	for i := range 3 {
		mustAppend(t, s, sessions.Inbound{Conv: "c1", MessageID: fmt.Sprint(i), Text: fmt.Sprint("m", i)})
	}
	turn := mustClaim(t, s, "w", time.Minute)
	if err := s.AppendHistory(ctx, turn.Lease, chat.Message{Role: "user", Content: "m0"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta(ctx, "c1", "busy_input", "queue"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "slack", Chat: "C1", Thread: "t"}, Text: "report"}); err != nil {
		t.Fatal(err)
	}
	// The process dies holding the lease: nothing is acked or released.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = openAt(t, path, clk, sessions.Limits{})
	s, o = d.Sessions(), d.Outbox()
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Fatalf("Claim before the old lease ran out = %+v, %v; want nothing", turn, err)
	}
	clk.Advance(time.Minute)
	again := mustClaim(t, s, "w2", time.Minute)
	if again.Entry.Text != "m0" || again.Entry.Deliveries != 2 || again.Lease.Token != turn.Lease.Token+1 {
		t.Errorf("after reopen got %q deliveries %d token %d; want m0 redelivered (2) under token %d",
			again.Entry.Text, again.Entry.Deliveries, again.Lease.Token, turn.Lease.Token+1)
	}
	var texts []string
	e := &again.Entry
	for e != nil {
		texts = append(texts, e.Text)
		if err := s.Finish(ctx, again.Lease, sessions.Finish{EntryID: e.ID}); err != nil {
			t.Fatal(err)
		}
		var err error
		if e, err = s.Next(ctx, again.Lease); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"m0", "m1", "m2"}, texts); diff != "" {
		t.Errorf("entries after reopen (-want +got):\n%s", diff)
	}
	if h, err := s.History(ctx, "c1"); err != nil || len(h) != 1 || h[0].Content != "m0" {
		t.Errorf("history after reopen = %+v, %v", h, err)
	}
	if m, err := s.Meta(ctx, "c1"); err != nil || m["busy_input"] != "queue" {
		t.Errorf("meta after reopen = %v, %v", m, err)
	}
	if p, err := o.Pending(ctx, 10); err != nil || len(p) != 1 || p[0].Target.Thread != "t" {
		t.Errorf("outbox after reopen = %+v, %v", p, err)
	}
}

func TestFencing(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "one"})
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "two"})
	stale := mustClaim(t, s, "w1", 30*time.Second)

	// w1 stalls past its TTL; w2 takes the conversation over.
	clk.Advance(31 * time.Second)
	fresh := mustClaim(t, s, "w2", 30*time.Second)
	if fresh.Lease.Token <= stale.Lease.Token {
		t.Fatalf("takeover token %d not above %d", fresh.Lease.Token, stale.Lease.Token)
	}
	if fresh.Entry.ID != stale.Entry.ID || fresh.Entry.Deliveries != 2 {
		t.Errorf("takeover got %s (deliveries %d), want %s redelivered", fresh.Entry.ID, fresh.Entry.Deliveries, stale.Entry.ID)
	}

	reply := outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "stale reply"}
	l := stale.Lease
	_, err := s.Next(ctx, l)
	wantCode(t, "Next", err, errs.LeaseLost)
	_, err = s.Renew(ctx, l, time.Minute)
	wantCode(t, "Renew", err, errs.LeaseLost)
	wantCode(t, "AppendHistory", s.AppendHistory(ctx, l, chat.Message{Role: "assistant", Content: "stale"}), errs.LeaseLost)
	wantCode(t, "Finish", s.Finish(ctx, l, sessions.Finish{EntryID: stale.Entry.ID, Outbox: []outbox.Message{reply}, History: []chat.Message{{Role: "assistant"}}}), errs.LeaseLost)
	wantCode(t, "Finish with bad id", s.Finish(ctx, l, sessions.Finish{EntryID: "nope"}), errs.LeaseLost)
	wantCode(t, "Release", s.Release(ctx, l), errs.LeaseLost)

	if h, _ := s.History(ctx, "c"); len(h) != 0 {
		t.Errorf("a fenced worker wrote history: %+v", h)
	}
	if p, _ := d.Outbox().Pending(ctx, 0); len(p) != 0 {
		t.Errorf("a fenced worker wrote the outbox: %+v", p)
	}
	// The new holder is untouched by all of that.
	if err := s.Finish(ctx, fresh.Lease, sessions.Finish{EntryID: fresh.Entry.ID}); err != nil {
		t.Fatalf("new holder's Finish: %v", err)
	}
	if e, err := s.Next(ctx, fresh.Lease); err != nil || e == nil || e.Text != "two" {
		t.Errorf("new holder's Next = %+v, %v", e, err)
	}
}

func TestExpiredLeaseNotTakenOverStillCommits(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "one"})
	turn := mustClaim(t, s, "w", 10*time.Second)
	clk.Advance(time.Minute)
	l, err := s.Renew(ctx, turn.Lease, 10*time.Second)
	if err != nil {
		t.Fatalf("Renew of an expired lease nobody took: %v", err)
	}
	if !l.Expires.Equal(clk.Now().Add(10*time.Second)) || l.Token != turn.Lease.Token {
		t.Errorf("renewed lease = %+v", l)
	}
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Errorf("Claim of a renewed lease = %+v, %v; want nothing", turn, err)
	}
	clk.Advance(time.Minute)
	if err := s.Finish(ctx, l, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
		t.Errorf("Finish of an expired lease nobody took: %v", err)
	}
}

func TestLeaseKeptWhenRenewed(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "slow model"})
	turn := mustClaim(t, s, "w1", 30*time.Second)
	l := turn.Lease
	for range 10 {
		clk.Advance(10 * time.Second)
		var err error
		if l, err = s.Renew(ctx, l, 30*time.Second); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if other, err := s.Claim(ctx, "w2", 30*time.Second); err != nil || other != nil {
			t.Fatalf("a live, renewing holder was preempted: %+v, %v", other, err)
		}
	}
	clk.Advance(31 * time.Second)
	if other := mustClaim(t, s, "w2", 30*time.Second); other.Entry.ID != turn.Entry.ID {
		t.Errorf("after the holder stopped renewing, w2 got %s, want %s", other.Entry.ID, turn.Entry.ID)
	}
}

func TestReleaseThenWritesAreLost(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "x"})
	turn := mustClaim(t, s, "w", time.Minute)
	if err := s.Release(ctx, turn.Lease); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "AppendHistory after Release", s.AppendHistory(ctx, turn.Lease, chat.Message{Role: "user"}), errs.LeaseLost)
	wantCode(t, "Finish after Release", s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}), errs.LeaseLost)
	_, err := s.Renew(ctx, turn.Lease, time.Minute)
	wantCode(t, "Renew after Release", err, errs.LeaseLost)
	// The released entry is redelivered, counted as a second delivery.
	if again := mustClaim(t, s, "w", time.Minute); again.Entry.ID != turn.Entry.ID || again.Entry.Deliveries != 2 {
		t.Errorf("after Release: %+v", again.Entry)
	}
}

func TestClaimOrder(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	// The clock stands still: readiness order alone must decide.
	for _, c := range []string{"c", "a", "b"} {
		mustAppend(t, s, sessions.Inbound{Conv: c, Text: c + "1"})
		mustAppend(t, s, sessions.Inbound{Conv: c, Text: c + "2"})
	}
	first := mustClaim(t, s, "w", time.Minute)
	if first.Lease.Conv != "c" {
		t.Fatalf("first Claim took %s, want c (ready longest)", first.Lease.Conv)
	}
	// c finishes a turn with more waiting: it goes behind a and b.
	if err := s.Finish(ctx, first.Lease, sessions.Finish{EntryID: first.Entry.ID, Release: true}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		turn, err := s.Claim(ctx, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if turn == nil {
			break
		}
		got = append(got, turn.Entry.Text)
		if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a1", "b1", "c2", "a2", "b2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
}

func TestDrainedConversationLeavesReadyIndex(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "x"})
	turn := mustClaim(t, s, "w", 10*time.Second)
	// The worker acks but dies before releasing.
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if turn, err := s.Claim(ctx, "w2", time.Minute); err != nil || turn != nil {
		t.Fatalf("Claim of a drained conversation = %+v, %v; want nothing", turn, err)
	}
	var ready int
	if err := d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM conversations WHERE due IS NOT NULL`).Scan(&ready); err != nil {
		t.Fatal(err)
	}
	if ready != 0 {
		t.Errorf("%d conversations still marked ready", ready)
	}
	// And it becomes ready again with the next message.
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "y"})
	if again := mustClaim(t, s, "w2", time.Minute); again.Entry.Text != "y" || again.Lease.Token != turn.Lease.Token+1 {
		t.Errorf("after a new message: %+v", again)
	}
}

func TestFinishErrorsWriteNothing(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "x"})
	other := mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "y"})
	turn := mustClaim(t, s, "w", time.Minute)
	good := outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "ok"}
	big := strings.Repeat("x", sessions.DefaultMaxEntryBytes)
	for _, tc := range []struct {
		desc string
		f    sessions.Finish
		code errs.Code
	}{
		{"an entry not delivered", sessions.Finish{EntryID: other.EntryID, Outbox: []outbox.Message{good}}, errs.NotFound},
		{"no such entry", sessions.Finish{EntryID: "999999", Outbox: []outbox.Message{good}}, errs.NotFound},
		{"an id that is no id", sessions.Finish{EntryID: "", Outbox: []outbox.Message{good}}, errs.NotFound},
		{"a bad target", sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{good, {Text: "where?"}}}, errs.Invalid},
		{"a reply too large", sessions.Finish{EntryID: turn.Entry.ID, Outbox: []outbox.Message{good, {Target: good.Target, Text: big}}}, errs.TooLarge},
		{"history too large", sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{{Role: "user"}, {Role: "assistant", Content: big}}}, errs.TooLarge},
	} {
		wantCode(t, tc.desc, s.Finish(ctx, turn.Lease, tc.f), tc.code)
	}
	if h, _ := s.History(ctx, "c"); len(h) != 0 {
		t.Errorf("history written by failed Finishes: %d messages", len(h))
	}
	if p, _ := d.Outbox().Pending(ctx, 0); len(p) != 0 {
		t.Errorf("outbox written by failed Finishes: %+v", p)
	}
	if e, err := s.Next(ctx, turn.Lease); err != nil || e == nil || e.ID != turn.Entry.ID {
		t.Errorf("entry after failed Finishes = %+v, %v; want it still unacked", e, err)
	}
}

func TestBadInput(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	big := strings.Repeat("x", sessions.DefaultMaxEntryBytes)
	for _, tc := range []struct {
		desc string
		in   sessions.Inbound
		code errs.Code
	}{
		{"empty conversation key", sessions.Inbound{Text: "x"}, errs.Invalid},
		{"blank conversation key", sessions.Inbound{Conv: "  ", Text: "x"}, errs.Invalid},
		{"control character in key", sessions.Inbound{Conv: "a\nb", Text: "x"}, errs.Invalid},
		{"unknown kind", sessions.Inbound{Conv: "c", Text: "x", Kind: "robot"}, errs.Invalid},
		{"too large", sessions.Inbound{Conv: "c", Text: big}, errs.TooLarge},
	} {
		_, err := s.Append(ctx, tc.in)
		wantCode(t, tc.desc, err, tc.code)
	}
	if turn, err := s.Claim(ctx, "w", time.Minute); err != nil || turn != nil {
		t.Errorf("bad input left something to claim: %+v, %v", turn, err)
	}
	_, err := s.History(ctx, "")
	wantCode(t, "History of empty key", err, errs.Invalid)
	wantCode(t, "SetMeta with empty key", s.SetMeta(ctx, "c", "", "v"), errs.Invalid)
	wantCode(t, "SetMeta too large", s.SetMeta(ctx, "c", "k", big), errs.TooLarge)

	small := openAt(t, t.TempDir()+"/small.db", nil, sessions.Limits{MaxEntryBytes: 100})
	_, err = small.Sessions().Append(ctx, sessions.Inbound{Conv: "c", Text: strings.Repeat("y", 100)})
	wantCode(t, "over a configured limit", err, errs.TooLarge)
}

func TestHistoryAndMeta(t *testing.T) {
	d, _, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "x"})
	turn := mustClaim(t, s, "w", time.Minute)
	msgs := []chat.Message{
		{Role: "user", Content: "weather?"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "t1", Name: "weather", Arguments: `{"city":"Oslo"}`}}},
		{Role: "tool", ToolCallID: "t1", Name: "weather", Content: "rain", At: t0},
	}
	if err := s.AppendHistory(ctx, turn.Lease, msgs[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendHistory(ctx, turn.Lease, msgs[2]); err != nil {
		t.Fatal(err)
	}
	got, err := s.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(msgs, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if h, err := s.History(ctx, "other"); err != nil || len(h) != 0 {
		t.Errorf("history of another conversation = %+v, %v", h, err)
	}
	if err := s.ClearHistory(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if h, err := s.History(ctx, "c"); err != nil || len(h) != 0 {
		t.Errorf("history after ClearHistory = %+v, %v", h, err)
	}

	for _, kv := range [][2]string{{"mode", "queue"}, {"goal", "ship"}, {"mode", "interrupt"}, {"goal", ""}} {
		if err := s.SetMeta(ctx, "c", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	// The lease the history was written under still holds c: Meta tells
	// its turn beside what was written.
	wantMeta := map[string]string{"mode": "interrupt", sessions.ConvMetaTurn: sessions.TurnMark(turn.Entry.ID, turn.Lease.Expires.Add(-time.Minute), turn.Entry.Inbound)}
	if m, err := s.Meta(ctx, "c"); err != nil || !cmp.Equal(m, wantMeta) {
		t.Errorf("Meta = %v, %v; want %v", m, err, wantMeta)
	}
	if m, err := s.Meta(ctx, "nobody"); err != nil || len(m) != 0 {
		t.Errorf("Meta of unknown conversation = %v, %v", m, err)
	}
}

// TestWorkersKeepOrder runs conversations through concurrent workers and
// checks each conversation ran in order, one turn at a time, nothing lost.
func TestWorkersKeepOrder(t *testing.T) {
	d, err := Open(t.TempDir()+"/herald.db", Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, ctx := d.Sessions(), context.Background()
	const convs, perConv, workers = 60, 10, 4
	var appends sync.WaitGroup
	for c := range convs {
		appends.Go(func() {
			for i := range perConv {
				mustAppend(t, s, sessions.Inbound{Conv: fmt.Sprint("conv", c), MessageID: fmt.Sprint(i), Text: fmt.Sprint(i)})
			}
		})
	}

	var (
		mu      sync.Mutex
		seen    = map[string][]string{}
		running = map[string]bool{}
		done    atomic.Int64
	)
	deadline := time.Now().Add(time.Minute)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			worker := fmt.Sprint("w", w)
			for done.Load() < convs*perConv && time.Now().Before(deadline) {
				turn, err := s.Claim(ctx, worker, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if turn == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				conv := turn.Lease.Conv
				mu.Lock()
				if running[conv] {
					t.Errorf("two turns of %s at once", conv)
				}
				running[conv] = true
				seen[conv] = append(seen[conv], turn.Entry.Text)
				mu.Unlock()
				runtime.Gosched() // the turn runs; let others try to overlap it
				mu.Lock()
				running[conv] = false
				mu.Unlock()
				if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	appends.Wait()
	wg.Wait()
	var want []string
	for i := range perConv {
		want = append(want, fmt.Sprint(i))
	}
	for c := range convs {
		conv := fmt.Sprint("conv", c)
		if diff := cmp.Diff(want, seen[conv]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", conv, diff)
		}
	}
}

func TestConcurrentClaimsNeverShareALease(t *testing.T) {
	d, clk, _ := testDB(t)
	s := d.Sessions()
	for c := range 5 {
		mustAppend(t, s, sessions.Inbound{Conv: fmt.Sprint("c", c), Text: "x"})
	}
	for round := range 3 {
		var mu sync.Mutex
		holders := map[string]int{}
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				turn, err := s.Claim(context.Background(), fmt.Sprint("w", w), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if turn != nil {
					mu.Lock()
					holders[turn.Lease.Conv]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(holders) != 5 {
			t.Errorf("round %d: %d conversations claimed, want 5", round, len(holders))
		}
		for conv, n := range holders {
			if n != 1 {
				t.Errorf("round %d: %s held by %d workers", round, conv, n)
			}
		}
		clk.Advance(2 * time.Minute) // every holder dies
	}
}

func TestTwoStoresOnOneFile(t *testing.T) {
	d1, clk, path := testDB(t)
	d2 := openAt(t, path, clk, sessions.Limits{})
	ctx := context.Background()
	mustAppend(t, d1.Sessions(), sessions.Inbound{Conv: "c", MessageID: "1", Text: "x"})
	if res := mustAppend(t, d2.Sessions(), sessions.Inbound{Conv: "c", MessageID: "1", Text: "x"}); !res.Duplicate {
		t.Errorf("second process appended a duplicate")
	}
	turn := mustClaim(t, d2.Sessions(), "w2", time.Minute)
	if other, err := d1.Sessions().Claim(ctx, "w1", time.Minute); err != nil || other != nil {
		t.Errorf("both processes hold c: %+v, %v", other, err)
	}
	if err := d1.Sessions().Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
		t.Errorf("Finish through the other process: %v", err)
	}
}

func TestSlowHolderOfADrainedConversation(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "x"})
	turn := mustClaim(t, s, "w", 10*time.Second)
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if other, err := s.Claim(ctx, "w2", time.Minute); err != nil || other != nil {
		t.Fatalf("Claim = %+v, %v; want nothing", other, err)
	}
	// Nobody took the lease over: the slow holder may still use it.
	l, err := s.Renew(ctx, turn.Lease, 10*time.Second)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := s.AppendHistory(ctx, l, chat.Message{Role: "assistant", Content: "late"}); err != nil {
		t.Errorf("AppendHistory: %v", err)
	}
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "y"})
	if other, err := s.Claim(ctx, "w2", time.Minute); err != nil || other != nil {
		t.Errorf("Claim of a renewed lease = %+v, %v; want nothing", other, err)
	}
	if e, err := s.Next(ctx, l); err != nil || e == nil || e.Text != "y" {
		t.Errorf("holder's Next = %+v, %v; want y", e, err)
	}
}
