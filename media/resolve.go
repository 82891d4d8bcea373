package media

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

// ResolveFile is path as a file an agent of conversation conv may hand
// on: one in workspace (a relative path is taken from it) or one herald
// keeps for conv (ConvDir under home; none when conv is empty), as an
// absolute path with its links followed, so that a link cannot lead out
// of both. Another conversation's files are outside. Errors: Invalid
// (empty, relative with no workspace, outside both, not a regular
// file), NotFound.
func ResolveFile(path, workspace, home, conv string) (string, error) {
	const op = "media.ResolveFile"
	rs := roots{workspace: workspace}
	if conv != "" {
		rs.kept = ConvDir(home, conv)
	}
	p := strings.TrimSpace(path)
	switch {
	case p == "":
		return "", errs.E(op, errs.Invalid, "a file's path is empty")
	case !filepath.IsAbs(p) && workspace == "":
		return "", errs.E(op, errs.Invalid, "%q is relative and there is no workspace to take it from; give the full path of a file herald keeps for this conversation", path)
	case !filepath.IsAbs(p):
		p = filepath.Join(workspace, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", errs.E(op, errs.NotFound, "no file at %s", p)
	}
	if err != nil {
		return "", errs.E(op, errs.Invalid, "%s cannot be read: %v", p, err)
	}
	if _, _, ok := rs.holding(real); !ok {
		return "", errs.E(op, errs.Invalid, "%s is outside the workspace and the files herald keeps for this conversation", path)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", errs.E(op, errs.Invalid, "%s cannot be read: %v", p, err)
	}
	if !fi.Mode().IsRegular() {
		return "", errs.E(op, errs.Invalid, "%s is not a file", path)
	}
	return real, nil
}

// Peek is what an agent handed the file at path is told of it: its size
// and type, sniffed from its first bytes; image says LoadImage reads it.
func Peek(path string) (size int64, mime string, image bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", false, err
	}
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, "", false, err
	}
	mime, image = ImageType(head[:n])
	if !image {
		mime = typeOf("", head[:n])
	}
	return fi.Size(), mime, image, nil
}
