package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// smallLimit is the entry size limit of the cases about size: small, so
// that going over it is cheap.
const smallLimit = 1 << 10

func runBadInput(t *testing.T, b Backend) {
	runRefusedEntries(t, b, "Append", func(f *fixture, in sessions.Inbound) (sessions.AppendResult, error) {
		return f.ss.Append(f.ctx, in)
	})

	// Each case finishes the held entry with something too large or
	// malformed; nothing of the Finish may be written and the entry stays
	// unacked under the same lease.
	badFinish := []struct {
		desc string
		fin  sessions.Finish
		code errs.Code
	}{
		{
			desc: "history message over the limit",
			fin: sessions.Finish{
				History: []chat.Message{{Role: "user", Content: "fine"}, {Role: "assistant", Content: big(2 * smallLimit)}},
				Outbox:  []outbox.Message{reply("c", "fine")},
			},
			code: errs.TooLarge,
		},
		{
			desc: "outbox message over the limit",
			fin: sessions.Finish{
				History: []chat.Message{{Role: "assistant", Content: "fine"}},
				Outbox:  []outbox.Message{reply("c", "fine"), reply("c", big(2*smallLimit))},
			},
			code: errs.TooLarge,
		},
		{
			desc: "a write of a kind the store does not apply",
			fin: sessions.Finish{
				History: []chat.Message{{Role: "assistant", Content: "fine"}},
				Outbox:  []outbox.Message{reply("c", "fine")},
				Writes:  []sessions.Write{unknownWrite{}},
			},
			code: errs.Invalid,
		},
		{
			desc: "a write whose kind is not <domain>.<name>",
			fin: sessions.Finish{
				History: []chat.Message{{Role: "assistant", Content: "fine"}},
				Writes:  []sessions.Write{unknownWrite{kind: "no domain"}},
			},
			code: errs.Invalid,
		},
		{
			desc: "outbox message with a bad target",
			fin: sessions.Finish{
				History: []chat.Message{{Role: "assistant", Content: "fine"}},
				Outbox:  []outbox.Message{reply("c", "fine"), {Text: "nowhere"}},
			},
			code: errs.Invalid,
		},
	}
	for _, tc := range badFinish {
		t.Run("finish with "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
			f.appendAll(user("c", "1"))
			turn := f.mustClaim("w1")
			fin := tc.fin
			fin.EntryID, fin.Release = turn.Entry.ID, true
			wantCode(t, "Finish", f.ss.Finish(f.ctx, turn.Lease, fin), tc.code)
			if h := f.history("c"); len(h) != 0 {
				t.Errorf("history = %+v, want none", h)
			}
			if p := f.pending(); len(p) != 0 {
				t.Errorf("outbox pending = %q, want none", outTexts(p))
			}
			if e := f.next(turn.Lease); e == nil || e.ID != turn.Entry.ID {
				t.Errorf("Next after the failed Finish = %+v, want the unacked entry %q", e, turn.Entry.ID)
			}
			f.noClaim("w2")
		})
	}

	t.Run("history message over the limit under the lease", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		err := f.ss.AppendHistory(f.ctx, turn.Lease, chat.Message{Role: "user", Content: "fine"}, chat.Message{Role: "assistant", Content: big(2 * smallLimit)})
		wantCode(t, "AppendHistory", err, errs.TooLarge)
		if h := f.history("c"); len(h) != 0 {
			t.Errorf("history = %+v, want none", h)
		}
	})

	t.Run("outbox message over the limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
		_, _, err := f.ob.Enqueue(f.ctx, reply("c", big(2*smallLimit)))
		wantCode(t, "Enqueue", err, errs.TooLarge)
		if p := f.pending(); len(p) != 0 {
			t.Errorf("outbox pending = %q, want none", outTexts(p))
		}
	})

	t.Run("every method of a closed store", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		f.enqueueAll(reply("c", "1"))
		claimed := f.claimOutbox("d1", telegram, 1)[0]
		signalsFrom := f.signalsNow(f.sg)
		note := f.addNotes("u", "a note")[0]
		if err := f.closeSt(); err != nil {
			t.Fatalf("Close: %v", err)
		}

		ctx, ss, sg, tl, nt, ob, l := f.ctx, f.ss, f.sg, f.tl, f.nt, f.ob, turn.Lease
		calls := []struct {
			desc string
			call func(context.Context) error
		}{
			{"Sessions.Append", func(ctx context.Context) error { _, err := ss.Append(ctx, user("c", "2")); return err }},
			{"Sessions.Claim", func(ctx context.Context) error { _, err := ss.Claim(ctx, "w2", ttl); return err }},
			{"Sessions.Next", func(ctx context.Context) error { _, err := ss.Next(ctx, l); return err }},
			{"Sessions.Renew", func(ctx context.Context) error { _, err := ss.Renew(ctx, l, ttl); return err }},
			{"Sessions.Release", func(ctx context.Context) error { return ss.Release(ctx, l) }},
			{"Sessions.Finish", func(ctx context.Context) error {
				return ss.Finish(ctx, l, sessions.Finish{EntryID: turn.Entry.ID})
			}},
			{"Sessions.AppendHistory", func(ctx context.Context) error {
				return ss.AppendHistory(ctx, l, chat.Message{Role: "user", Content: "1"})
			}},
			{"Sessions.History", func(ctx context.Context) error { _, err := ss.History(ctx, "c"); return err }},
			{"Sessions.ClearHistory", func(ctx context.Context) error { return ss.ClearHistory(ctx, "c") }},
			{"Sessions.Meta", func(ctx context.Context) error { _, err := ss.Meta(ctx, "c"); return err }},
			{"Sessions.SetMeta", func(ctx context.Context) error { return ss.SetMeta(ctx, "c", "k", "v") }},
			{"Timeline.AppendTimeline", func(ctx context.Context) error {
				_, err := tl.AppendTimeline(ctx, item("c", "m1", "x"))
				return err
			}},
			{"Timeline.ReadTimeline", func(ctx context.Context) error { _, err := tl.ReadTimeline(ctx, "c", "", 10); return err }},
			{"Timeline.TimelineEnd", func(ctx context.Context) error { _, err := tl.TimelineEnd(ctx, "c"); return err }},
			{"Signals.Signal", func(ctx context.Context) error { return sg.Signal(ctx, stop("c")) }},
			{"Signals.SignalsAfter from now", func(ctx context.Context) error { _, _, err := sg.SignalsAfter(ctx, "", 10); return err }},
			{"Signals.SignalsAfter", func(ctx context.Context) error { _, _, err := sg.SignalsAfter(ctx, signalsFrom, 10); return err }},
			{"Notes.AddNote", func(ctx context.Context) error { _, err := nt.AddNote(ctx, "u", "x"); return err }},
			{"Notes.Notes", func(ctx context.Context) error { _, err := nt.Notes(ctx, "u"); return err }},
			{"Notes.DeleteNote", func(ctx context.Context) error { return nt.DeleteNote(ctx, "u", note.ID) }},
			{"Outbox.Enqueue", func(ctx context.Context) error { _, _, err := ob.Enqueue(ctx, reply("c", "2")); return err }},
			{"Outbox.Claim", func(ctx context.Context) error { _, err := ob.Claim(ctx, "d2", telegram, 1, ttl); return err }},
			{"Outbox.Ack", func(ctx context.Context) error { return ob.Ack(ctx, claimed) }},
			{"Outbox.Release", func(ctx context.Context) error { return ob.Release(ctx, claimed, time.Time{}, "x") }},
			{"Outbox.Postpone", func(ctx context.Context) error { return ob.Postpone(ctx, claimed, time.Time{}) }},
			{"Outbox.Dead", func(ctx context.Context) error { return ob.Dead(ctx, claimed, "x") }},
			{"Outbox.Pending", func(ctx context.Context) error { _, err := ob.Pending(ctx, 10); return err }},
			{"Outbox.DeadLetters", func(ctx context.Context) error { _, err := ob.DeadLetters(ctx, 10); return err }},
			{"Outbox.Requeue", func(ctx context.Context) error { return ob.Requeue(ctx, claimed.ID) }},
		}
		for _, c := range calls {
			callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			wantCode(t, c.desc, c.call(callCtx), errs.Closed)
			cancel()
		}
	})
}

// runRefusedEntries checks that appendFn, a way to queue an entry named
// name, refuses a malformed or oversized entry as Append does and keeps
// nothing of it.
func runRefusedEntries(t *testing.T, b Backend, name string, appendFn func(f *fixture, in sessions.Inbound) (sessions.AppendResult, error)) {
	invalid := []struct {
		desc string
		in   sessions.Inbound
	}{
		{"empty conversation key", user("", "hello")},
		{"blank conversation key", user("  \t", "hello")},
		{"control character in the key", user("telegram:1\n2", "hello")},
		{"bad UTF-8 in the key", user("telegram:\xff", "hello")},
		{"unknown kind", sessions.Inbound{Conv: "c", Text: "hello", Kind: "robot"}},
	}
	for _, tc := range invalid {
		t.Run("invalid entry: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			_, err := appendFn(f, tc.in)
			wantCode(t, name, err, errs.Invalid)
			f.noClaim("w1")
		})
	}

	t.Run("entry over the size limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
		_, err := appendFn(f, withMessageID(user("c", big(2*smallLimit)), "m1"))
		wantCode(t, name, err, errs.TooLarge)
		f.noClaim("w1")
		// Nothing of it was remembered, not even its message id.
		r, err := appendFn(f, withMessageID(user("c", "small"), "m1"))
		if err != nil || r.Duplicate {
			t.Errorf("%s after a refused one with the same message id = %+v, %v; want a new entry", name, r, err)
		}
		if _, err := appendFn(f, user("c", big(smallLimit-200))); err != nil {
			t.Errorf("%s of an entry under the limit: %v", name, err)
		}
	})
}

// unknownWrite is a write no store applies (sessions.Write).
type unknownWrite struct{ kind string }

func (w unknownWrite) WriteKind() string {
	if w.kind != "" {
		return w.kind
	}
	return "storetest.unknown"
}
