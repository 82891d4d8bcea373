package media_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/media"
)

func TestFilePathStaysUnderHome(t *testing.T) {
	home := "/h"
	tests := []struct {
		conv, msg, name, want string
	}{
		{"telegram:42", "17", "photo.jpg", "/h/files/telegram:42/17-photo.jpg"},
		{"slack:C1:1700.1", "1700.2", "../../etc/passwd", "/h/files/slack:C1:1700.1/1700.2-.._.._etc_passwd"},
		{"..", "", "", "/h/files/_../_-_"},
		{"api:x", "m\n1", "a\\b\x00.txt", "/h/files/api:x/m_1-a_b_.txt"},
		{"api:x", "m", "\xff.png", "/h/files/api:x/m-_.png"},
	}
	for _, tc := range tests {
		got := media.FilePath(home, tc.conv, tc.msg, tc.name)
		if got != tc.want {
			t.Errorf("FilePath(%q, %q, %q) = %q, want %q", tc.conv, tc.msg, tc.name, got, tc.want)
		}
		if !strings.HasPrefix(got, filepath.Join(home, "files")+"/") {
			t.Errorf("FilePath(%q, %q, %q) = %q is not under home/files", tc.conv, tc.msg, tc.name, got)
		}
	}
	long := media.SafeName(strings.Repeat("é", 100) + ".jpeg")
	if len(long) > 120 || !strings.HasSuffix(long, ".jpeg") {
		t.Errorf("a long name is cut to %d bytes %q, want at most 120 keeping .jpeg", len(long), long)
	}
}
