package api

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"unicode/utf8"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
)

// formPartBytes is what a form's part may add to the body beyond its
// content: its boundary and headers.
const formPartBytes = 4 << 10

// readForm reads a message posted as multipart/form-data: the field
// text (what the JSON body's text is), and up to maxMessageFiles file
// parts, each within MaxFileBytes. The parts are read as they come, so a
// file over the limit is refused without the rest of the body being
// read. Errors: Invalid (not a form, a field the route does not take, a
// text that is not UTF-8, too many files), TooLarge (a file, naming it
// and the limit, or the text over http.max_body_bytes).
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) (messageRequest, []upload, error) {
	const op = "api.postMessage"
	var req messageRequest
	limit := s.opts.MaxBodyBytes + maxMessageFiles*(s.opts.MaxFileBytes+formPartBytes)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		return req, nil, errs.E(op, errs.Invalid, "the body is not a multipart form: %v", err)
	}
	var ups []upload
	seenText := false
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return req, ups, nil
		}
		if err != nil {
			return req, nil, formError(op, err, limit)
		}
		switch p.FormName() {
		case "text":
			if seenText {
				return req, nil, errs.E(op, errs.Invalid, "the form has the field text twice")
			}
			seenText = true
			b, err := io.ReadAll(io.LimitReader(p, s.opts.MaxBodyBytes+1))
			if err != nil {
				return req, nil, formError(op, err, limit)
			}
			if int64(len(b)) > s.opts.MaxBodyBytes {
				return req, nil, errs.E(op, errs.TooLarge, "the field text is over the limit of %d bytes (http.max_body_bytes)", s.opts.MaxBodyBytes)
			}
			if !utf8.Valid(b) {
				return req, nil, errs.E(op, errs.Invalid, "the field text is not UTF-8")
			}
			req.Text = string(b)
		case "file":
			if err := s.filesTaken(op, len(ups)+1); err != nil {
				return req, nil, err
			}
			up, err := s.readFormFile(op, p, len(ups))
			if err != nil {
				return req, nil, formError(op, err, limit)
			}
			ups = append(ups, up)
		default:
			return req, nil, errs.E(op, errs.Invalid, "the form's field %q is not one this route takes (text, file)", p.FormName())
		}
	}
}

// readFormFile reads the form's file part p, the index-th.
func (s *Server) readFormFile(op string, p *multipart.Part, index int) (upload, error) {
	name := p.FileName()
	where := fmt.Sprintf("file %q", name)
	if name == "" {
		where = fmt.Sprintf("file %d of the form", index+1)
	}
	data, err := io.ReadAll(io.LimitReader(p, s.opts.MaxFileBytes+1))
	if err != nil {
		return upload{}, err
	}
	if err := s.checkFile(op, where, int64(len(data))); err != nil {
		return upload{}, err
	}
	mimeType := fileType(p.Header.Get("Content-Type"), name, data)
	return upload{index: index, name: fileName(name, "file", index, mimeType), mime: mimeType, kind: adapters.KindOf(mimeType), data: data}, nil
}

// formError is the error of a form that could not be read: TooLarge when
// the body went over limit, Invalid when it is not a well-formed form,
// err itself when it is already one of herald's.
func formError(op string, err error, limit int64) error {
	var tooBig *http.MaxBytesError
	var e *errs.Error
	switch {
	case errors.As(err, &tooBig):
		return errs.E(op, errs.TooLarge, "request body is over the limit of %d bytes", limit)
	case errors.As(err, &e):
		return err
	}
	return errs.E(op, errs.Invalid, "the form could not be read: %v", err)
}
