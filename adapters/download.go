package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
)

// Download is the GET of a file that an adapter's Fetch makes, after it
// found where the file is (Fetcher). Every adapter reads the answer the
// same way: bounded, and with its errors in the kinds Fetcher names.
type Download struct {
	Op       string // the operation its errors name, e.g. "slack.Fetch"
	Platform string // the platform as its errors name it, e.g. "Slack"
	Client   *http.Client
	// Check, when set, looks at a 200 answer before its body is read; the
	// error it returns is the download's (Slack's sign-in page, sent in
	// place of a file the token cannot read).
	Check func(*http.Response) error
}

// Get sends req and returns the body of the answer: the file called
// name, at most max bytes. A Content-Length over max is refused before
// any of the body is read, and no more than max+1 bytes are ever read.
//
// Errors: TooLarge (over max); NotFound (404, 410: the platform no
// longer has the file); Unavailable (429, 408, 5xx, a network error or a
// timeout: a try later may work); Invalid (401, 403 and any other answer
// the platform refuses with, in the platform's words). No error names the
// URL, which can carry a token (Telegram's file URLs do).
func (d Download) Get(req *http.Request, name string, max int64) ([]byte, error) {
	client := d.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, errs.E(d.Op, errs.Unavailable, "could not download %s from %s: %s", name, d.Platform, withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, d.refused(resp, name)
	}
	if d.Check != nil {
		if err := d.Check(resp); err != nil {
			return nil, err
		}
	}
	if resp.ContentLength > max {
		return nil, TooLarge(d.Op, name, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	switch {
	case err != nil:
		return nil, errs.E(d.Op, errs.Unavailable, "the download of %s from %s broke off: %s", name, d.Platform, withoutURL(err))
	case int64(len(data)) > max:
		return nil, TooLarge(d.Op, name, 0, max)
	}
	return data, nil
}

// refused is the error of an answer other than 200.
func (d Download) refused(resp *http.Response, name string) error {
	words := fmt.Sprintf("%s answered %s", d.Platform, resp.Status)
	if w := answerWords(resp); w != "" {
		words += ": " + w
	}
	code := errs.Invalid
	switch s := resp.StatusCode; {
	case s == http.StatusNotFound || s == http.StatusGone:
		code = errs.NotFound
	case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
		code = errs.Unavailable
	}
	return errs.E(d.Op, code, "could not download %s: %s", name, words)
}

// answerWords is what an error answer says, in the platform's own words:
// the description (Telegram), message (Discord) or error (Slack) of a
// JSON body, the first line of a text one; "" for an HTML page or
// nothing readable.
func answerWords(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	b = bytes.TrimSpace(b)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ct == "application/json" || bytes.HasPrefix(b, []byte("{")):
		var body struct {
			Description string `json:"description"`
			Message     string `json:"message"`
			Error       any    `json:"error"`
		}
		if json.Unmarshal(b, &body) != nil {
			return ""
		}
		s, _ := body.Error.(string)
		return clip(firstOf(body.Description, body.Message, s))
	case ct == "text/plain":
		line, _, _ := strings.Cut(string(b), "\n")
		return clip(line)
	}
	return ""
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// clip cuts s to 200 bytes, at a rune boundary.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// withoutURL is err's text without the URL a *url.Error puts in it.
func withoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// TooLarge is the error of a file over the limit: size is the file's
// size when known, else 0.
func TooLarge(op, name string, size, max int64) error {
	if size > 0 {
		return errs.E(op, errs.TooLarge, "%s is %s, over the limit of %s for a file", name, Size(size), Size(max))
	}
	return errs.E(op, errs.TooLarge, "%s is over the limit of %s for a file", name, Size(max))
}

// CheckSize refuses a file whose size, as its platform told it, is over
// max, before anything is downloaded. A size of 0 is not known, and
// passes: the download is bounded all the same.
func CheckSize(op, name string, size, max int64) error {
	if size > max {
		return TooLarge(op, name, size, max)
	}
	return nil
}

// Size is n bytes for a person: "512 bytes", "340 KiB", "20 MiB",
// "1.5 MiB".
func Size(n int64) string {
	const kib, mib = 1 << 10, 1 << 20
	switch {
	case n >= mib:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/mib)) + " MiB"
	case n >= kib:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/kib)) + " KiB"
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// Hosted reports whether a fetch may go to rawURL: an https URL on one of
// hosts ("slack.com"; ".slack.com" is that domain and its subdomains),
// or a URL with the scheme and host of base, the adapter's configured API
// URL (a self-hosted server, a test's fake), which its calls reach
// already.
func Hosted(rawURL, base string, hosts ...string) bool {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range hosts {
		domain, sub := strings.CutPrefix(h, ".")
		if u.Scheme == "https" && (host == domain || sub && strings.HasSuffix(host, "."+domain)) {
			return true
		}
	}
	b, err := url.Parse(base)
	return base != "" && err == nil && u.Scheme == b.Scheme && strings.EqualFold(u.Host, b.Host)
}
