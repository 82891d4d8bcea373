package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runTurnMark: the conversation's metadata tells its running turn
// (sessions.ConvMetaTurn) from the live lease and the entry handed out
// under it, and only then; nobody writes it.
func runTurnMark(t *testing.T, b Backend) {
	// turn reads conv's running turn from Meta; ok is false when Meta
	// tells none.
	turn := func(f *fixture, conv string) (rt sessions.RunningTurn, ok bool) {
		t.Helper()
		m, err := f.ss.Meta(f.ctx, conv)
		if err != nil {
			t.Fatalf("Meta(%s): %v", conv, err)
		}
		raw, ok := m[sessions.ConvMetaTurn]
		if !ok {
			return rt, false
		}
		if err := json.Unmarshal([]byte(raw), &rt); err != nil {
			t.Fatalf("Meta(%s)[%s] = %q: %v", conv, sessions.ConvMetaTurn, raw, err)
		}
		return rt, true
	}
	wantTurn := func(f *fixture, when, conv string, want sessions.RunningTurn) {
		t.Helper()
		got, ok := turn(f, conv)
		if !ok {
			t.Errorf("%s: Meta tells no running turn, want %+v", when, want)
			return
		}
		if d := cmp.Diff(want, got, timeOpts); d != "" {
			t.Errorf("%s: running turn (-want +got):\n%s", when, d)
		}
	}
	wantNone := func(f *fixture, when, conv string) {
		t.Helper()
		if got, ok := turn(f, conv); ok {
			t.Errorf("%s: Meta tells running turn %+v, want none", when, got)
		}
	}

	t.Run("from the claim to the commit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.append(user("c", "first"))
		wantNone(f, "queued, not claimed", "c")
		f.clk.Advance(time.Second)
		claimed := f.claim("w1")
		f.clk.Advance(time.Second)
		wantTurn(f, "claimed", "c", sessions.RunningTurn{EntryID: claimed.Entry.ID, Since: t0.Add(time.Second), Text: "first"})
		r := f.append(user("c", "second"))
		if d := cmp.Diff(sessions.TurnMark(claimed.Entry.ID, t0.Add(time.Second), user("c", "first")), r.Meta[sessions.ConvMetaTurn]); d != "" {
			t.Errorf("Append while the turn runs: Meta's running turn (-want +got):\n%s", d)
		}
		f.finish(claimed.Lease, sessions.Finish{EntryID: claimed.Entry.ID})
		wantNone(f, "committed, lease kept, nothing handed out", "c")
		f.clk.Advance(time.Second)
		e := f.next(claimed.Lease)
		wantTurn(f, "the next entry", "c", sessions.RunningTurn{EntryID: e.ID, Since: t0.Add(3 * time.Second), Text: "second"})
		f.clk.Advance(time.Second)
		if again := f.next(claimed.Lease); again == nil || again.ID != e.ID {
			t.Fatalf("Next again = %+v, want entry %s once more", again, e.ID)
		}
		wantTurn(f, "the same entry handed out again", "c", sessions.RunningTurn{EntryID: e.ID, Since: t0.Add(3 * time.Second), Text: "second"})
		f.finish(claimed.Lease, sessions.Finish{EntryID: e.ID, Release: true})
		wantNone(f, "committed and released", "c")
	})

	t.Run("from an append that claims", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, started := f.mustAppendClaim(user("c", "hello"), "w1")
		wantTurn(f, "started by its append", "c", sessions.RunningTurn{EntryID: started.Entry.ID, Since: t0, Text: "hello"})
		f.release(started.Lease)
		wantNone(f, "released", "c")
	})

	t.Run("ends with the lease", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.append(user("c", "slow"))
		claimed := f.claim("w1")
		f.clk.Advance(ttl + time.Second)
		wantNone(f, "the lease expired", "c")
		again := f.claim("w2")
		wantTurn(f, "claimed again", "c", sessions.RunningTurn{EntryID: again.Entry.ID, Since: t0.Add(ttl + time.Second), Text: "slow"})
		if again.Entry.ID != claimed.Entry.ID {
			t.Errorf("claimed again: entry %s, want %s", again.Entry.ID, claimed.Entry.ID)
		}
	})

	t.Run("says nothing of a control entry", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// A short one, and one large enough that Redis tells it slimmed.
		for i, text := range []string{"/goal status", strings.Repeat("/goal status ", 1000)} {
			conv := fmt.Sprintf("c%d", i)
			in := synthetic(conv, text)
			in.Meta = map[string]string{sessions.MetaControl: "goal"}
			f.append(in)
			f.claim(fmt.Sprintf("w%d", i))
			wantNone(f, "a control entry runs", conv)
		}
	})

	t.Run("of a large entry tells its start", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		long := strings.Repeat("é", 3000) + strings.Repeat("x", 5000)
		big := user("c", "δ"+long)
		big.Meta = map[string]string{"reply_to": "77", "note": strings.Repeat("n", 2000)}
		f.append(big)
		claimed := f.claim("w1")
		wantTurn(f, "a large entry runs", "c", sessions.RunningTurn{EntryID: claimed.Entry.ID, Since: t0,
			Text: "δ" + strings.Repeat("é", 58) + "…"})
		if got := claimed.Entry.Text; got != "δ"+long {
			t.Errorf("the claimed entry's text has %d bytes, want it whole (%d)", len(got), len("δ"+long))
		}
	})

	t.Run("is written by nobody", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		err := f.ss.SetMeta(f.ctx, "c", sessions.ConvMetaTurn, `{"entry":"1"}`)
		wantCode(t, "SetMeta of the running turn", err, errs.Invalid)
		f.append(user("c", "x"))
		claimed := f.claim("w1")
		err = f.ss.Finish(f.ctx, claimed.Lease, sessions.Finish{EntryID: claimed.Entry.ID, Meta: map[string]string{sessions.ConvMetaTurn: ""}})
		wantCode(t, "Finish writing the running turn", err, errs.Invalid)
		wantTurn(f, "after the refused Finish", "c", sessions.RunningTurn{EntryID: claimed.Entry.ID, Since: t0, Text: "x"})
	})
}
