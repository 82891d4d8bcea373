package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
)

// addNotes adds texts for user in order, the clock moving a tick after
// each, and returns the notes as Notes should list them.
func (f *fixture) addNotes(user string, texts ...string) []notes.Note {
	f.t.Helper()
	out := make([]notes.Note, len(texts))
	for i, text := range texts {
		at := f.clk.Now()
		n, err := f.nt.AddNote(f.ctx, user, text)
		if err != nil {
			f.t.Fatalf("AddNote(%q, %q): %v", user, text, err)
		}
		if n.ID == "" || n.Text != text || !n.At.Equal(at) {
			f.t.Errorf("AddNote(%q, %q) = %+v, want an id, the text and the store's time %v", user, text, n, at)
		}
		out[i] = n
		f.clk.Advance(tick)
	}
	return out
}

func (f *fixture) notes(user string) []notes.Note {
	f.t.Helper()
	ns, err := f.nt.Notes(f.ctx, user)
	if err != nil {
		f.t.Fatalf("Notes(%q): %v", user, err)
	}
	return ns
}

func (f *fixture) deleteNote(user, id string) {
	f.t.Helper()
	if err := f.nt.DeleteNote(f.ctx, user, id); err != nil {
		f.t.Fatalf("DeleteNote(%q, %q): %v", user, id, err)
	}
}

func wantNotes(t *testing.T, what string, got, want []notes.Note) {
	t.Helper()
	if d := cmp.Diff(want, got, timeOpts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func runNotes(t *testing.T, b Backend) {
	t.Run("add, list oldest first, delete", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const u = "telegram:42"
		if ns := f.notes(u); len(ns) != 0 {
			t.Errorf("Notes of a user without notes = %+v, want none", ns)
		}
		ns := f.addNotes(u, "prefers metric units", "lives in Oslo", "name: Kari\n(not Kåre)")
		wantNotes(t, "Notes", f.notes(u), ns)

		f.deleteNote(u, ns[1].ID)
		wantNotes(t, "Notes after deleting the second", f.notes(u), []notes.Note{ns[0], ns[2]})
		wantCode(t, "DeleteNote of a deleted note", f.nt.DeleteNote(f.ctx, u, ns[1].ID), errs.NotFound)
		for _, id := range []string{"no-such-note", "", "-1", "99999999"} {
			wantCode(t, "DeleteNote("+id+")", f.nt.DeleteNote(f.ctx, u, id), errs.NotFound)
		}
		wantNotes(t, "Notes after the failed deletes", f.notes(u), []notes.Note{ns[0], ns[2]})

		more := f.addNotes(u, "has a cat")
		wantNotes(t, "Notes after adding again", f.notes(u), []notes.Note{ns[0], ns[2], more[0]})
	})

	t.Run("each user has their own notes", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// Users whose keys differ only in characters a backend escapes.
		users := []string{"slack:U1", "slack:U1}", "slack:U1%7D", "{slack:U1}"}
		want := map[string][]notes.Note{}
		for _, u := range users {
			want[u] = f.addNotes(u, "about "+u)
		}
		for _, u := range users {
			wantNotes(t, "Notes("+u+")", f.notes(u), want[u])
		}
		// A user's note is nobody else's to delete.
		id := want[users[0]][0].ID
		wantCode(t, "DeleteNote of another user's note", f.nt.DeleteNote(f.ctx, "discord:9", id), errs.NotFound)
		wantNotes(t, "Notes after another user's delete", f.notes(users[0]), want[users[0]])
	})

	for _, restart := range []bool{false, true} {
		desc := "kept across close and reopen"
		if restart {
			desc = "kept across a server restart"
		}
		t.Run(desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			ns := f.addNotes("u", "one", "two")
			f.reopen(restart)
			wantNotes(t, "Notes after reopening", f.notes("u"), ns)
			f.deleteNote("u", ns[0].ID)
			more := f.addNotes("u", "three")
			wantNotes(t, "Notes after a delete and an add", f.notes("u"), []notes.Note{ns[1], more[0]})
		})
	}

	bad := []struct {
		desc, user, text string
		code             errs.Code
	}{
		{"empty user", "", "x", errs.Invalid},
		{"blank user", " \t", "x", errs.Invalid},
		{"control character in the user", "u\n1", "x", errs.Invalid},
		{"empty text", "u", "", errs.Invalid},
		{"blank text", "u", " \n ", errs.Invalid},
		{"text over the size limit", "u", big(2 * smallLimit), errs.TooLarge},
	}
	for _, tc := range bad {
		t.Run("bad note: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
			_, err := f.nt.AddNote(f.ctx, tc.user, tc.text)
			wantCode(t, "AddNote", err, tc.code)
			if ns := f.notes("u"); len(ns) != 0 {
				t.Errorf("Notes after a refused add = %+v, want none", ns)
			}
		})
	}

	t.Run("a turn's commit adds and removes notes", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const u = "telegram:42"
		direct := f.addNotes(u, "prefers metric units")
		at := f.clk.Now()
		if err := f.commitWrites("c",
			notes.Add{User: u, ID: "n_1", Text: "lives in Oslo"},
			notes.Add{User: u, ID: "n_2", Text: "has a cat"},
			notes.Add{User: "slack:U1", ID: "n_1", Text: "someone else"},
			notes.Remove{User: u, ID: direct[0].ID},
		); err != nil {
			t.Fatalf("commit with notes: %v", err)
		}
		wantNotes(t, "Notes after the commit", f.notes(u), []notes.Note{
			{ID: "n_1", Text: "lives in Oslo", At: at}, {ID: "n_2", Text: "has a cat", At: at}})
		wantNotes(t, "another user's Notes", f.notes("slack:U1"), []notes.Note{{ID: "n_1", Text: "someone else", At: at}})

		// An id added again adds nothing; a note not there is no error;
		// a note named by a turn is deleted like any.
		f.clk.Advance(tick)
		if err := f.commitWrites("c",
			notes.Add{User: u, ID: "n_1", Text: "lives in Bergen"},
			notes.Remove{User: u, ID: "n_gone"},
			notes.Remove{User: u, ID: direct[0].ID},
		); err != nil {
			t.Fatalf("second commit with notes: %v", err)
		}
		f.deleteNote(u, "n_2")
		wantNotes(t, "Notes after the second commit", f.notes(u), []notes.Note{{ID: "n_1", Text: "lives in Oslo", At: at}})
	})

	badWrites := []struct {
		desc string
		w    sessions.Write
		code errs.Code
	}{
		{"a note without an id", notes.Add{User: "u", Text: "x"}, errs.Invalid},
		{"a note without text", notes.Add{User: "u", ID: "n_1", Text: " "}, errs.Invalid},
		{"a note without a user", notes.Add{ID: "n_1", Text: "x"}, errs.Invalid},
		{"a note over the size limit", notes.Add{User: "u", ID: "n_1", Text: big(2 * smallLimit)}, errs.TooLarge},
		{"a removal without an id", notes.Remove{User: "u"}, errs.Invalid},
		{"a removal without a user", notes.Remove{ID: "n_1"}, errs.Invalid},
	}
	for _, tc := range badWrites {
		t.Run("bad note write: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
			f.append(user("c", "remember"))
			turn := f.mustClaim("w1")
			ok := notes.Add{User: "u", ID: "n_ok", Text: "ok"}
			err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Writes: []sessions.Write{ok, tc.w}})
			wantCode(t, "Finish", err, tc.code)
			if ns := f.notes("u"); len(ns) != 0 {
				t.Errorf("Notes after a refused commit = %+v, want none", ns)
			}
			// The entry is still there to ack.
			f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
		})
	}

	t.Run("list and delete with a bad user", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, err := f.nt.Notes(f.ctx, "")
		wantCode(t, "Notes", err, errs.Invalid)
		wantCode(t, "DeleteNote", f.nt.DeleteNote(f.ctx, " ", "1"), errs.Invalid)
	})
}
