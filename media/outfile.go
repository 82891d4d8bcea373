package media

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// photoTypes are the image types a file goes as a picture in, rather
// than as a document: those every platform shows.
var photoTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// photoExts are the names' extensions of those types.
var photoExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".webp": true}

// outFile is a file read to be sent.
type outFile struct {
	Name  string
	MIME  string
	Photo bool
	Data  []byte
}

// hash is the hex SHA-256 of the file's bytes.
func (f outFile) hash() string {
	sum := sha256.Sum256(f.Data)
	return hex.EncodeToString(sum[:])
}

// roots are the directories a turn may send files from: its workspace
// (the configured one, or a sub-agent's worktree) and the directory of
// the files herald keeps for its conversation (ConvDir). Either may be
// empty.
type roots struct {
	workspace string
	kept      string
}

// readOut reads the file at path to be sent: a path relative to the
// workspace, or an absolute one inside either root once its symbolic
// links are resolved. It refuses, with a reason the model can act on, a
// path outside both roots, one that is missing, a directory or anything
// but a regular file, an empty file, and one over limit bytes.
func readOut(op string, rs roots, path string, limit int64) (outFile, error) {
	path = strings.TrimSpace(path)
	if !filepath.IsAbs(path) {
		if rs.workspace == "" {
			return outFile{}, errs.E(op, errs.Invalid, "path %q is relative and there is no workspace: give the absolute path of a file herald keeps for this conversation (under %s)", path, rs.kept)
		}
		path = filepath.Join(rs.workspace, path)
	}
	path = filepath.Clean(path)
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return outFile{}, pathError(op, path, err)
	}
	dir, rel, ok := rs.holding(real)
	if !ok {
		return outFile{}, errs.E(op, errs.Invalid, "%q is outside the workspace and the files herald keeps for this conversation: only a file in one of them can be sent", path)
	}
	// Opened through the root it was found in: a link changed since the
	// path was resolved cannot lead outside it.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return outFile{}, pathError(op, path, err)
	}
	defer root.Close()
	// Looked at before it is opened: opening a named pipe would wait for
	// a writer.
	fi, err := root.Lstat(rel)
	switch {
	case err != nil:
		return outFile{}, pathError(op, path, err)
	case fi.IsDir():
		return outFile{}, errs.E(op, errs.Invalid, "%q is a directory: send the files in it one by one, or an archive of it", path)
	case !fi.Mode().IsRegular():
		return outFile{}, errs.E(op, errs.Invalid, "%q is not a regular file (%v)", path, fi.Mode().Type())
	case fi.Size() == 0:
		return outFile{}, errs.E(op, errs.Invalid, "%q is empty: there is nothing to send", path)
	case fi.Size() > limit:
		return outFile{}, tooLarge(op, path, fi.Size(), limit)
	}
	f, err := root.Open(rel)
	if err != nil {
		return outFile{}, pathError(op, path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	switch {
	case err != nil:
		return outFile{}, pathError(op, path, err)
	case len(data) == 0:
		return outFile{}, errs.E(op, errs.Invalid, "%q is empty: there is nothing to send", path)
	case int64(len(data)) > limit:
		return outFile{}, tooLarge(op, path, int64(len(data)), limit)
	}
	name := filepath.Base(path)
	typ, photo := kindOf(name, data)
	return outFile{Name: name, MIME: typ, Photo: photo, Data: data}, nil
}

// holding returns the root that holds the resolved path real, resolved
// itself, and real relative to it.
func (rs roots) holding(real string) (dir, rel string, ok bool) {
	for _, root := range []string{rs.workspace, rs.kept} {
		if root == "" {
			continue
		}
		dir, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		rel, err := filepath.Rel(dir, real)
		if err == nil && filepath.IsLocal(rel) {
			return dir, rel, true
		}
	}
	return "", "", false
}

// kindOf is the type of a file named name holding data, and whether it
// goes as a picture: its bytes decide that it is an image (a picture
// only when its name does not say it is something else); the name's
// extension names the type of anything else, when the bytes do not.
func kindOf(name string, data []byte) (string, bool) {
	sniffed := http.DetectContentType(data)
	ext := strings.ToLower(filepath.Ext(name))
	if photoTypes[sniffed] {
		return sniffed, ext == "" || photoExts[ext]
	}
	if byName := mime.TypeByExtension(ext); byName != "" && !strings.HasPrefix(byName, "image/") {
		return byName, false
	}
	return sniffed, false
}

// pathError words an error of the file system about path for the model.
func pathError(op, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.E(op, errs.NotFound, "%q does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return errs.E(op, errs.Invalid, "%q cannot be read: permission denied", path)
	}
	return errs.E(op, errs.Unavailable, "%q cannot be read: %v", path, err)
}

func tooLarge(op, path string, size, limit int64) error {
	return errs.E(op, errs.TooLarge, "%q is %d bytes, over the %d bytes a file sent may have (attachments.max_bytes)", path, size, limit)
}

// outPrefix starts the id of every file a message sends (OutboundID).
const outPrefix = "out-"

// OutboundID is the id the bytes of a file sent to the chat of to are
// kept under until its message was accepted: "out-", a digest of the
// chat, "-", a digest of what names the file among all others (its
// conversation, the turn's entry, the tool call, its bytes' hash). A
// turn run again after a crash puts the same bytes under the same id;
// the chat's digest lets whoever serves a chat's files (the local API)
// serve only those sent to it.
func OutboundID(to outbox.Target, what ...string) string {
	return outPrefix + chatDigest(to) + "-" + digest(what...)[:32]
}

// SentTo reports whether id is the id of a file sent to the chat of to
// (OutboundID).
func SentTo(id string, to outbox.Target) bool {
	return strings.HasPrefix(id, outPrefix+chatDigest(to)+"-")
}

// chatDigest names a chat, whatever its thread, in 16 hex digits.
func chatDigest(to outbox.Target) string {
	return digest(to.Platform, to.Chat)[:16]
}

// digest is the hex SHA-256 of parts, each ended by a NUL so that no
// two lists of parts read the same.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
