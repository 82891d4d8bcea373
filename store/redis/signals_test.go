package redis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// TestSignalsAcrossShards checks the sharded signals log: each signal
// goes to its conversation's shard's stream, and reads in small pages
// give every signal back once, in time order, each signal's cursor
// resuming right after it; a signal that reaches its shard's stream with
// an earlier time than one already read from another shard still comes
// back; a cursor the store did not make is Invalid.
func TestSignalsAcrossShards(t *testing.T) {
	ctx := context.Background()
	db, clk := openShards(t, 4)
	s := db.Signals()
	convs := convsApart(t, db, 4)
	_, from, err := s.SignalsAfter(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(from, ","); len(parts) != 4 {
		t.Fatalf("cursor from now = %q, want four shards' parts", from)
	}

	signal := func(conv, text string) {
		t.Helper()
		if err := s.Signal(ctx, signals.Signal{Conv: conv, Kind: signals.Steer, EntryID: "e", Text: text}); err != nil {
			t.Fatalf("Signal(%s, %s): %v", conv, text, err)
		}
	}
	// Round the shards backwards and forwards, a millisecond apart, with
	// two of one conversation in one millisecond (told apart by sequence).
	var want []string
	order := []int{3, 0, 2, 1, 1, 0, 3, 2, 2}
	for k, c := range order {
		text := string(rune('a' + k))
		signal(convs[c], text)
		want = append(want, text)
		if k != 3 {
			clk.Advance(time.Millisecond)
		}
	}
	for _, c := range convs {
		n := 0
		for _, o := range order {
			if convs[o] == c {
				n++
			}
		}
		if got := db.client.XLen(ctx, db.signalsKey(db.shards.of(c))).Val(); got != int64(n) {
			t.Errorf("shard %d's stream holds %d signals, want %d (those of %s)", db.shards.of(c), got, n, c)
		}
	}
	if n := db.client.Exists(ctx, db.prefix+"signals").Val(); n != 0 {
		t.Errorf("the one-server layout's signals stream exists in the sharded layout")
	}

	var got []string
	var all []signals.Signal
	at := from
	for page := 0; page < 10; page++ {
		sigs, next, err := s.SignalsAfter(ctx, at, 2)
		if err != nil {
			t.Fatalf("SignalsAfter(%q, 2): %v", at, err)
		}
		if len(sigs) > 2 {
			t.Fatalf("SignalsAfter(%q, 2) = %d signals", at, len(sigs))
		}
		if len(sigs) > 0 && next != sigs[len(sigs)-1].Cursor {
			t.Errorf("next cursor %q is not the last signal's %q", next, sigs[len(sigs)-1].Cursor)
		}
		if len(sigs) == 0 && next != at {
			t.Errorf("next cursor after nothing read = %q, want %q", next, at)
		}
		for _, sig := range sigs {
			got = append(got, sig.Text)
		}
		all = append(all, sigs...)
		at = next
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("signals read in pages of two (-want +got):\n%s", d)
	}
	// Each signal's cursor resumes right after it.
	for k, sig := range all {
		rest, _, err := s.SignalsAfter(ctx, sig.Cursor, 0)
		if err != nil {
			t.Fatalf("SignalsAfter(%q): %v", sig.Cursor, err)
		}
		var texts []string
		for _, r := range rest {
			texts = append(texts, r.Text)
		}
		if d := cmp.Diff(want[k+1:], texts, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("SignalsAfter the cursor of %s (-want +got):\n%s", sig.Text, d)
		}
	}

	// A writer whose clock is behind: its signal's time is before the
	// last read, in a shard the reader is past the end of already.
	clk.Advance(-time.Minute)
	signal(convs[1], "late")
	sigs, _, err := s.SignalsAfter(ctx, at, 2)
	if err != nil || len(sigs) != 1 || sigs[0].Text != "late" {
		t.Errorf("SignalsAfter once a late signal arrived = %+v, %v; want the late one", sigs, err)
	}

	parts := strings.Split(from, ",")
	for _, bad := range []string{
		parts[0],                     // one server's form
		strings.Join(parts[:3], ","), // a shard short
		strings.Join(slices.Concat(parts, []string{"0-0"}), ","), // a shard over
		strings.Join(parts[:3], ",") + ",x",                      // a part not a stream id
		strings.Join(parts[:3], ",") + ",",
		strings.ReplaceAll(from, ",", ";"),
	} {
		if _, _, err := s.SignalsAfter(ctx, bad, 10); !errs.Is(err, errs.Invalid) {
			t.Errorf("SignalsAfter(%q) = %v, want Invalid", bad, err)
		}
	}
}
