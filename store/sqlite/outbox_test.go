package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func msgTo(platform, text string) outbox.Message {
	// Each text its own chat: a target whose messages wait for none of the
	// others.
	return outbox.Message{Target: outbox.Target{Platform: platform, Chat: text}, Text: text, Kind: "reply"}
}

func mustEnqueue(t *testing.T, o outbox.Store, m outbox.Message) string {
	t.Helper()
	id, dup, err := o.Enqueue(context.Background(), m)
	if err != nil || dup {
		t.Fatalf("Enqueue(%q) = %s, %v, %v", m.Text, id, dup, err)
	}
	return id
}

func claimTexts(cs []outbox.Claimed) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Text)
	}
	return out
}

func messageTexts(ms []outbox.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

func TestOutboxLifecycle(t *testing.T) {
	d, clk, _ := testDB(t)
	o, ctx := d.Outbox(), context.Background()

	mustEnqueue(t, o, msgTo("telegram", "a"))
	clk.Advance(time.Millisecond)
	mustEnqueue(t, o, msgTo("discord", "b"))
	clk.Advance(time.Millisecond)
	later := msgTo("telegram", "later")
	later.NextAttempt = clk.Now().Add(time.Hour)
	mustEnqueue(t, o, later)
	clk.Advance(time.Millisecond)
	mustEnqueue(t, o, msgTo("telegram", "c"))

	// The Slack route has no adapter: its message is not claimed.
	got, err := o.Claim(ctx, "d1", []string{"telegram", "slack", "telegram"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "c"}, claimTexts(got)); diff != "" {
		t.Fatalf("claimed (-want +got):\n%s", diff)
	}
	a, c := got[0], got[1]
	if a.Token == 0 || !a.Expires.Equal(clk.Now().Add(time.Minute)) || a.Attempts != 0 || !a.CreatedAt.Equal(t0) {
		t.Errorf("claim = %+v", a)
	}

	if err := o.Ack(ctx, a); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	wantCode(t, "second Ack", o.Ack(ctx, a), errs.NotFound)

	if err := o.Release(ctx, c, clk.Now().Add(10*time.Second), "429 retry after 10s"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantCode(t, "Ack after Release", o.Ack(ctx, c), errs.LeaseLost)
	if got, _ := o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute); len(got) != 0 {
		t.Errorf("claimed %v before the retry time", claimTexts(got))
	}
	clk.Advance(10 * time.Second)
	got, err = o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute)
	if err != nil || len(got) != 1 || got[0].Attempts != 1 || got[0].LastError != "429 retry after 10s" || got[0].Token <= c.Token {
		t.Fatalf("after Release: %+v, %v", got, err)
	}
	c = got[0]

	if err := o.Postpone(ctx, c, time.Time{}); err != nil {
		t.Fatalf("Postpone: %v", err)
	}
	got, _ = o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute)
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("after Postpone: %+v, want the message due at once, attempts unchanged", got)
	}
	c = got[0]

	if err := o.Dead(ctx, c, "chat not found"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	dead, err := o.DeadLetters(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].ID != c.ID || dead[0].LastError != "chat not found" {
		t.Fatalf("DeadLetters = %+v, %v", dead, err)
	}
	pending, _ := o.Pending(ctx, 0)
	if diff := cmp.Diff([]string{"b", "later"}, messageTexts(pending)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}

	if err := o.Requeue(ctx, c.ID); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	wantCode(t, "Requeue of a pending message", o.Requeue(ctx, c.ID), errs.NotFound)
	wantCode(t, "Requeue of nothing", o.Requeue(ctx, "12345"), errs.NotFound)
	got, _ = o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute)
	if len(got) != 1 || got[0].ID != c.ID || got[0].Attempts != 0 {
		t.Errorf("after Requeue: %+v, want it due now with attempts reset", got)
	}
	if dead, _ := o.DeadLetters(ctx, 0); len(dead) != 0 {
		t.Errorf("still dead after Requeue: %+v", dead)
	}
}

func TestOutboxClaimFencing(t *testing.T) {
	d, clk, _ := testDB(t)
	o, ctx := d.Outbox(), context.Background()
	mustEnqueue(t, o, msgTo("slack", "x"))
	first, err := o.Claim(ctx, "d1", []string{"slack"}, 1, 30*time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("Claim = %+v, %v", first, err)
	}
	if again, _ := o.Claim(ctx, "d2", []string{"slack"}, 1, 30*time.Second); len(again) != 0 {
		t.Fatalf("a held claim was claimed again: %+v", again)
	}
	clk.Advance(31 * time.Second)
	second, err := o.Claim(ctx, "d2", []string{"slack"}, 1, 30*time.Second)
	if err != nil || len(second) != 1 || second[0].Token <= first[0].Token {
		t.Fatalf("after expiry: %+v, %v", second, err)
	}
	stale := first[0]
	wantCode(t, "stale Ack", o.Ack(ctx, stale), errs.LeaseLost)
	wantCode(t, "stale Release", o.Release(ctx, stale, clk.Now(), "x"), errs.LeaseLost)
	wantCode(t, "stale Postpone", o.Postpone(ctx, stale, clk.Now()), errs.LeaseLost)
	wantCode(t, "stale Dead", o.Dead(ctx, stale, "x"), errs.LeaseLost)
	if err := o.Ack(ctx, second[0]); err != nil {
		t.Fatalf("current Ack: %v", err)
	}
	wantCode(t, "Ack of a bad id", o.Ack(ctx, outbox.Claimed{Message: outbox.Message{ID: "x"}}), errs.NotFound)

	// A claim that ran out but that nobody took may still be acked.
	mustEnqueue(t, o, msgTo("slack", "y"))
	got, _ := o.Claim(ctx, "d1", []string{"slack"}, 1, time.Second)
	clk.Advance(time.Minute)
	if err := o.Ack(ctx, got[0]); err != nil {
		t.Errorf("Ack of an expired claim nobody took: %v", err)
	}
}

func TestOutboxIdempotency(t *testing.T) {
	d, clk, path := testDB(t)
	o, ctx := d.Outbox(), context.Background()
	m := msgTo("telegram", "cron report")
	m.IdempotencyKey = "cron:daily:2026-03-01"
	id := mustEnqueue(t, o, m)
	// Delivered and acked: the key is still remembered, also after reopening.
	got, _ := o.Claim(ctx, "d", []string{"telegram"}, 1, time.Minute)
	if err := o.Ack(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	o = openAt(t, path, clk, sessions.Limits{}).Outbox()
	again, dup, err := o.Enqueue(ctx, m)
	if err != nil || !dup || again != id {
		t.Errorf("second Enqueue = %s, %v, %v; want duplicate of %s", again, dup, err, id)
	}
	clk.Advance(sessions.DefaultDedupeWindow + time.Second)
	if _, dup, err := o.Enqueue(ctx, m); err != nil || dup {
		t.Errorf("Enqueue after the window: dup %v, %v", dup, err)
	}
}

func TestOutboxClaimMergesPlatformsInDueOrder(t *testing.T) {
	d, clk, _ := testDB(t)
	o, ctx := d.Outbox(), context.Background()
	for i := range 6 {
		mustEnqueue(t, o, msgTo([]string{"telegram", "slack", "discord"}[i%3], fmt.Sprint(i)))
		clk.Advance(time.Millisecond)
	}
	got, err := o.Claim(ctx, "d", []string{"discord", "telegram", "slack"}, 4, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3"}, claimTexts(got)); diff != "" {
		t.Errorf("claim order (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		desc      string
		platforms []string
		max       int
	}{
		{"no platforms", nil, 5},
		{"max zero", []string{"telegram"}, 0},
	} {
		if got, err := o.Claim(ctx, "d", tc.platforms, tc.max, time.Minute); err != nil || len(got) != 0 {
			t.Errorf("%s: %+v, %v", tc.desc, got, err)
		}
	}
}

func TestClosedStore(t *testing.T) {
	d, _, _ := testDB(t)
	s, o, ctx := d.Sessions(), d.Outbox(), context.Background()
	l := sessions.Lease{Conv: "c", Token: 1}
	c := outbox.Claimed{Message: outbox.Message{ID: "1"}, Token: 1}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"Append":        func() error { _, err := s.Append(ctx, sessions.Inbound{Conv: "c", Text: "x"}); return err },
		"Claim":         func() error { _, err := s.Claim(ctx, "w", time.Minute); return err },
		"Next":          func() error { _, err := s.Next(ctx, l); return err },
		"Renew":         func() error { _, err := s.Renew(ctx, l, time.Minute); return err },
		"Release":       func() error { return s.Release(ctx, l) },
		"Finish":        func() error { return s.Finish(ctx, l, sessions.Finish{EntryID: "1"}) },
		"AppendHistory": func() error { return s.AppendHistory(ctx, l) },
		"History":       func() error { _, err := s.History(ctx, "c"); return err },
		"ClearHistory":  func() error { return s.ClearHistory(ctx, "c") },
		"Meta":          func() error { _, err := s.Meta(ctx, "c"); return err },
		"SetMeta":       func() error { return s.SetMeta(ctx, "c", "k", "v") },
		"Enqueue":       func() error { _, _, err := o.Enqueue(ctx, msgTo("telegram", "x")); return err },
		"outbox.Claim":  func() error { _, err := o.Claim(ctx, "w", []string{"telegram"}, 1, time.Minute); return err },
		"Ack":           func() error { return o.Ack(ctx, c) },
		"outbox.Release": func() error {
			return o.Release(ctx, c, time.Time{}, "x")
		},
		"Postpone":    func() error { return o.Postpone(ctx, c, time.Time{}) },
		"Dead":        func() error { return o.Dead(ctx, c, "x") },
		"Pending":     func() error { _, err := o.Pending(ctx, 1); return err },
		"DeadLetters": func() error { _, err := o.DeadLetters(ctx, 1); return err },
		"Requeue":     func() error { return o.Requeue(ctx, "1") },
	}
	for name, call := range calls {
		wantCode(t, name, call(), errs.Closed)
	}
}

// TestCloseWhileBusy closes the store under concurrent writers: each call
// either commits or reports Closed, and nothing hangs.
func TestCloseWhileBusy(t *testing.T) {
	d, _, path := testDB(t)
	s := d.Sessions()
	errc := make(chan error, 400)
	for w := range 8 {
		go func() {
			for i := range 50 {
				_, err := s.Append(context.Background(), sessions.Inbound{Conv: fmt.Sprint("c", w), MessageID: fmt.Sprint(i), Text: "x"})
				errc <- err
			}
		}()
	}
	time.Sleep(5 * time.Millisecond)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for range 400 {
		switch err := <-errc; {
		case err == nil:
			ok++
		case !errs.Is(err, errs.Closed):
			t.Errorf("Append during Close: %v", err)
		}
	}
	// Every Append that reported success is there after reopening.
	d = openAt(t, path, nil, sessions.Limits{})
	var n int
	if err := d.rdb.QueryRow(`SELECT count(*) FROM entries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != ok {
		t.Errorf("%d entries on disk, %d Appends succeeded", n, ok)
	}
}

func TestOpenOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		desc string
		path string
		opts Options
		code errs.Code
	}{
		{"empty path", "", Options{}, errs.Invalid},
		{"bad synchronous", dir + "/a.db", Options{Synchronous: "OFF"}, errs.Invalid},
		{"normal", dir + "/deep/er/b.db", Options{Synchronous: "normal"}, ""},
		{"path with URI characters", dir + "/we?ird#name%.db", Options{}, ""},
	} {
		d, err := Open(tc.path, tc.opts)
		if errs.CodeOf(err) != tc.code {
			t.Errorf("%s: err = %v, want code %q", tc.desc, err, tc.code)
		}
		if d != nil {
			d.Close()
		}
	}
}

func TestSchemaVersion(t *testing.T) {
	d, _, path := testDB(t)
	var v int
	if err := d.rdb.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("user_version = %d, %v; want %d", v, err, len(migrations))
	}
	d.Close()
	// A file from a newer herald is refused rather than misread.
	d2 := openAt(t, path, nil, sessions.Limits{})
	if _, err := d2.wconn.ExecContext(context.Background(), fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations)+1)); err != nil {
		t.Fatal(err)
	}
	d2.Close()
	if _, err := Open(path, Options{}); err == nil {
		t.Error("Open of a newer schema succeeded")
	}
}

// TestCommitModes checks the write connection runs bookkeeping batches
// without waiting for the disk and is back to FULL for durable ones.
func TestCommitModes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		desc              string
		sync              string
		durable, bookkept int
	}{
		{"FULL store", "FULL", 2, 1},
		{"NORMAL store", "NORMAL", 1, 1},
	} {
		d, err := Open(t.TempDir()+"/herald.db", Options{Synchronous: tc.sync})
		if err != nil {
			t.Fatal(err)
		}
		level := func(mode commitMode) int {
			var v int
			err := d.w.do(ctx, "test", mode, func(*tx) error {
				return d.wconn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&v)
			})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		for _, step := range []struct {
			mode commitMode
			want int
		}{{bookkeeping, tc.bookkept}, {bookkeeping, tc.bookkept}, {durable, tc.durable}, {bookkeeping, tc.bookkept}, {durable, tc.durable}} {
			if got := level(step.mode); got != step.want {
				t.Errorf("%s: mode %d ran with synchronous=%d, want %d", tc.desc, step.mode, got, step.want)
			}
		}
		d.Close()
	}
}
