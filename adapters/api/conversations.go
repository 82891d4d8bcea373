package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Timeline page sizes.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

type messageRequest struct {
	Text string `json:"text"`
}

type messageResponse struct {
	MessageID string `json:"message_id"`
}

type timelinePage struct {
	Items []sessions.TimelineItem `json:"items"`
	Next  string                  `json:"next"` // pass as after to read on
}

// postMessage queues a message as a turn of the conversation and answers
// 202 at once; the reply shows in the timeline. The body is JSON, or a
// multipart form whose text field is the text and whose file parts are
// the message's files.
func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	const op = "api.postMessage"
	conv, err := conversation(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req messageRequest
	var ups []upload
	if mediaType(r.Header.Get("Content-Type")) == "multipart/form-data" {
		req, ups, err = s.readForm(w, r)
	} else {
		err = s.decodeBody(w, r, &req)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(req.Text) == "" && len(ups) == 0 {
		s.fail(w, r, errs.E(op, errs.Invalid, "text is missing or empty"))
		return
	}
	in := sessions.Inbound{
		Conv:      conv,
		Sender:    Platform,
		MessageID: messageID(r),
		Text:      req.Text,
		Kind:      sessions.KindUser,
		Meta:      map[string]string{"target": conv},
	}
	if in.Attachments, err = s.keepFiles(r.Context(), conv, in.MessageID, ups); err != nil {
		s.fail(w, r, err)
		return
	}
	dup, err := s.deliverReport(r.Context(), in)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if dup && len(in.Attachments) > 0 {
		// A retry: when its turn has answered, it has committed and
		// released its files, and those put again above are read by
		// no one.
		_, answered, err := s.answerStart(r.Context(), conv, in.MessageID, "")
		if err != nil {
			s.log.Warn("could not tell whether a retried message was answered", "conv", conv, "message_id", in.MessageID, "err", err)
		} else if answered {
			s.dropFiles(r.Context(), in.Attachments)
		}
	}
	writeJSON(w, http.StatusAccepted, messageResponse{MessageID: in.MessageID})
}

// timeline answers one page of the conversation's timeline.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	conv, err := conversation(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, errs.E("api.timeline", errs.Invalid, "limit %q is not a positive number", v))
			return
		}
		limit = min(n, maxLimit)
	}
	after := q.Get("after")
	items, err := s.opts.Timeline.ReadTimeline(r.Context(), conv, after, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := timelinePage{Items: items, Next: after}
	if page.Items == nil {
		page.Items = []sessions.TimelineItem{}
	}
	if len(items) > 0 {
		page.Next = items[len(items)-1].Cursor
	}
	writeJSON(w, http.StatusOK, page)
}

// events streams the conversation's timeline as server-sent events, each
// with its cursor as the event id so that a client reconnecting with
// Last-Event-ID resumes where it was. It ends when the client goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	conv, err := conversation(r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after := r.URL.Query().Get("after")
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		after = id
	}
	// A bad cursor is refused with a status while one can still be sent.
	if _, err := s.opts.Timeline.ReadTimeline(r.Context(), conv, after, 1); err != nil {
		s.fail(w, r, err)
		return
	}
	clearWriteDeadline(w)
	out := newSSE(w)
	err = s.follow(r.Context(), conv, after, func(it sessions.TimelineItem) (bool, error) {
		b, err := json.Marshal(it)
		if err != nil {
			return false, err
		}
		return false, out.raw("id: " + it.Cursor + "\nevent: message\ndata: " + string(b) + "\n\n")
	}, followHooks{keepAlive: out.comment})
	if err != nil && r.Context().Err() == nil && !errors.Is(err, context.Canceled) && !errs.Is(err, errs.Closed) {
		s.log.Warn("event stream ended", "conv", conv, "err", err)
	}
}
