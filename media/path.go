package media

import (
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// FilesDir is the directory under $HERALD_HOME where the files of each
// conversation are kept.
const FilesDir = "files"

// maxNameBytes bounds a file's name on the disk.
const maxNameBytes = 120

// FilePath is where herald keeps a file that came with a message:
// <home>/files/<conversation>/<message id>-<name>. Each element is made
// safe for a file name (no separators, no dot-dot, no control
// characters, bounded), so the path is always under home/files whatever
// the platform sent.
func FilePath(home, conv, messageID, name string) string {
	return filepath.Join(ConvDir(home, conv), SafeName(messageID)+"-"+SafeName(name))
}

// ConvDir is the directory of conv's files: <home>/files/<conversation>.
func ConvDir(home, conv string) string {
	return filepath.Join(home, FilesDir, SafeName(conv))
}

// SafeName is s as one element of a path: separators, control characters
// and bad UTF-8 become '_', a name of dots becomes "_", and it is cut to
// 120 bytes on a rune boundary, keeping its extension when it can.
func SafeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(s, "_"))
	if strings.Trim(s, ".") == "" {
		return "_" + s
	}
	if len(s) <= maxNameBytes {
		return s
	}
	ext := filepath.Ext(s)
	if len(ext) > 16 {
		ext = ""
	}
	cut := maxNameBytes - len(ext)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ext
}
