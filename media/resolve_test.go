package media_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
)

func TestResolveFileKeepsToTheWorkspaceAndTheConversationsFiles(t *testing.T) {
	ws, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inWS := write(filepath.Join(ws, "docs", "plan.md"))
	kept := write(media.FilePath(home, "telegram:1", "5", "photo.jpg"))
	others := write(media.FilePath(home, "telegram:2", "5", "photo.jpg"))
	secret := write(filepath.Join(outside, "secret.txt"))
	if err := os.Symlink(secret, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, path, workspace string
		want                  string    // the resolved path, when it resolves
		code                  errs.Code // else the error's
		says                  string
	}{
		{"relative, in the workspace", "docs/plan.md", ws, inWS, "", ""},
		{"absolute, in the workspace", inWS, ws, inWS, "", ""},
		{"kept by herald", kept, ws, kept, "", ""},
		{"kept by herald, no workspace", kept, "", kept, "", ""},
		{"outside both", secret, ws, "", errs.Invalid, "is outside the workspace"},
		{"another conversation's", others, ws, "", errs.Invalid, "is outside"},
		{"up and out", "../" + filepath.Base(outside) + "/secret.txt", ws, "", errs.Invalid, "is outside"},
		{"a link out of the workspace", "link.txt", ws, "", errs.Invalid, "is outside"},
		{"not there", "docs/gone.md", ws, "", errs.NotFound, "no file at"},
		{"a directory", "docs", ws, "", errs.Invalid, "is not a file"},
		{"relative with no workspace", "plan.md", "", "", errs.Invalid, "no workspace"},
		{"empty", " ", ws, "", errs.Invalid, "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := media.ResolveFile(tc.path, tc.workspace, home, "telegram:1")
			if tc.code == "" {
				want, _ := filepath.EvalSymlinks(tc.want)
				if err != nil || got != want {
					t.Errorf("ResolveFile(%q) = %q, %v; want %q", tc.path, got, err, want)
				}
				return
			}
			if !errs.Is(err, tc.code) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("ResolveFile(%q) = %q, %v; want %s saying %q", tc.path, got, err, tc.code, tc.says)
			}
		})
	}
}
