package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/kanban"
)

// attachmentFixture serves the kanban routes with a board home and an
// attachment limit of 16 bytes.
func attachmentFixture(t *testing.T) *kanbanFixture {
	f := newKanbanFixture(t, nil)
	f.svc.Root = t.TempDir()
	f.svc.AttachmentMaxBytes = 16
	return f
}

// A file posted raw to a card's attachments is kept under the board home
// and served back; its card shows it with its path.
func TestKanbanAttachments(t *testing.T) {
	f := attachmentFixture(t)
	k := f.create(t, "default", `{"title": "read it"}`)
	route := "/api/v1/kanban/cards/" + k.ID + "/attachments"
	code, b := f.do(t, "POST", route+"?name=notes+v2.txt", "the notes")
	var a kanban.Attachment
	if err := json.Unmarshal(b, &a); code != http.StatusCreated || err != nil {
		t.Fatalf("attach: %d %s", code, b)
	}
	if a.Card != k.ID || a.Name != "notes v2.txt" || a.Size != 9 || a.CreatedBy != "api" || a.Path != filepath.Join(f.svc.Root, "attachments", k.ID, "notes v2.txt") {
		t.Errorf("attachment = %+v", a)
	}
	if got, _ := os.ReadFile(a.Path); string(got) != "the notes" {
		t.Errorf("the file holds %q", got)
	}

	res, err := http.Get(f.srv.URL + route + "/notes%20v2.txt")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "the notes" || res.Header.Get("Content-Type") != "application/octet-stream" ||
		!strings.Contains(res.Header.Get("Content-Disposition"), `filename="notes v2.txt"`) {
		t.Errorf("download: %d %q %v", res.StatusCode, body, res.Header)
	}

	code, b = f.do(t, "GET", "/api/v1/kanban/cards/"+k.ID, "")
	var shown struct {
		Attachments []kanban.Attachment `json:"attachments"`
	}
	if err := json.Unmarshal(b, &shown); code != http.StatusOK || err != nil || len(shown.Attachments) != 1 || shown.Attachments[0].Path != a.Path {
		t.Errorf("the card shows attachments %+v (%d %s)", shown.Attachments, code, b)
	}
	code, b = f.do(t, "GET", route, "")
	if code != http.StatusOK || !strings.Contains(string(b), `"name":"notes v2.txt"`) {
		t.Errorf("list: %d %s", code, b)
	}

	for _, tt := range []struct {
		desc, method, path, body string
		code                     int
		typ, says                string
	}{
		{"the same name again", "POST", route + "?name=notes+v2.txt", "x", http.StatusConflict, "conflict", "another name"},
		{"no name", "POST", route, "x", http.StatusBadRequest, "invalid_request_error", "needs a name"},
		{"a path for a name", "POST", route + "?name=..%2Fx", "x", http.StatusBadRequest, "invalid_request_error", "no slash"},
		{"no card", "POST", "/api/v1/kanban/cards/t_00000000/attachments?name=x", "x", http.StatusNotFound, "not_found_error", "no card"},
		{"no such attachment", "GET", route + "/other.txt", "", http.StatusNotFound, "not_found_error", "no attachment"},
		{"a method the route has not", "DELETE", route, "", http.StatusMethodNotAllowed, "invalid_request_error", "GET or POST"},
	} {
		code, b := f.do(t, tt.method, tt.path, tt.body)
		var e errorBody
		_ = json.Unmarshal(b, &e)
		if code != tt.code || !strings.Contains(e.Error.Type, tt.typ) || !strings.Contains(e.Error.Message, tt.says) {
			t.Errorf("%s: %d %s, want %d %s saying %q", tt.desc, code, b, tt.code, tt.typ, tt.says)
		}
	}
}

// A body over kanban.attachment_max_bytes is refused with 413, whether
// it says its length or not, and leaves no file.
func TestKanbanAttachmentOverTheLimit(t *testing.T) {
	f := attachmentFixture(t)
	k := f.create(t, "default", `{"title": "read it"}`)
	route := f.srv.URL + "/api/v1/kanban/cards/" + k.ID + "/attachments?name=big.bin"
	big := strings.Repeat("x", 17)
	for _, tt := range []struct {
		desc string
		body io.Reader
	}{
		{"with its length", strings.NewReader(big)},
		{"without", io.MultiReader(strings.NewReader(big))}, // sent chunked
	} {
		res, err := http.Post(route, "application/octet-stream", tt.body)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		_ = json.NewDecoder(res.Body).Decode(&e)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge || e.Error.Type != "request_too_large" ||
			!strings.Contains(e.Error.Message, "16 bytes") || !strings.Contains(e.Error.Message, "kanban.attachment_max_bytes") {
			t.Errorf("17 bytes %s: %d %+v, want 413 naming the limit and its key", tt.desc, res.StatusCode, e)
		}
	}
	var left []string
	_ = filepath.WalkDir(f.svc.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("refused uploads left %v", left)
	}
	res, err := http.Post(route, "application/octet-stream", bytes.NewReader([]byte(big[:16])))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Errorf("16 bytes at a limit of 16: %d, want 201", res.StatusCode)
	}
}

// The attachment routes want the API key: a card's worker token does
// not stand in for it there.
func TestKanbanAttachmentsWantTheAPIKey(t *testing.T) {
	f := newKanbanFixture(t, func(o *api.Options) { o.APIKey = "sekrit" })
	f.svc.Root = t.TempDir()
	code, b := f.do(t, "POST", "/api/v1/kanban/boards/default/cards", `{"title": "x"}`, "Authorization", "Bearer sekrit")
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	k := decodeCard(t, b)
	token := f.claim(t, k.ID)
	route := "/api/v1/kanban/cards/" + k.ID + "/attachments"
	for _, tt := range []struct{ desc, method, path, auth string }{
		{"an upload without a key", "POST", route + "?name=a.txt", ""},
		{"an upload with a worker token", "POST", route + "?name=a.txt", "Bearer " + token},
		{"a download with a worker token", "GET", route + "/a.txt", "Bearer " + token},
	} {
		if code, b := f.do(t, tt.method, tt.path, "x", "Authorization", tt.auth); code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", tt.desc, code, b)
		}
	}
	if code, b := f.do(t, "POST", route+"?name=a.txt", "x", "Authorization", "Bearer sekrit"); code != http.StatusCreated {
		t.Errorf("an upload with the key: %d %s", code, b)
	}
}
