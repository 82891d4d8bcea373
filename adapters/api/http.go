package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/websession"
)

// Error types in the JSON error body, after OpenAI's where it has one.
const (
	typeInvalid     = "invalid_request_error"
	typeAuth        = "authentication_error"
	typeNotFound    = "not_found_error"
	typeTooLarge    = "request_too_large"
	typeUnavailable = "service_unavailable"
	typeTimeout     = "timeout"
	typeServer      = "server_error"
	typeRateLimit   = "rate_limit_error"
	typeUpstream    = "upstream_error" // the model's server refused the call
)

// maxIDLen bounds a conversation id from a client.
const maxIDLen = 200

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.route("POST", "/v1/chat/completions", s.chatCompletions)
	s.route("GET", "/v1/models", s.models)
	s.route("GET", "/v1/models/{id}", s.model)
	s.route("POST", "/api/v1/conversations/{id}/messages", s.postMessage)
	s.route("GET", "/api/v1/conversations/{id}/timeline", s.timeline)
	s.route("GET", "/api/v1/conversations/{id}/events", s.events)
	s.route("GET", "/api/v1/conversations/{id}/files/{file}", s.file)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
}

// route registers h for method and path, and a JSON 405 for the path's
// other methods (the mux's own would be plain text).
func (s *Server) route(method, path string, h http.HandlerFunc) {
	s.routeMethods(path, map[string]http.HandlerFunc{method: h})
}

// routeMethods is route for a path served for several methods: one
// handler each, and the JSON 405 naming them all.
func (s *Server) routeMethods(path string, hs map[string]http.HandlerFunc) {
	methods := slices.Sorted(maps.Keys(hs))
	for _, m := range methods {
		s.mux.HandleFunc(m+" "+path, hs[m])
	}
	allow := strings.Join(methods, ", ")
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, typeInvalid, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(methods, " or ")))
	})
}

// authorized checks the bearer key, or else the dashboard's session
// cookie (websession). Both sides are hashed first so the
// comparison takes the same time whatever the lengths.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	token, ok := bearer(r)
	if !ok {
		return websession.Authorized(r, s.opts.APIKey, s.opts.Clock.Now())
	}
	got := sha256.Sum256([]byte(token))
	want := sha256.Sum256([]byte(s.opts.APIKey))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// bearer returns the token of r's "Authorization: Bearer <token>".
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Message: msg, Type: typ}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers with the status err's code calls for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := s.errorFor(r, err)
	writeJSON(w, status, errorBody{Error: detail})
}

// errorFor maps err's code to a status and an error body. The words of
// Invalid and TooLarge errors are the client's to read; others are logged
// and answered in general terms.
func (s *Server) errorFor(r *http.Request, err error) (int, errorDetail) {
	switch errs.CodeOf(err) {
	case errs.Invalid:
		return http.StatusBadRequest, errorDetail{Message: reason(err), Type: typeInvalid}
	case errs.TooLarge:
		return http.StatusRequestEntityTooLarge, errorDetail{Message: reason(err), Type: typeTooLarge}
	case errs.Unavailable, errs.Closed:
		s.log.Warn("request refused", "path", r.URL.Path, "err", err)
		return http.StatusServiceUnavailable, errorDetail{Message: "herald cannot take requests right now; retry later", Type: typeUnavailable}
	}
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	return http.StatusInternalServerError, errorDetail{Message: "internal error", Type: typeServer}
}

func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// decodeBody reads r's JSON body into v within the size limit.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	return s.decodeBodyUpTo(w, r, v, s.opts.MaxBodyBytes)
}

// decodeBodyUpTo reads r's JSON body into v within limit bytes.
func (s *Server) decodeBodyUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	const op = "api.decode"
	body := http.MaxBytesReader(w, r.Body, limit)
	b, err := io.ReadAll(body)
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			return errs.E(op, errs.TooLarge, "request body is over the limit of %d bytes", tooBig.Limit)
		}
		return errs.Wrap(op, errs.Invalid, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errs.E(op, errs.Invalid, "request body is not valid JSON: %v", err)
	}
	return nil
}

// conversation returns the key of the conversation with the client's id.
// The id becomes the chat of the outbox target "api:<id>", so it may not
// hold a colon, and it is kept printable for logs and URLs.
func conversation(id string) (string, error) {
	const op = "api.conversation"
	switch {
	case id == "":
		return "", errs.E(op, errs.Invalid, "empty conversation id")
	case len(id) > maxIDLen:
		return "", errs.E(op, errs.Invalid, "conversation id is over %d bytes", maxIDLen)
	case !utf8.ValidString(id):
		return "", errs.E(op, errs.Invalid, "conversation id is not UTF-8")
	case strings.ContainsFunc(id, func(r rune) bool { return r == ':' || r == '/' || unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		return "", errs.E(op, errs.Invalid, "conversation id %q may not contain colons, slashes, spaces or control characters", id)
	}
	return Platform + ":" + id, nil
}

// conversationFilter is the conversation a list's ?conversation= names:
// a conversation key ("telegram:42") as it is, an API conversation's id
// as its key, "" for every conversation.
func conversationFilter(v string) (string, error) {
	if v == "" || strings.Contains(v, ":") {
		return v, nil
	}
	return conversation(v)
}

// newID returns a random id with prefix.
func newID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }

// messageID is the inbound's dedupe key: the client's Idempotency-Key, so
// a retried request makes no second turn, else a fresh id.
func messageID(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("Idempotency-Key")); k != "" {
		return k
	}
	return newID("api-")
}
