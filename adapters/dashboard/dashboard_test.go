package dashboard_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/dashboard"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/websession"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func serve(t *testing.T, key string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	dashboard.New(dashboard.Options{APIKey: key, Clock: clock.NewFake(epoch)}).Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// The login takes the API key alone, and answers it with a session the
// API accepts, in an HttpOnly, SameSite=Strict cookie that holds no key,
// and a CSRF cookie the pages can read.
func TestLogin(t *testing.T) {
	const key = "dash-key-0123456789"
	srv := serve(t, key)
	for _, body := range []string{`{"key":"wrong"}`, `{"key":""}`, `not json`, `{"key":"` + strings.Repeat("k", 5000) + `"}`} {
		res, got := post(t, srv.URL+"/ui/login", body)
		if res.StatusCode == http.StatusOK || len(res.Cookies()) != 0 || strings.Contains(got, key) {
			t.Errorf("login with %.20s: %d %v %s", body, res.StatusCode, res.Cookies(), got)
		}
	}
	res, _ := post(t, srv.URL+"/ui/login", `{"key":"`+key+`"}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login: %d", res.StatusCode)
	}
	byName := map[string]*http.Cookie{}
	for _, c := range res.Cookies() {
		byName[c.Name] = c
		if strings.Contains(c.Value, key) {
			t.Errorf("cookie %s holds the key", c.Name)
		}
	}
	s, csrf := byName[websession.Cookie], byName[websession.CSRFCookie]
	if s == nil || !s.HttpOnly || s.SameSite != http.SameSiteStrictMode || s.Path != "/" {
		t.Fatalf("session cookie %+v", s)
	}
	if !websession.Valid(key, s.Value, epoch) || websession.Valid(key, s.Value, epoch.Add(websession.TTL)) {
		t.Errorf("the session is not valid for SessionTTL from the login")
	}
	if csrf == nil || csrf.HttpOnly || csrf.Value == "" || csrf.SameSite != http.SameSiteStrictMode {
		t.Errorf("CSRF cookie %+v", csrf)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/ui/session", nil)
	req.AddCookie(s)
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Body.Close()
	var st struct {
		LoginRequired bool `json:"login_required"`
		SignedIn      bool `json:"signed_in"`
	}
	if err := json.NewDecoder(got.Body).Decode(&st); err != nil || !st.LoginRequired || !st.SignedIn {
		t.Errorf("session with the cookie: %+v %v", st, err)
	}
}

// Without a key the pages open with no login.
func TestNoKeyNoLogin(t *testing.T) {
	srv := serve(t, "")
	res, err := http.Get(srv.URL + "/ui/session")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if strings.TrimSpace(string(b)) != `{"login_required":false,"signed_in":true}` {
		t.Errorf("session: %s", b)
	}
	res, err = http.Get(srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ = io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `<nav id="nav"`) || res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /ui/: %d %v", res.StatusCode, res.Header)
	}
}

// The board page listens for every kind of kanban event the stream
// names: each constant Event* of the kanban package is in its script.
func TestBoardHearsEveryEventKind(t *testing.T) {
	js, err := os.ReadFile("assets/pages/kanban.js")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("../../kanban/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("kanban sources: %v %v", files, err)
	}
	kinds := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range spec.Names {
				if !strings.HasPrefix(id.Name, "Event") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				kind, _ := strconv.Unquote(lit.Value)
				kinds++
				if !strings.Contains(string(js), "'"+kind+"'") {
					t.Errorf("the board does not listen for kanban.%s (%q)", id.Name, kind)
				}
			}
			return true
		})
	}
	if kinds < 20 {
		t.Errorf("found %d kanban event kinds; the kanban package's layout changed", kinds)
	}
}

// After LoginFailures wrong keys from one address within LoginWindow,
// that address is refused with 429 and Retry-After, even with the right
// key, until the first failure is a window old; another address signs
// in meanwhile, and a success forgets the failures. On the fake clock.
func TestLoginRateLimited(t *testing.T) {
	const key = "dash-key-0123456789"
	clk := clock.NewFake(epoch)
	mux := http.NewServeMux()
	dashboard.New(dashboard.Options{APIKey: key, Clock: clk}).Mount(mux)
	login := func(from, k string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(`{"key":"`+k+`"}`))
		req.RemoteAddr = from
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	const attacker, other = "192.0.2.1:40000", "198.51.100.7:50000"
	for i := range dashboard.LoginFailures {
		if rec := login(attacker, "wrong"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong key %d: %d, want 401", i+1, rec.Code)
		}
		clk.Advance(time.Second)
	}
	// From another port of the same address: refused, key unread.
	rec := login("192.0.2.1:40001", key)
	wantWait := dashboard.LoginWindow - dashboard.LoginFailures*time.Second
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != strconv.Itoa(int(wantWait.Seconds())) ||
		!strings.Contains(rec.Body.String(), "Too many failed sign-ins from this address: try again in "+wantWait.String()) {
		t.Fatalf("after %d failures: %d Retry-After %q %s", dashboard.LoginFailures, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("a refused sign-in set cookies")
	}
	if rec := login(other, key); rec.Code != http.StatusOK {
		t.Errorf("another address with the key: %d %s, want 200", rec.Code, rec.Body)
	}
	// One second before the first failure leaves the window: still refused.
	clk.Advance(wantWait - time.Second)
	if rec := login(attacker, key); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("a second before the window: %d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	clk.Advance(time.Second)
	if rec := login(attacker, key); rec.Code != http.StatusOK {
		t.Fatalf("once the first failure left the window: %d %s, want 200", rec.Code, rec.Body)
	}
	// The success forgot the failures: a full count again before a refusal.
	for range dashboard.LoginFailures {
		if rec := login(attacker, "wrong"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a wrong key after a success: %d, want 401", rec.Code)
		}
	}
	if rec := login(attacker, "wrong"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("after a full count again: %d, want 429", rec.Code)
	}
}
