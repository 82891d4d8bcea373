package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// InboxDir is the directory of the workspace a person's documents are
// saved in.
const InboxDir = "inbox"

// maxInlineText bounds a text file whose contents the model is given in
// the message.
const maxInlineText = 32 << 10

// keep saves a document where the agent works with it, the workspace's
// inbox/ (or, with no workspace, where herald keeps it), and tells the
// model its name, type, size and path, and a small text file's contents.
func (r *Runner) keep(ctx context.Context, t *turnFiles, f file, platform, workspace string) {
	data, ok := r.get(ctx, t, f, platform)
	if !ok {
		return
	}
	path := f.path
	if workspace != "" {
		if p, err := saveInbox(workspace, filepath.Base(f.path), data); err != nil {
			r.log.Warn("saving a document in the workspace failed; it stays where herald keeps it", "workspace", workspace, "err", err)
		} else {
			path = p
		}
	}
	inline := len(data) <= maxInlineText && utf8.Valid(data) && !bytes.ContainsRune(data, 0)
	line := lineDocument(f.name, typeOf(f.att.MIME, data), int64(len(data)), path, inline)
	if inline {
		line += "\n" + inlineText(f.name, string(data))
	}
	t.lines = append(t.lines, line)
}

// saveInbox writes data to <workspace>/inbox/name, or, when another file
// is there already (the same message id in another conversation), to
// the first free of <n>-name, and returns the path. A file there with
// the same bytes is this one, saved by an earlier run of the turn.
func saveInbox(workspace, name string, data []byte) (string, error) {
	dir := filepath.Join(workspace, InboxDir)
	for n := 1; n <= 20; n++ {
		p := filepath.Join(dir, name)
		if n > 1 {
			p = filepath.Join(dir, fmt.Sprintf("%d-%s", n, name))
		}
		had, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return p, writeFile(p, data)
		case err != nil:
			return "", err
		case bytes.Equal(had, data):
			return p, nil
		}
	}
	return "", fmt.Errorf("%s has 20 other files named %s", dir, name)
}

// typeOf is a file's type: as the platform said, else sniffed.
func typeOf(mime string, data []byte) string {
	if mime != "" {
		return mime
	}
	return http.DetectContentType(data[:min(len(data), 512)])
}
