// Package dashboard serves herald's web dashboard at /ui/: static pages
// (embedded, plain JavaScript) that read and change what the local API
// serves under /api/v1, in the browser of whoever holds the API key.
//
// With an API key the pages first ask for it: POST /ui/login checks it and
// sets the session cookie the API accepts (websession), HttpOnly and
// SameSite=Strict, and a CSRF cookie the pages echo in websession.CSRFHeader on
// every request that changes something. The key itself is never sent
// back nor kept by the browser. Without a key (loopback only) the pages
// open directly, as the API does.
package dashboard

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/websession"
)

//go:embed assets
var assets embed.FS

// maxLoginBytes bounds a login request's body.
const maxLoginBytes = 4 << 10

// Options configure a Dashboard.
type Options struct {
	// APIKey is the API's key (http.api_key); empty opens the pages.
	APIKey string
	// Clock stamps the sessions' expiry; default the wall clock.
	Clock clock.Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Dashboard serves the pages and the login.
type Dashboard struct {
	opts   Options
	log    *slog.Logger
	static http.Handler
	script []byte // app.js: the core, then every page's script
	limit  *loginLimit
}

// New returns a Dashboard.
func New(opts Options) *Dashboard {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return &Dashboard{
		opts:   opts,
		log:    opts.Logger.With("component", "dashboard"),
		static: http.StripPrefix("/ui/", http.FileServerFS(sub)),
		script: bundle(sub),
		limit:  newLoginLimit(),
	}
}

// bundle joins app.js and pages/*.js, in name order, into the one
// script the pages load: each page is a file of its own to read and
// change, and the browser still makes one request for them all.
func bundle(fsys fs.FS) []byte {
	names, err := fs.Glob(fsys, "pages/*.js")
	if err != nil {
		panic(err)
	}
	var b bytes.Buffer
	for _, name := range append([]string{"app.js"}, names...) {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic(err) // the embedded tree is fixed at build time
		}
		b.WriteString("// " + name + "\n")
		b.Write(src)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// Mount registers the dashboard's routes on mux, all under /ui/.
func (d *Dashboard) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.Handle("GET /ui/", d.headers(d.static))
	mux.Handle("GET /ui/app.js", d.headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		http.ServeContent(w, r, "app.js", time.Time{}, bytes.NewReader(d.script))
	})))
	mux.HandleFunc("GET /ui/session", d.session)
	mux.HandleFunc("POST /ui/login", d.login)
	mux.HandleFunc("POST /ui/logout", d.logout)
}

// headers sets what every page is served with: no framing, no script
// but the dashboard's own, no caching of what the key unlocks.
func (d *Dashboard) headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// sessionState is what the pages learn before they show anything:
// whether a key is asked for, and whether this browser gave it.
type sessionState struct {
	LoginRequired bool `json:"login_required"`
	SignedIn      bool `json:"signed_in"`
}

func (d *Dashboard) session(w http.ResponseWriter, r *http.Request) {
	st := sessionState{LoginRequired: d.opts.APIKey != "", SignedIn: d.opts.APIKey == ""}
	if c, err := r.Cookie(websession.Cookie); err == nil && st.LoginRequired {
		st.SignedIn = websession.Valid(d.opts.APIKey, c.Value, d.opts.Clock.Now())
	}
	writeJSON(w, http.StatusOK, st)
}

// login takes {"key": "..."} and, when it is the API key, sets the
// session and CSRF cookies. An address that failed too often is
// refused for a while (loginLimit), before its key is looked at.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if d.opts.APIKey == "" {
		writeJSON(w, http.StatusOK, sessionState{SignedIn: true})
		return
	}
	addr := clientAddr(r.RemoteAddr)
	if wait := d.limit.wait(addr, d.opts.Clock.Now()); wait > 0 {
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{
			"error": fmt.Sprintf("Too many failed sign-ins from this address: try again in %s.", (time.Duration(secs) * time.Second).String()),
		})
		return
	}
	var req struct {
		Key string `json:"key"`
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoginBytes))
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "send {\"key\": \"<API key>\"}"})
		return
	}
	got, want := sha256.Sum256([]byte(req.Key)), sha256.Sum256([]byte(d.opts.APIKey))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		d.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		d.limit.failed(addr, d.opts.Clock.Now())
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "that is not the API key"})
		return
	}
	d.limit.succeeded(addr)
	expires := d.opts.Clock.Now().Add(websession.TTL)
	secure := r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
	http.SetCookie(w, &http.Cookie{
		Name: websession.Cookie, Value: websession.New(d.opts.APIKey, expires), Path: "/",
		Expires: expires, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
	// Read by the pages to echo it in websession.CSRFHeader, so not HttpOnly.
	http.SetCookie(w, &http.Cookie{
		Name: websession.CSRFCookie, Value: rand.Text(), Path: "/",
		Expires: expires, Secure: secure, SameSite: http.SameSiteStrictMode,
	})
	writeJSON(w, http.StatusOK, sessionState{LoginRequired: true, SignedIn: true})
}

// logout clears the cookies. The session's value stays valid until it
// expires, in a browser that kept a copy: a new API key ends it sooner.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	for _, name := range []string{websession.Cookie, websession.CSRFCookie} {
		http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", Expires: time.Unix(0, 0), MaxAge: -1, SameSite: http.SameSiteStrictMode})
	}
	writeJSON(w, http.StatusOK, sessionState{LoginRequired: d.opts.APIKey != ""})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
