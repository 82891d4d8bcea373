package telegramfake

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf16"
)

// DownloadLimit is the largest file getFile lets a bot download, as on
// Telegram (20 MB); getFile refuses a larger one with "file is too big".
const DownloadLimit = 20 << 20

// Download is the name Fail scripts, and Calls records, the downloads of
// /file/bot<token>/<file_path> under, as though it were a method.
const Download = "file"

// maxCaption is a caption's limit in UTF-16 code units. Like maxText it
// is measured with the markup, stricter than Telegram.
const maxCaption = 1024

// File is a file on the fake: the messages a test queues carry it
// (Incoming's Photo, Voice, Audio, Document), getFile tells its path and
// the file route serves its bytes.
type File struct {
	ID   string // the file_id; PutFile makes one when empty
	Name string // file_name, sent with a document or audio
	MIME string // mime_type, sent with a document, audio or voice note
	Data []byte
	// Size is the file_size the message and getFile report: len(Data)
	// when 0, none when -1 (the download then has no Content-Length
	// either, and only its reader's bound stops it).
	Size int64
	Path string // file_path; PutFile makes one when empty
}

// reported is the file_size Telegram tells, or -1 for none.
func (f File) reported() int64 {
	if f.Size == 0 {
		return int64(len(f.Data))
	}
	return f.Size
}

// upload is a file a bot sent, as a multipart part.
type upload struct {
	name string
	data []byte
}

// PutFile puts f on the fake and returns it with its id and path filled.
func (s *Server) PutFile(f File) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFile++
	if f.ID == "" {
		f.ID = fmt.Sprintf("BQACAgIAAx0file%04d", s.nextFile)
	}
	if f.Path == "" {
		f.Path = fmt.Sprintf("documents/file_%d", s.nextFile)
	}
	s.files[f.ID] = f
	return f
}

// getFileLocked answers getFile: the file's size and path, or Telegram's
// refusals of an unknown id and of a file over DownloadLimit.
func (s *Server) getFileLocked(p map[string]string) answer {
	f, found := s.files[p["file_id"]]
	switch {
	case !found:
		return fail(http.StatusBadRequest, "Bad Request: invalid file_id")
	case f.reported() > DownloadLimit || int64(len(f.Data)) > DownloadLimit:
		return fail(http.StatusBadRequest, "Bad Request: file is too big")
	}
	out := map[string]any{"file_id": f.ID, "file_unique_id": "u" + f.ID, "file_path": f.Path}
	if n := f.reported(); n >= 0 {
		out["file_size"] = n
	}
	return ok(out)
}

// serveFile is GET /file/bot<token>/<file_path>: the file's bytes, or a
// scripted failure (Fail(Download, …)), answered as the Bot API answers
// its errors.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	token, path, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/file/bot"), "/")
	params := map[string]string{"file_path": path}
	s.mu.Lock()
	var a answer
	var data []byte
	var f File
	failure, failed := s.nextFailureLocked(Download)
	switch {
	case r.Method != http.MethodGet:
		a = fail(http.StatusMethodNotAllowed, "Method Not Allowed")
	case failed:
		a = failure.answer()
	case token != s.token:
		a = fail(http.StatusUnauthorized, "Unauthorized")
	default:
		a = fail(http.StatusNotFound, "Not Found")
		for _, c := range s.files {
			if c.Path == path {
				f, data, a = c, c.Data, answer{}
			}
		}
	}
	s.mu.Unlock()
	s.record(Download, params, r.RemoteAddr, a)
	if a.status != 0 {
		write(w, a)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if f.reported() >= 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	}
	_, _ = w.Write(data)
}

// sendFileLocked answers sendPhoto and sendDocument (field "photo" or
// "document"): the file must come as an upload, the caption within
// Telegram's limit and, with parse_mode HTML, parsable.
func (s *Server) sendFileLocked(p map[string]string, files map[string]upload, field string) answer {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil {
		return fail(http.StatusBadRequest, "Bad Request: chat not found")
	}
	up, found := files[field]
	switch {
	case !found:
		return fail(http.StatusBadRequest, "Bad Request: there is no "+field+" in the request")
	case len(up.data) == 0:
		return fail(http.StatusBadRequest, "Bad Request: file must be non-empty")
	case len(utf16.Encode([]rune(p["caption"]))) > maxCaption:
		return fail(http.StatusBadRequest, "Bad Request: message caption is too long")
	case strings.EqualFold(p["parse_mode"], "HTML"):
		if why := checkHTML(p["caption"]); why != "" {
			return fail(http.StatusBadRequest, "Bad Request: can't parse entities: "+why)
		}
	}
	m := &Sent{Chat: chat, Text: p["caption"], ParseMode: p["parse_mode"], Media: field, FileName: up.name, Data: up.data}
	if a, bad := s.fillSentLocked(m, p); bad {
		return a
	}
	return ok(s.messageJSON(m))
}
