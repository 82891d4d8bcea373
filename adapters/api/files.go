package api

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"mime"
	"net/http"
	"path"
	"strconv"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// maxMessageFiles bounds the files one message carries: a request's
// content parts that are files, or a form's file parts.
const maxMessageFiles = 10

// upload is a file a request carried, read whole and checked, not yet
// kept. index is its place in the request, which its id in the store is
// made from.
type upload struct {
	index int
	name  string
	mime  string
	kind  sessions.AttachmentKind
	data  []byte
}

// blobID is the store id of a message's file: made from the
// conversation, the message id (the Idempotency-Key, or the id herald
// made) and the file's index in the request, so a retried request puts
// its files under the same ids, replacing rather than adding. Hashed, it
// is short and safe whatever the key holds.
func blobID(conv, msgID string, index int) string {
	sum := sha256.Sum256([]byte(conv + "\n" + msgID))
	return "api/" + hex.EncodeToString(sum[:16]) + "/" + strconv.Itoa(index)
}

// inlineFileBytes is what a completion's JSON body may hold beyond
// http.max_body_bytes for the files it carries inline (data URLs,
// input_audio): one file at the limit, in base64. Larger files come by
// URL, or as a form's file parts. Without a store, nothing.
func (s *Server) inlineFileBytes() int64 {
	if s.opts.Files == nil {
		return 0
	}
	return int64(base64.StdEncoding.EncodedLen(int(s.opts.MaxFileBytes)))
}

// checkFile refuses a file over the limit, naming it.
func (s *Server) checkFile(op, where string, size int64) error {
	if size > s.opts.MaxFileBytes {
		return errs.E(op, errs.TooLarge, "%s is over the limit of %d bytes for a file (attachments.max_bytes)", where, s.opts.MaxFileBytes)
	}
	return nil
}

// filesTaken refuses a request with files when no store keeps them, and
// a message with more than maxMessageFiles.
func (s *Server) filesTaken(op string, n int) error {
	switch {
	case n == 0:
		return nil
	case s.opts.Files == nil:
		return errs.E(op, errs.Invalid, "this server takes no files: it has no store to keep them in")
	case n > maxMessageFiles:
		return errs.E(op, errs.Invalid, "the message carries %d files, over the limit of %d", n, maxMessageFiles)
	}
	return nil
}

// keepFiles puts the uploads of message msgID into the store and
// returns them as the entry's attachments. A put that fails leaves what
// was put before it: a retry puts the same ids again, and a message that
// kept its files may be queued already under this id.
func (s *Server) keepFiles(ctx context.Context, conv, msgID string, ups []upload) ([]sessions.Attachment, error) {
	var atts []sessions.Attachment
	for _, u := range ups {
		id := blobID(conv, msgID, u.index)
		if err := s.opts.Files.PutFile(ctx, id, u.data); err != nil {
			return nil, err
		}
		atts = append(atts, sessions.Attachment{Name: u.name, MIME: u.mime, Size: int64(len(u.data)), Kind: u.kind, Blob: id})
	}
	return atts, nil
}

// dropFiles forgets a message's files when nothing will read them: the
// inbox refused the message, or it was a redelivery whose turn had
// committed (and released them) before this request put them again.
func (s *Server) dropFiles(ctx context.Context, atts []sessions.Attachment) {
	for _, a := range atts {
		if err := s.opts.Files.DeleteFile(context.WithoutCancel(ctx), a.Blob); err != nil {
			s.log.Warn("file of a message not taken is left in the store", "blob", a.Blob, "err", err)
		}
	}
}

// refused says whether err is the inbox's refusal of the message as it
// is, so that it was not queued. Another error (the store could not be
// reached) may come after the entry was written; nil is none.
func refused(err error) bool {
	c := errs.CodeOf(err)
	return c == errs.Invalid || c == errs.TooLarge
}

// mediaType is the type a Content-Type names, lower case and without its
// parameters, or "" when it names none.
func mediaType(contentType string) string {
	t, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return t
}

// fileType is the type of a file a client sent: the one it declared,
// else the one its name's extension stands for, else what its bytes
// look like.
func fileType(declared, name string, data []byte) string {
	if t := mediaType(declared); t != "" && t != "application/octet-stream" {
		return t
	}
	if t := mediaType(mime.TypeByExtension(path.Ext(name))); t != "" {
		return t
	}
	return mediaType(http.DetectContentType(data))
}

// extensions are the file name extensions of the types a request's
// files are given names by, where the name carries none.
var extensions = map[string]string{
	"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
	"image/bmp": ".bmp", "image/heic": ".heic", "image/heif": ".heif", "image/svg+xml": ".svg",
	"audio/wav": ".wav", "audio/x-wav": ".wav", "audio/mpeg": ".mp3", "audio/flac": ".flac",
	"audio/ogg": ".ogg", "audio/mp4": ".m4a", "audio/webm": ".webm", "audio/aac": ".aac",
}

// fileName is name, or, when it is empty, "<stem>-<index>" with the
// extension of mimeType.
func fileName(name, stem string, index int, mimeType string) string {
	if name != "" && name != "." && name != "/" {
		return name
	}
	return stem + "-" + strconv.Itoa(index) + extensions[mimeType]
}
