package websession_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/websession"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestValid(t *testing.T) {
	s := websession.New("key-1", epoch.Add(time.Hour))
	_, mac, _ := strings.Cut(s, ".")
	for _, tc := range []struct {
		desc       string
		key, value string
		now        time.Time
		want       bool
	}{
		{"its key, before the expiry", "key-1", s, epoch, true},
		{"at the expiry", "key-1", s, epoch.Add(time.Hour), false},
		{"another key", "key-2", s, epoch, false},
		{"no key", "", websession.New("", epoch.Add(time.Hour)), epoch, false},
		{"empty", "key-1", "", epoch, false},
		{"an expiry not a number", "key-1", "soon." + mac, epoch, false},
	} {
		if got := websession.Valid(tc.key, tc.value, tc.now); got != tc.want {
			t.Errorf("%s: Valid %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestAuthorized(t *testing.T) {
	s := websession.New("key-1", epoch.Add(time.Hour))
	for _, tc := range []struct {
		desc, method, csrfCookie, csrfHeader string
		want                                 bool
	}{
		{"a GET", "GET", "", "", true},
		{"a HEAD", "HEAD", "", "", true},
		{"a POST with the pair", "POST", "abc", "abc", true},
		{"a POST without the header", "POST", "abc", "", false},
		{"a DELETE with another header", "DELETE", "abc", "abd", false},
		{"a PATCH with an empty pair", "PATCH", "", "", false},
	} {
		r := httptest.NewRequest(tc.method, "/api/v1/approvals/x", nil)
		r.Header.Set("Cookie", websession.Cookie+"="+s)
		if tc.csrfCookie != "" {
			r.Header.Set("Cookie", websession.Cookie+"="+s+"; "+websession.CSRFCookie+"="+tc.csrfCookie)
		}
		if tc.csrfHeader != "" {
			r.Header.Set(websession.CSRFHeader, tc.csrfHeader)
		}
		if got := websession.Authorized(r, "key-1", epoch); got != tc.want {
			t.Errorf("%s: Authorized %v, want %v", tc.desc, got, tc.want)
		}
	}
}
