package discordfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// RouteAttachment names the GETs of an attachment's URL, on the fake's
// CDN path /attachments/{channel}/{id}/{name}, for Calls and FailNext
// (a failure answers with its status and Message as text, as the CDN).
const RouteAttachment Route = "attachment"

// MessageFlagVoice is the message flag of a voice message
// (IS_VOICE_MESSAGE).
const MessageFlagVoice = 1 << 13

// Attachment is a file a user's message carries (MessageEvent's
// Attachments), put on the fake with PutAttachment.
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Data        []byte
	Size        int64 // the size the message tells: len(Data) when 0
	// Voice makes it a voice message's recording, with a duration and a
	// waveform; the message needs MessageFlagVoice too.
	Voice bool
	// URL is where the CDN path serves it, set by PutAttachment: on the
	// fake, with the signed query Discord's CDN URLs have.
	URL string
}

// File is a file the bot sent with a message (a multipart files[n]).
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// PutAttachment puts a on the fake's CDN for channel and returns it with
// its id and URL.
func (s *Server) PutAttachment(channel string, a Attachment) Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.ID == "" {
		a.ID = s.snowflake(time.Now())
	}
	a.URL = s.srv.URL + "/attachments/" + channel + "/" + a.ID + "/" + url.PathEscape(a.Filename) +
		"?ex=6650a1b2&is=664f5032&hm=0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	s.attachments[a.ID] = a
	return a
}

// object is a as a message's "attachments" carry it.
func (a Attachment) object() map[string]any {
	size := a.Size
	if size == 0 {
		size = int64(len(a.Data))
	}
	o := map[string]any{"id": a.ID, "filename": a.Filename, "size": size, "url": a.URL, "proxy_url": a.URL}
	if a.ContentType != "" {
		o["content_type"] = a.ContentType
	}
	if a.Voice {
		o["duration_secs"] = 2.5
		o["waveform"] = "AAAAAAAAAAAA"
	}
	return o
}

// serveAttachment is the CDN path: the bytes of an attachment put on the
// fake, with no token asked, as Discord's CDN serves them; 404 with the
// CDN's words for any other.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var fail *Failure
	if q := s.failures[RouteAttachment]; len(q) > 0 {
		fail, s.failures[RouteAttachment] = q[0], q[1:]
	}
	a, found := s.attachments[r.PathValue("id")]
	status := http.StatusOK
	switch {
	case fail != nil:
		status = fail.Status
	case !found:
		status = http.StatusNotFound
	}
	s.calls = append(s.calls, Call{Route: RouteAttachment, Method: r.Method, Path: r.URL.Path, Status: status, At: time.Now()})
	s.notify()
	s.mu.Unlock()
	switch {
	case fail != nil:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(fail.Status)
		_, _ = io.WriteString(w, fail.Message)
	case status == http.StatusNotFound:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "This content is no longer available.")
	default:
		w.Header().Set("Content-Type", a.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Data)))
		_, _ = w.Write(a.Data)
	}
}

// readMessageBody reads a create or follow-up request: JSON, or, with
// files, multipart with the JSON in payload_json and the files in
// files[n], as discordgo sends them.
func readMessageBody(r *http.Request, b []byte) (messageBody, []File, error) {
	var body messageBody
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return body, nil, json.Unmarshal(b, &body)
	}
	var files []File
	mr := multipart.NewReader(bytes.NewReader(b), params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return body, files, nil
		} else if err != nil {
			return body, nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return body, nil, err
		}
		switch name := p.FormName(); {
		case name == "payload_json":
			if err := json.Unmarshal(data, &body); err != nil {
				return body, nil, err
			}
		case strings.HasPrefix(name, "files["):
			files = append(files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
		}
	}
}
