package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

func stop(conv string) signals.Signal {
	return signals.Signal{Conv: conv, Kind: signals.Stop}
}

func steer(conv, entryID, text string) signals.Signal {
	return signals.Signal{Conv: conv, Kind: signals.Steer, EntryID: entryID, Text: text}
}

// signalAll logs sigs through sg in order, the clock moving a tick after
// each, and returns them as a read should give them back, without their
// cursors (compare with signalOpts).
func (f *fixture) signalAll(sg signals.Store, sigs ...signals.Signal) []signals.Signal {
	f.t.Helper()
	out := make([]signals.Signal, len(sigs))
	for i, s := range sigs {
		if err := sg.Signal(f.ctx, s); err != nil {
			f.t.Fatalf("Signal(%q, %q): %v", s.Conv, s.Kind, err)
		}
		s.At = f.clk.Now()
		out[i] = s
		f.clk.Advance(tick)
	}
	return out
}

func (f *fixture) signalsAfter(sg signals.Store, after string, limit int) ([]signals.Signal, string) {
	f.t.Helper()
	sigs, next, err := sg.SignalsAfter(f.ctx, after, limit)
	if err != nil {
		f.t.Fatalf("SignalsAfter(%q, %d): %v", after, limit, err)
	}
	if next == "" {
		f.t.Fatalf("SignalsAfter(%q, %d): empty next cursor", after, limit)
	}
	return sigs, next
}

// signalsNow is where a tailer starting now begins.
func (f *fixture) signalsNow(sg signals.Store) string {
	f.t.Helper()
	sigs, end := f.signalsAfter(sg, "", 10)
	if len(sigs) != 0 {
		f.t.Errorf("SignalsAfter(\"\") = %+v, want no signals, only the end cursor", sigs)
	}
	return end
}

// wantSignals compares signals without their cursors, and checks that
// the cursors are set and that next is the last one's.
func wantSignals(t *testing.T, what string, got []signals.Signal, next string, want []signals.Signal, wantNext string) {
	t.Helper()
	opts := append(cmp.Options{cmpopts.IgnoreFields(signals.Signal{}, "Cursor")}, timeOpts...)
	if d := cmp.Diff(want, got, opts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
	seen := map[string]bool{}
	for _, s := range got {
		if s.Cursor == "" || seen[s.Cursor] {
			t.Errorf("%s: cursor %q empty or handed out twice", what, s.Cursor)
		}
		seen[s.Cursor] = true
	}
	if len(got) > 0 {
		wantNext = got[len(got)-1].Cursor
	}
	if next != wantNext {
		t.Errorf("%s: next cursor = %q, want %q", what, next, wantNext)
	}
}

func runSignals(t *testing.T, b Backend) {
	t.Run("from now on, in order, every field kept", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.signalAll(f.sg, stop("before"))
		from := f.signalsNow(f.sg)
		want := f.signalAll(f.sg,
			stop("c"),
			steer("c", "e-7", "also check the logs\nplease"),
			signals.Signal{Conv: "c", Kind: signals.Steer, EntryID: "e-8", Text: "and the disk", MessageID: "api-m-8"},
			signals.Signal{Conv: "telegram:1", Kind: signals.Interrupt},
		)
		got, next := f.signalsAfter(f.sg, from, 10)
		wantSignals(t, "SignalsAfter(now)", got, next, want, from)

		more, again := f.signalsAfter(f.sg, next, 10)
		wantSignals(t, "SignalsAfter(the end)", more, again, nil, next)
		// A tailer that caught up sees what comes next.
		last := f.signalAll(f.sg, stop("d"))
		got, end := f.signalsAfter(f.sg, next, 10)
		wantSignals(t, "SignalsAfter(the end) once more arrived", got, end, last, next)
	})

	t.Run("a domain's kind with a target", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		from := f.signalsNow(f.sg)
		want := f.signalAll(f.sg,
			signals.Signal{Conv: "c", Kind: "delegation.stop", Target: "sub-1"},
			signals.Signal{Conv: "c", Kind: "delegation.steer", Target: "sub-1", Text: "look at the disk first"},
			signals.Signal{Conv: "c", Kind: "kan_ban2.move_card", Target: "card-9", EntryID: "e-3", MessageID: "api-m-3"},
			stop("c"),
		)
		got, next := f.signalsAfter(f.sg, from, 10)
		wantSignals(t, "SignalsAfter(now)", got, next, want, from)
	})

	t.Run("from now on an empty log", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		from := f.signalsNow(f.sg)
		want := f.signalAll(f.sg, stop("c"))
		got, next := f.signalsAfter(f.sg, from, 10)
		wantSignals(t, "SignalsAfter(now)", got, next, want, from)
	})

	t.Run("read up to a limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		from := f.signalsNow(f.sg)
		want := f.signalAll(f.sg, stop("a"), stop("b"), stop("c"), stop("d"), stop("e"))
		var got []signals.Signal
		for page := 0; page < 3; page++ {
			sigs, next := f.signalsAfter(f.sg, from, 2)
			if len(sigs) > 2 {
				t.Fatalf("SignalsAfter with limit 2 = %d signals", len(sigs))
			}
			got = append(got, sigs...)
			from = next
		}
		wantSignals(t, "SignalsAfter in pages of two", got, from, want, "")
	})

	t.Run("two stores on one place see each other's signals", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		other, _ := openStore(t, f.place, f.clk, f.lim)
		sg2 := other.Signals()
		from1, from2 := f.signalsNow(f.sg), f.signalsNow(sg2)

		mine := f.signalAll(f.sg, stop("c"))
		theirs := f.signalAll(sg2, steer("d", "e-1", "hurry"))
		got, next := f.signalsAfter(sg2, from2, 10)
		wantSignals(t, "the second store's read", got, next, append(append([]signals.Signal{}, mine...), theirs...), from2)
		got, next = f.signalsAfter(f.sg, from1, 10)
		wantSignals(t, "the first store's read", got, next, append(append([]signals.Signal{}, mine...), theirs...), from1)
	})

	t.Run("kept for at least an hour", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		from := f.signalsNow(f.sg)
		first := f.signalAll(f.sg, stop("c"))
		f.clk.Advance(59 * time.Minute)
		// A later signal, which may prune older ones, must leave this one.
		second := f.signalAll(f.sg, stop("d"))
		got, next := f.signalsAfter(f.sg, from, 10)
		wantSignals(t, "SignalsAfter after 59 minutes", got, next, append(first, second...), from)
	})

	for _, cursor := range []string{"not a cursor", "-1", "1.5", "abc-def", "1;2"} {
		t.Run("bad cursor "+cursor, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.signalAll(f.sg, stop("c"))
			_, _, err := f.sg.SignalsAfter(f.ctx, cursor, 10)
			wantCode(t, "SignalsAfter", err, errs.Invalid)
		})
	}

	bad := []struct {
		desc string
		sig  signals.Signal
		code errs.Code
	}{
		{"empty conversation key", stop(""), errs.Invalid},
		{"control character in the key", stop("c\x00"), errs.Invalid},
		{"unknown kind", signals.Signal{Conv: "c", Kind: "pause"}, errs.Invalid},
		{"empty kind", signals.Signal{Conv: "c"}, errs.Invalid},
		{"text over the size limit", steer("c", "e-1", big(2*smallLimit)), errs.TooLarge},
		{"target over the size limit", signals.Signal{Conv: "c", Kind: "delegation.stop", Target: big(2 * smallLimit)}, errs.TooLarge},
		{"a domain's kind over the size limit", signals.Signal{Conv: "c", Kind: signals.Kind("delegation." + strings.Repeat("s", 2*smallLimit))}, errs.TooLarge},
		{"a domain's kind without its conversation", signals.Signal{Kind: "delegation.stop", Target: "sub-1"}, errs.Invalid},
		// A domain's kind is <domain>.<name>, both of lower-case letters,
		// digits and '_', with one dot: a domain does not nest its kinds.
		{"upper-case kind", signals.Signal{Conv: "c", Kind: "Delegation.Stop"}, errs.Invalid},
		{"upper-case sessions kind", signals.Signal{Conv: "c", Kind: "STOP"}, errs.Invalid},
		{"a domain without a name", signals.Signal{Conv: "c", Kind: "delegation."}, errs.Invalid},
		{"a name without a domain", signals.Signal{Conv: "c", Kind: ".stop"}, errs.Invalid},
		{"a nested kind", signals.Signal{Conv: "c", Kind: "a.b.c"}, errs.Invalid},
		{"a dash in the kind", signals.Signal{Conv: "c", Kind: "dele-gation.stop"}, errs.Invalid},
		{"a space in the kind", signals.Signal{Conv: "c", Kind: "delegation. stop"}, errs.Invalid},
	}
	for _, tc := range bad {
		t.Run("bad signal: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
			from := f.signalsNow(f.sg)
			wantCode(t, "Signal", f.sg.Signal(f.ctx, tc.sig), tc.code)
			got, next := f.signalsAfter(f.sg, from, 10)
			wantSignals(t, "SignalsAfter a refused signal", got, next, nil, from)
		})
	}
}
