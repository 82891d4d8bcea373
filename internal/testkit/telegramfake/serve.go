package telegramfake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// answer is what a method handler returns: a result, or an error.
type answer struct {
	status      int // 0 means 200 with result
	result      any
	description string
	retryAfter  int
	raw         string
}

func ok(result any) answer { return answer{result: result} }

func fail(status int, description string) answer {
	return answer{status: status, description: description}
}

func (f Failure) answer() answer {
	d := f.Description
	if d == "" {
		d = http.StatusText(f.Status)
	}
	return answer{status: f.Status, description: d, retryAfter: f.RetryAfter, raw: f.Raw}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		s.serveFile(w, r)
		return
	}
	token, method, found := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	if !strings.HasPrefix(r.URL.Path, "/bot") || !found || method == "" {
		write(w, fail(http.StatusNotFound, "Not Found"))
		return
	}
	params, files, err := readParams(r)
	if err != nil {
		write(w, fail(http.StatusBadRequest, "Bad Request: "+err.Error()))
		return
	}
	// Read to the body's end: only then does the server watch the
	// connection, and end the request's context when the caller is gone
	// (a held call of a killed process is dropped, not answered).
	_, _ = io.Copy(io.Discard, r.Body)
	var a answer
	switch {
	case token != s.token:
		a = fail(http.StatusUnauthorized, "Unauthorized")
	case method == "getUpdates":
		// getUpdates records itself: its answer comes after the wait.
		s.getUpdates(w, r, params)
		return
	default:
		if !s.waitHeld(r.Context(), method) {
			return
		}
		a = s.call(method, params, files)
	}
	s.record(method, params, r.RemoteAddr, a)
	write(w, a)
}

// waitHeld waits while method is held (Hold). It reports false when the
// caller gave up or the server stopped first: the call is then dropped.
func (s *Server) waitHeld(ctx context.Context, method string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.holdAfter[method]; ok {
		if n > 1 {
			s.holdAfter[method] = n - 1
		} else {
			delete(s.holdAfter, method)
			s.held[method] = true
		}
		return true
	}
	// A call HoldNext picked waits for the next Release; the others while
	// the method is held.
	picked, gen := s.holdNext[method] > 0, s.releases[method]
	if picked {
		s.holdNext[method]--
	}
	waiting := func() bool {
		if picked {
			return s.releases[method] == gen
		}
		return s.held[method]
	}
	if !waiting() {
		return true
	}
	s.holding[method]++
	s.changedLocked()
	defer func() {
		s.holding[method]--
		s.changedLocked()
	}()
	for waiting() {
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			s.mu.Lock()
			return false
		case <-s.done:
			s.mu.Lock()
			return false
		}
		s.mu.Lock()
	}
	return true
}

// call answers a method other than getUpdates: a scripted failure first,
// else the method's behaviour.
func (s *Server) call(method string, p map[string]string, files map[string]upload) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.nextFailureLocked(method); ok {
		return f.answer()
	}
	switch method {
	case "getMe":
		return ok(map[string]any{"id": s.botID, "is_bot": true, "first_name": "Herald", "username": s.botName,
			"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false})
	case "sendMessage":
		return s.sendMessageLocked(p)
	case "sendPhoto":
		return s.sendFileLocked(p, files, "photo")
	case "sendDocument":
		return s.sendFileLocked(p, files, "document")
	case "getFile":
		return s.getFileLocked(p)
	case "editMessageText":
		return s.editMessageTextLocked(p)
	case "deleteMessage":
		return s.deleteMessageLocked(p)
	case "sendChatAction":
		return s.sendChatActionLocked(p)
	case "answerCallbackQuery":
		if p["callback_query_id"] == "" {
			return fail(http.StatusBadRequest, "Bad Request: query is too old and response timeout expired or query ID is invalid")
		}
		return ok(true)
	case "setMyCommands":
		var cmds []Command
		if err := json.Unmarshal([]byte(p["commands"]), &cmds); err != nil {
			return fail(http.StatusBadRequest, "Bad Request: can't parse commands JSON object")
		}
		s.commands = cmds
		return ok(true)
	case "setWebhook":
		s.webhook = Webhook{URL: p["url"], Secret: p["secret_token"]}
		return ok(true)
	case "deleteWebhook":
		s.webhook = Webhook{}
		if p["drop_pending_updates"] == "true" {
			s.queue = nil
		}
		return ok(true)
	}
	return fail(http.StatusNotFound, "Not Found")
}

func (s *Server) nextFailureLocked(method string) (Failure, bool) {
	fs := s.failures[method]
	if len(fs) == 0 {
		return Failure{}, false
	}
	s.failures[method] = fs[1:]
	return fs[0], fs[0] != Pass
}

// record adds a call and wakes the waiters.
func (s *Server) record(method string, params map[string]string, remote string, a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	s.calls = append(s.calls, Call{Seq: len(s.calls) + 1, Method: method, Params: params, RemoteAddr: remote, Status: status, At: time.Now()})
	s.changedLocked()
}

// readParams reads a request's parameters from its query and its body,
// which may be multipart, JSON or urlencoded, as the Bot API accepts,
// and the files a multipart body uploads, by field.
func readParams(r *http.Request) (map[string]string, map[string]upload, error) {
	p := map[string]string{}
	files := map[string]upload{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		// A method without parameters comes as a body with no parts.
		if err := r.ParseMultipartForm(32 << 20); errors.Is(err, io.EOF) {
			return p, files, nil
		} else if err != nil {
			return nil, nil, err
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
		for k, v := range r.MultipartForm.File {
			f, err := v[0].Open()
			if err != nil {
				return nil, nil, err
			}
			data, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil {
				return nil, nil, err
			}
			files[k] = upload{name: v[0].Filename, data: data}
		}
	case "application/json":
		var body map[string]json.RawMessage
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(strings.TrimSpace(string(b))) > 0 {
			if err := json.Unmarshal(b, &body); err != nil {
				return nil, nil, err
			}
		}
		for k, v := range body {
			var str string
			if json.Unmarshal(v, &str) == nil {
				p[k] = str
			} else {
				p[k] = string(v)
			}
		}
	default:
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		vals, err := url.ParseQuery(string(b))
		if err != nil {
			return nil, nil, err
		}
		for k, v := range vals {
			p[k] = v[0]
		}
	}
	return p, files, nil
}

// write sends a's Bot API answer.
func write(w http.ResponseWriter, a answer) {
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	if a.raw != "" {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, a.raw)
		return
	}
	body := map[string]any{"ok": status == http.StatusOK}
	if status == http.StatusOK {
		body["result"] = a.result
	} else {
		body["error_code"] = status
		body["description"] = a.description
		if a.retryAfter > 0 {
			body["parameters"] = map[string]any{"retry_after": a.retryAfter}
		}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
