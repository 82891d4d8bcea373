package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// TestAbsorbedLaneCounts checks the state hash after a Finish that absorbs
// entries of two lanes: a count left too high makes an idle conversation
// look busy, one too low hides an entry from Claim.
func TestAbsorbedLaneCounts(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "1"})
	a := mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "2"}).EntryID
	b := mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "3", Kind: sessions.KindSynthetic}).EntryID
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "4", Kind: sessions.KindSynthetic})
	turn := mustClaim(t, s, "w1", time.Minute)
	if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Absorbed: []string{a, b}}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	tag := convTag("c")
	counts, err := db.client.HMGet(ctx, db.convKey(tag, "state"), "n0", "n1", "n2", "n3", "n4", "n5", "lanes", "pend").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Normal priority: user entries in lane 1, synthetic ones in lane 4.
	want := []any{nil, "0", nil, nil, "1", nil, "4", ""}
	if d := cmp.Diff(want, counts); d != "" {
		t.Errorf("state n0…n5, lanes, pend (-want +got):\n%s", d)
	}
	for lane, n := range map[string]int64{"q1": 0, "q4": 1} {
		if got := db.client.XLen(ctx, db.convKey(tag, lane)).Val(); got != n {
			t.Errorf("XLEN %s = %d, want %d", lane, got, n)
		}
	}
	// Held with an entry left: indexed at the lease's expiry, so it is
	// found again if the holder dies.
	if score, err := db.client.ZScore(ctx, readyKey(db.prefix), tag).Result(); err != nil || int64(score) != turn.Lease.Expires.UnixMilli() {
		t.Errorf("ready score of a held conversation with an entry left = %v (%v), want its lease expiry %d", score, err, turn.Lease.Expires.UnixMilli())
	}
}

// TestLibraryLoadedAgain checks that a server that lost the scripts'
// library (FUNCTION FLUSH, or a restart without persistence) gets it back
// on the next call, which then runs once.
func TestLibraryLoadedAgain(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "1"})
	if err := db.client.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, sessions.Inbound{Conv: "c", Text: "2"})
	turn := mustClaim(t, s, "w1", time.Minute)
	next, err := s.FinishAndClaim(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, "w1", time.Minute)
	if err != nil || next == nil || next.Entry.Text != "2" {
		t.Fatalf("FinishAndClaim = %+v, %v; want the second entry", next, err)
	}
}

// TestSignalsTrimmed checks that the signals stream forgets what is older
// than the keep window, whatever its length.
func TestSignalsTrimmed(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Signals()
	for range 150 {
		if err := s.Signal(ctx, signals.Signal{Conv: "c", Kind: signals.Stop}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(signalsKeep + time.Minute)
	if err := s.Signal(ctx, signals.Signal{Conv: "c", Kind: signals.Interrupt}); err != nil {
		t.Fatal(err)
	}
	if n := db.client.XLen(ctx, db.signalsKey(0)).Val(); n != 1 {
		t.Errorf("XLEN signals = %d, want 1: the older ones are past the keep window", n)
	}
}

// TestSignalIDsFollowTheStoreClock checks that signal ids are made from
// the store's clock, so that trimming and ids agree on the time, and keep
// growing when that clock stands still or steps back, as two processes'
// clocks may.
func TestSignalIDsFollowTheStoreClock(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	s := db.Signals()
	_, from, err := s.SignalsAfter(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, 0, -time.Minute, time.Second} {
		clk.Advance(step)
		if err := s.Signal(ctx, signals.Signal{Conv: "c", Kind: signals.Stop}); err != nil {
			t.Fatalf("Signal after a step of %v: %v", step, err)
		}
	}
	got, _, err := s.SignalsAfter(ctx, from, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cursors []string
	for _, sig := range got {
		cursors = append(cursors, sig.Cursor)
	}
	ms := epoch.UnixMilli()
	want := []string{fmt.Sprintf("%d-0", ms), fmt.Sprintf("%d-1", ms), fmt.Sprintf("%d-2", ms), fmt.Sprintf("%d-3", ms)}
	if d := cmp.Diff(want, cursors); d != "" {
		t.Errorf("signal cursors (-want +got):\n%s", d)
	}
}

// TestAppendClaimedEntryKeptInTheState checks where an entry AppendClaim
// delivered at once lives: in the state hash, never in its lane's stream,
// found there again after its lease is given back, and gone from both
// once acked.
func TestAppendClaimedEntryKeptInTheState(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	tag := convTag("c")
	_, turn, err := s.AppendClaim(ctx, sessions.Inbound{Conv: "c", Text: "hello"}, "w1", time.Minute)
	if err != nil || turn == nil {
		t.Fatalf("AppendClaim = %v, %v; want a turn", turn, err)
	}
	stream := db.convKey(tag, "q1")
	if n := db.client.XLen(ctx, stream).Val(); n != 0 {
		t.Errorf("XLEN q1 = %d after AppendClaim, want 0", n)
	}
	if err := s.Release(ctx, turn.Lease); err != nil {
		t.Fatal(err)
	}
	again := mustClaim(t, s, "w2", time.Minute)
	if again.Entry.ID != turn.Entry.ID || again.Entry.Text != "hello" || again.Entry.Deliveries != 2 ||
		!again.Entry.EnqueuedAt.Equal(turn.Entry.EnqueuedAt) {
		t.Errorf("claimed again %+v, want entry %s, hello, delivered twice, enqueued at %v", again.Entry, turn.Entry.ID, turn.Entry.EnqueuedAt)
	}
	if err := s.Finish(ctx, again.Lease, sessions.Finish{EntryID: again.Entry.ID, Release: true}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	kept, err := db.client.HMGet(ctx, db.convKey(tag, "state"), "pd", "pat", "pend", "lanes").Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]any{"", "", "", ""}, kept); d != "" {
		t.Errorf("state pd, pat, pend, lanes after the ack (-want +got):\n%s", d)
	}
	if turn, err := s.Claim(ctx, "w3", time.Minute); err != nil || turn != nil {
		t.Errorf("Claim after the ack = %+v, %v; want nothing", turn, err)
	}
}

func TestParseURLNeverQuotesTheURL(t *testing.T) {
	for _, raw := range []string{
		"redis://:pw-secret@[::1",
		"redis://user:pw-secret@h:notaport/0",
		"redis://:pw-secret@h:6379/x?y=%zz",
	} {
		_, err := ParseURL(raw)
		if !errs.Is(err, errs.Invalid) {
			t.Errorf("ParseURL(%q) = %v, want an Invalid error", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("ParseURL(%q) error quotes the password: %v", raw, err)
		}
	}
	if opt, err := ParseURL("redis://:pw-secret@h:6380/2"); err != nil || opt.Addr != "h:6380" || opt.DB != 2 || opt.Password != "pw-secret" {
		t.Errorf("ParseURL of a good URL = %+v, %v", opt, err)
	}
}
