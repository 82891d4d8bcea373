// Package websession is the dashboard's browser session: a browser that
// gave the API key once holds Cookie, which the API takes in place of
// the bearer key. Its value is an expiry and an HMAC of it under the key,
// so every instance that has the key accepts it, none keeps state, and a
// new key ends every session. A request that changes something must also
// carry CSRFHeader equal to CSRFCookie (double submit): a page of another
// site can make the browser send the cookies, but not read them to set
// the header.
package websession

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The cookies and the header.
const (
	Cookie     = "herald_session"
	CSRFCookie = "herald_csrf"
	CSRFHeader = "X-Herald-CSRF"
)

// TTL is how long a session lasts; then the key is asked again.
const TTL = 12 * time.Hour

// label keeps a session's MAC apart from any other use of the key.
const label = "herald dashboard session "

// New returns the value of Cookie for key, valid until expires.
func New(key string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + mac(key, exp)
}

func mac(key, exp string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(label + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// Valid reports whether value is a session of key not expired at now.
func Valid(key, value string, now time.Time) bool {
	exp, got, ok := strings.Cut(value, ".")
	if !ok || key == "" {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return false
	}
	return hmac.Equal([]byte(got), []byte(mac(key, exp)))
}

// Authorized reports whether r carries a valid session of key, and, when
// its method changes something, CSRFHeader matching CSRFCookie.
func Authorized(r *http.Request, key string, now time.Time) bool {
	c, err := r.Cookie(Cookie)
	if err != nil || !Valid(key, c.Value, now) {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	csrf, err := r.Cookie(CSRFCookie)
	header := r.Header.Get(CSRFHeader)
	return err == nil && csrf.Value != "" && subtle.ConstantTimeCompare([]byte(csrf.Value), []byte(header)) == 1
}
