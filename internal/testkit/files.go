package testkit

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// ReadCounter is an http.RoundTripper that counts the bytes read from
// the bodies of the answers it carries: a test of a bounded download
// checks with it that no more than the bound was read. The zero value
// sends with http.DefaultTransport.
type ReadCounter struct {
	Next http.RoundTripper
	// Prefix, when set, counts only the answers to requests whose URL
	// path starts with it: the downloads, not the API calls around them.
	Prefix string
	n      atomic.Int64
}

// Client is an HTTP client that sends through c.
func (c *ReadCounter) Client() *http.Client { return &http.Client{Transport: c} }

// Read is how many body bytes were read so far.
func (c *ReadCounter) Read() int64 { return c.n.Load() }

// Reset sets the count back to zero.
func (c *ReadCounter) Reset() { c.n.Store(0) }

func (c *ReadCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	next := c.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err != nil || !strings.HasPrefix(r.URL.Path, c.Prefix) {
		return resp, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, n: &c.n}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// Bytes is n bytes of a pattern that shows a cut or a shift: a file's
// content for a test that checks it arrived whole.
func Bytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}
