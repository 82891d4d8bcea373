package storetest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/sessions"
)

// runFiles checks media.Store: bytes kept by id across a reopen, replaced
// by a second put, forgotten by a delete, and bad input refused.
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
}
