package api

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

// The dashboard's session: a browser that gave the API key once holds
// SessionCookie, which the API takes in place of the bearer key. Its value
// is an expiry and an HMAC of it under the key, so every instance that has
// the key accepts it, none keeps state, and a new key ends every session.
// A request that changes something must also carry CSRFHeader equal to
// CSRFCookie (double submit): a page of another site can make the browser
// send the cookies, but not read them to set the header.
const (
	SessionCookie = "herald_session"
	CSRFCookie    = "herald_csrf"
	CSRFHeader    = "X-Herald-CSRF"
	// SessionTTL is how long a session lasts; then the key is asked again.
	SessionTTL = 12 * time.Hour
)

// sessionLabel keeps a session's MAC apart from any other use of the key.
const sessionLabel = "herald dashboard session "

// NewSession returns the value of SessionCookie for key, valid until
// expires.
func NewSession(key string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + sessionMAC(key, exp)
}

func sessionMAC(key, exp string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(sessionLabel + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// ValidSession reports whether value is a session of key not expired at
// now.
func ValidSession(key, value string, now time.Time) bool {
	exp, mac, ok := strings.Cut(value, ".")
	if !ok || key == "" {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(sessionMAC(key, exp)))
}

// sessionAuthorized reports whether r carries a valid session, and, when
// its method changes something, the CSRF header matching its cookie.
func (s *Server) sessionAuthorized(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	if err != nil || !ValidSession(s.opts.APIKey, c.Value, s.opts.Clock.Now()) {
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
