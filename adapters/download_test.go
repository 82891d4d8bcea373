package adapters_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
)

func TestDownload(t *testing.T) {
	file := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bot-SECRET/file":
			// Written in pieces with flushes, without a length: only
			// the reader's bound stops the read.
			for i := 0; i < len(file); i += 4096 {
				_, _ = w.Write(file[i : i+4096])
				w.(http.Flusher).Flush()
			}
		case "/small":
			_, _ = w.Write([]byte("small"))
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: wrong file_id"}`)
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, "This content is no longer available.\nSecond line")
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, "<html><body>Forbidden</body></html>")
		case "/busy":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"message":"You are being rate limited.","retry_after":1.5}`)
		}
	}))
	defer srv.Close()
	counter := &testkit.ReadCounter{}
	d := adapters.Download{Op: "test.Fetch", Platform: "Example", Client: counter.Client()}
	get := func(path string, max int64) ([]byte, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		return d.Get(req, "f.bin", max)
	}

	if data, err := get("/small", 5); err != nil || string(data) != "small" {
		t.Errorf("a file of exactly max: %q, %v", data, err)
	}
	counter.Reset()
	const max = 10_000
	if data, err := get("/bot-SECRET/file", max); !errs.Is(err, errs.TooLarge) || data != nil || counter.Read() > max+1 {
		t.Errorf("an unannounced file over max: %d bytes, %v, %d read; want TooLarge with at most %d read", len(data), err, counter.Read(), max+1)
	} else if got := errs.Reason(err); got != "f.bin is over the limit of 9.8 KiB for a file" {
		t.Errorf("reason %q", got)
	}
	tests := []struct {
		path  string
		code  errs.Code
		words string
	}{
		{"/json", errs.Invalid, "could not download f.bin: Example answered 400 Bad Request: Bad Request: wrong file_id"},
		{"/text", errs.NotFound, "could not download f.bin: Example answered 410 Gone: This content is no longer available."},
		{"/html", errs.Invalid, "could not download f.bin: Example answered 403 Forbidden"},
		{"/busy", errs.Unavailable, "could not download f.bin: Example answered 429 Too Many Requests: You are being rate limited."},
	}
	for _, tc := range tests {
		_, err := get(tc.path, max)
		if !errs.Is(err, tc.code) || errs.Reason(err) != tc.words {
			t.Errorf("%s: %v; want %s: %q", tc.path, err, tc.code, tc.words)
		}
	}

	srv.Close()
	_, err := get("/bot-SECRET/file", max)
	if !errs.Is(err, errs.Unavailable) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("a server gone: %v; want Unavailable without the URL", err)
	}
}

func TestLayOut(t *testing.T) {
	render := func(text string) func(int) []string {
		return func(limit int) []string {
			var parts []string
			text := text
			for len(text) > limit {
				parts, text = append(parts, text[:limit]), text[limit:]
			}
			if text != "" {
				parts = append(parts, text)
			}
			return parts
		}
	}
	photo := outbox.File{Name: "a.png", Photo: true, Data: []byte("png")}
	empty := outbox.File{Name: "b.pdf", Blob: "blob-1"}
	tests := []struct {
		desc    string
		m       outbox.Message
		texts   int
		caption string
		missing string // Missing(0)
	}{
		{desc: "text alone", m: outbox.Message{Text: strings.Repeat("x", 250)}, texts: 3},
		{desc: "a short text is the caption", m: outbox.Message{Text: "look", Files: []outbox.File{photo}}, caption: "look"},
		{desc: "a long text goes first", m: outbox.Message{Text: strings.Repeat("x", 150), Files: []outbox.File{photo}}, texts: 2},
		{desc: "files alone", m: outbox.Message{Files: []outbox.File{photo, empty}}, missing: `the file "b.pdf" has no bytes to send`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l := adapters.LayOut(tc.m, render(tc.m.Text), 100, 120)
			if len(l.Text) != tc.texts || l.Caption != tc.caption || l.Len() != tc.texts+len(tc.m.Files) {
				t.Fatalf("laid out as %d text parts, caption %q, %d parts", len(l.Text), l.Caption, l.Len())
			}
			for i := range l.Len() {
				f, caption, ok := l.File(i)
				if ok != (i >= tc.texts) {
					t.Errorf("part %d is a file: %v", i, ok)
				}
				if ok && f.Name != tc.m.Files[i-tc.texts].Name || ok && (caption != "") != (i == tc.texts && tc.caption != "") {
					t.Errorf("part %d is %q with caption %q", i, f.Name, caption)
				}
			}
			if got := l.Missing(0); got != tc.missing {
				t.Errorf("Missing(0) = %q, want %q", got, tc.missing)
			}
			if got := l.Missing(l.Len()); got != "" {
				t.Errorf("Missing after every part = %q", got)
			}
		})
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1: "1 byte", 900: "900 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 20 << 20: "20 MiB", 25_000_000: "23.8 MiB"} {
		if got := adapters.Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestHosted(t *testing.T) {
	const api = "http://127.0.0.1:8080/api"
	tests := []struct {
		url  string
		want bool
	}{
		{"https://files.slack.com/files-pri/T1-F1/a.png", true},
		{"https://slack.com/x", true},
		{"http://files.slack.com/files-pri/T1-F1/a.png", false}, // the token goes over https only
		{"https://slack.com.evil.example/x", false},
		{"https://notslack.com/x", false},
		{"http://127.0.0.1:8080/files-pri/T1-F1/a.png", true}, // the configured API's host
		{"http://127.0.0.1:9090/x", false},
		{"://bad", false},
	}
	for _, tc := range tests {
		if got := adapters.Hosted(tc.url, api, ".slack.com"); got != tc.want {
			t.Errorf("Hosted(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
	if adapters.Hosted("https://media.cdn.discordapp.com/x", "", "cdn.discordapp.com") {
		t.Error("a subdomain of a host given without a dot is taken")
	}
}
