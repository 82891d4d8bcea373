package api

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// timelineFiles are the files m sends as conv's timeline lists them,
// each with the path the API serves it at.
func timelineFiles(conv string, files []outbox.File) []sessions.TimelineFile {
	var out []sessions.TimelineFile
	for _, f := range files {
		out = append(out, sessions.TimelineFile{Name: f.Name, MIME: f.MIME, Size: f.Size, URL: fileURL(conv, f)})
	}
	return out
}

// fileURL is where the API serves f, a file sent to conv:
// /api/v1/conversations/{id}/files/{file}?name={name}.
func fileURL(conv string, f outbox.File) string {
	id := strings.TrimPrefix(conv, Platform+":")
	return "/api/v1/conversations/" + url.PathEscape(id) + "/files/" + url.PathEscape(f.Blob) + "?" + url.Values{"name": {f.Name}}.Encode()
}

// file serves the bytes of a file sent to the conversation, as its
// timeline item's url names it. Only the files sent to that
// conversation are served, each as an attachment: a page of herald's
// own origin never renders what a model sent.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	const op = "api.file"
	conv, err := conversation(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("file")
	if s.opts.Files == nil || !media.SentTo(id, outbox.Target{Platform: Platform, Chat: strings.TrimPrefix(conv, Platform+":")}) {
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no file %q was sent to this conversation", id))
		return
	}
	data, err := s.opts.Files.File(r.Context(), id)
	if errs.Is(err, errs.NotFound) {
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("file %q is no longer kept", id))
		return
	}
	if err != nil {
		s.fail(w, r, errs.Wrap(op, errs.Unavailable, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", http.DetectContentType(data))
	h.Set("X-Content-Type-Options", "nosniff")
	disposition := "attachment"
	if name := r.URL.Query().Get("name"); name != "" {
		if d := mime.FormatMediaType("attachment", map[string]string{"filename": name}); d != "" {
			disposition = d
		}
	}
	h.Set("Content-Disposition", disposition)
	h.Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// filesNote is what a completion's answer says, after text, of the
// files its turn sent: a line each, with the path to fetch it from,
// apart from text by a blank line; "" for none.
func filesNote(text string, files []sessions.TimelineFile) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	if text != "" {
		b.WriteString("\n\n")
	}
	b.WriteString("Files sent:")
	for _, f := range files {
		typ := f.MIME
		if typ == "" {
			typ = "file"
		}
		fmt.Fprintf(&b, "\n- %s (%s, %d bytes): %s", f.Name, typ, f.Size, f.URL)
	}
	return b.String()
}
