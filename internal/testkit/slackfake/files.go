package slackfake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The names Fail scripts, and Calls records, the two file routes that
// are not Web API methods under: the GETs of a file's url_private, and
// the POSTs to the URL files.getUploadURLExternal hands out.
const (
	Download = "download"
	Upload   = "upload"
)

// File is a file on the fake: a message event carries it (Object), and
// its url_private serves it to the bot token, as Slack does; any other
// caller is redirected to a sign-in page.
type File struct {
	ID      string // PutFile makes one when empty
	Name    string
	MIME    string
	Subtype string // "slack_audio" for a voice clip
	Data    []byte
	Size    int64 // the size events tell: len(Data) when 0
	// URLPrivate is where the bytes are, set by PutFile.
	URLPrivate string
}

// Object is f as a message event's "files" carry it.
func (f File) Object() map[string]any {
	size := f.Size
	if size == 0 {
		size = int64(len(f.Data))
	}
	o := map[string]any{"id": f.ID, "name": f.Name, "title": f.Name, "mimetype": f.MIME, "size": size,
		"url_private": f.URLPrivate, "url_private_download": f.URLPrivate + "?download=1", "mode": "hosted"}
	if f.Subtype != "" {
		o["subtype"] = f.Subtype
	}
	return o
}

// Uploaded is a file the bot uploaded and shared (files upload v2:
// files.getUploadURLExternal, the upload, files.completeUploadExternal).
type Uploaded struct {
	ID      string
	Name    string // the upload's filename
	Title   string
	Data    []byte
	Channel string // completeUploadExternal's channel_id
	Thread  string // its thread_ts
	Comment string // its initial_comment
}

// upload is an upload in progress: a URL handed out, perhaps the bytes.
type upload struct {
	name   string
	length int
	data   []byte
	sent   bool // the bytes came
}

// PutFile puts f on the fake and returns it with its id and url_private.
func (s *Server) PutFile(f File) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	if f.ID == "" {
		f.ID = fmt.Sprintf("F0FILE%04d", s.seq)
	}
	f.URLPrivate = s.srv.URL + "/files-pri/" + s.TeamID + "-" + f.ID + "/" + url.PathEscape(f.Name)
	s.files[f.ID] = f
	return f
}

// Uploads returns the files shared so far, in order.
func (s *Server) Uploads() []Uploaded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Uploaded(nil), s.uploaded...)
}

// serveFile is GET /files-pri/<team>-<id>/<name>: the bytes to the bot
// token; a redirect to the sign-in page for anyone else, as Slack
// answers a caller that may not read the file.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	_, id, _ := strings.Cut(r.PathValue("file"), "-")
	call := Call{Method: Download, Token: token, Params: url.Values{"file": {id}}}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.notifyLocked()
	f, found := s.files[id]
	var failure Failure
	if q := s.failures[Download]; len(q) > 0 {
		failure, s.failures[Download] = q[0], q[1:]
	}
	s.mu.Unlock()
	switch {
	case failure != (Failure{}):
		writeFailure(w, failure)
	case token != s.BotToken:
		http.Redirect(w, r, "/signin?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
	case !found:
		http.Error(w, "file not found", http.StatusNotFound)
	default:
		w.Header().Set("Content-Type", f.MIME)
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Data)))
		_, _ = w.Write(f.Data)
	}
}

// serveSignIn is the workspace's sign-in page.
func (s *Server) serveSignIn(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!DOCTYPE html><html><head><title>Sign in | Slack</title></head><body>Sign in to herald-test</body></html>")
}

// serveUpload is POST /upload/v1/<id>: the bytes of an upload, as a
// multipart "file" field or as the body itself.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	data, err := uploadBody(r)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: Upload, Token: token, Params: url.Values{"file": {id}}})
	s.notifyLocked()
	var failure Failure
	if q := s.failures[Upload]; len(q) > 0 {
		failure, s.failures[Upload] = q[0], q[1:]
	}
	up, found := s.uploads[id]
	if failure == (Failure{}) && found && err == nil {
		up.data, up.sent = data, true
	}
	s.mu.Unlock()
	switch {
	case failure != (Failure{}):
		writeFailure(w, failure)
	case !found:
		http.Error(w, "no such upload", http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "OK - %d", len(data))
	}
}

func uploadBody(r *http.Request) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return io.ReadAll(r.Body)
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// getUploadURLLocked answers files.getUploadURLExternal: a URL on the
// fake to post the bytes to, and the file's id.
func (s *Server) getUploadURLLocked(p url.Values) map[string]any {
	length, err := strconv.Atoi(p.Get("length"))
	if p.Get("filename") == "" || err != nil || length <= 0 {
		return map[string]any{"ok": false, "error": "invalid_arguments"}
	}
	s.seq++
	id := fmt.Sprintf("F0UPLOAD%04d", s.seq)
	s.uploads[id] = &upload{name: p.Get("filename"), length: length}
	return map[string]any{"ok": true, "upload_url": s.srv.URL + "/upload/v1/" + id, "file_id": id}
}

// completeUploadLocked answers files.completeUploadExternal: every file
// named must have its bytes, of the length announced; each is then
// shared to the channel (and thread) with the comment.
func (s *Server) completeUploadLocked(p url.Values) map[string]any {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p.Get("files")), &files); err != nil || len(files) == 0 {
		return map[string]any{"ok": false, "error": "invalid_arguments"}
	}
	out := make([]map[string]any, 0, len(files))
	for _, f := range files {
		up, found := s.uploads[f.ID]
		switch {
		case !found || !up.sent:
			return map[string]any{"ok": false, "error": "file_not_found"}
		case len(up.data) != up.length:
			return map[string]any{"ok": false, "error": "file_upload_size_mismatch"}
		}
		out = append(out, map[string]any{"id": f.ID, "title": f.Title})
	}
	for _, f := range files {
		up := s.uploads[f.ID]
		delete(s.uploads, f.ID)
		s.uploaded = append(s.uploaded, Uploaded{ID: f.ID, Name: up.name, Title: f.Title, Data: up.data,
			Channel: p.Get("channel_id"), Thread: p.Get("thread_ts"), Comment: p.Get("initial_comment")})
	}
	return map[string]any{"ok": true, "files": out}
}
