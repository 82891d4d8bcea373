package storetest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/sessions"
)

// runFiles checks media.Store: bytes kept by id across a reopen, replaced
// by a second put, forgotten by a delete, and bad input refused; and the
// write media.ReleaseFiles, which forgets files in a turn's commit and
// only there.
func runFiles(t *testing.T, b Backend) {
	t.Run("put, read, replace, delete, across a reopen", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		fs := f.st.Files()
		if _, err := fs.File(f.ctx, "up-1"); !errs.Is(err, errs.NotFound) {
			t.Fatalf("File before any put: %v, want NotFound", err)
		}
		// Every byte value, and a NUL in the middle, come back as put.
		data := make([]byte, 3<<20)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if err := fs.PutFile(f.ctx, "up-1", data); err != nil {
			t.Fatal(err)
		}
		if err := fs.PutFile(f.ctx, "up-2", []byte("second")); err != nil {
			t.Fatal(err)
		}
		f.reopen(false)
		fs = f.st.Files()
		got, err := fs.File(f.ctx, "up-1")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("File(up-1) after a reopen: %d bytes (%v), want the %d put", len(got), err, len(data))
		}
		if err := fs.PutFile(f.ctx, "up-1", []byte("again")); err != nil {
			t.Fatal(err)
		}
		if got, err := fs.File(f.ctx, "up-1"); err != nil || string(got) != "again" {
			t.Errorf("File(up-1) after a second put = %q (%v), want %q", got, err, "again")
		}
		if err := fs.DeleteFile(f.ctx, "up-1"); err != nil {
			t.Fatal(err)
		}
		if err := fs.DeleteFile(f.ctx, "up-1"); err != nil {
			t.Errorf("deleting a file twice: %v, want nil", err)
		}
		if _, err := fs.File(f.ctx, "up-1"); !errs.Is(err, errs.NotFound) {
			t.Errorf("File after DeleteFile: %v, want NotFound", err)
		}
		if got, err := fs.File(f.ctx, "up-2"); err != nil || string(got) != "second" {
			t.Errorf("the other file = %q (%v), want it untouched", got, err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		fs := f.st.Files()
		for _, id := range []string{"", "a\nb", strings.Repeat("x", 201), "\xff"} {
			if err := fs.PutFile(f.ctx, id, []byte("x")); !errs.Is(err, errs.Invalid) {
				t.Errorf("PutFile(%q): %v, want Invalid", id, err)
			}
			if _, err := fs.File(f.ctx, id); !errs.Is(err, errs.Invalid) {
				t.Errorf("File(%q): %v, want Invalid", id, err)
			}
		}
		if err := fs.PutFile(f.ctx, "big", make([]byte, media.MaxFileBytes+1)); !errs.Is(err, errs.TooLarge) {
			t.Errorf("PutFile over MaxFileBytes: %v, want TooLarge", err)
		}
		if _, err := fs.File(f.ctx, "big"); !errs.Is(err, errs.NotFound) {
			t.Errorf("a refused file was kept: %v", err)
		}
	})
	t.Run("a turn's commit releases files", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.putFiles("up-1", "up-2", "up-3")
		// A file not there (released before) is no error.
		if err := f.commitWrites("c", media.ReleaseFiles{IDs: []string{"up-1", "up-2", "up-gone"}}); err != nil {
			t.Fatalf("commit with a release: %v", err)
		}
		f.wantFiles("after the commit", map[string]bool{"up-1": false, "up-2": false, "up-3": true})
		// A release of nothing commits too.
		if err := f.commitWrites("c", media.ReleaseFiles{}); err != nil {
			t.Fatalf("commit with an empty release: %v", err)
		}
		f.wantFiles("after an empty release", map[string]bool{"up-3": true})
	})
	t.Run("a commit that lost its lease releases nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.putFiles("up-1", "up-2")
		f.append(user("c", "look at this"))
		stale := f.mustClaim("w1")
		f.clk.Advance(ttl + time.Second)
		rival := f.mustClaim("w2")
		err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{
			EntryID: stale.Entry.ID,
			Writes:  []sessions.Write{media.ReleaseFiles{IDs: []string{"up-1", "up-2"}}},
			Release: true,
		})
		wantCode(t, "stale Finish with a release", err, errs.LeaseLost)
		f.wantFiles("after the stale commit", map[string]bool{"up-1": true, "up-2": true})
		// The turn that runs the message again reads them and releases
		// them with its own commit.
		f.finish(rival.Lease, sessions.Finish{
			EntryID: rival.Entry.ID,
			Writes:  []sessions.Write{media.ReleaseFiles{IDs: []string{"up-1", "up-2"}}},
			Release: true,
		})
		f.wantFiles("after the rival's commit", map[string]bool{"up-1": false, "up-2": false})
	})
	t.Run("a bad release refuses the whole commit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.putFiles("up-1")
		f.append(user("c", "look at this"))
		turn := f.mustClaim("w1")
		many := make([]string, 1001)
		for i := range many {
			many[i] = "up-1"
		}
		for _, bad := range []media.ReleaseFiles{{IDs: []string{"up-1", "a\nb"}}, {IDs: []string{""}}, {IDs: many}} {
			err := f.ss.Finish(f.ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Writes: []sessions.Write{bad}})
			wantCode(t, "Finish with a bad release", err, errs.Invalid)
		}
		f.wantFiles("after the refused commits", map[string]bool{"up-1": true})
		// The entry is still there to ack.
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID})
	})
}

// putFiles keeps a few bytes under each id.
func (f *fixture) putFiles(ids ...string) {
	f.t.Helper()
	for _, id := range ids {
		if err := f.st.Files().PutFile(f.ctx, id, []byte("bytes of "+id)); err != nil {
			f.t.Fatalf("PutFile(%s): %v", id, err)
		}
	}
}

// wantFiles checks which of the ids the store keeps (true) and which it
// has forgotten (false).
func (f *fixture) wantFiles(when string, want map[string]bool) {
	f.t.Helper()
	for id, kept := range want {
		data, err := f.st.Files().File(f.ctx, id)
		switch {
		case kept && (err != nil || string(data) != "bytes of "+id):
			f.t.Errorf("%s: File(%s) = %q (%v), want it kept", when, id, data, err)
		case !kept && !errs.Is(err, errs.NotFound):
			f.t.Errorf("%s: File(%s) = %q (%v), want NotFound", when, id, data, err)
		}
	}
}
