package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// DefaultFetchTimeout is Options.FetchTimeout's default.
const DefaultFetchTimeout = 20 * time.Second

// maxRedirects bounds the redirects a download of an image follows.
const maxRedirects = 5

// errFetchTimeout is the cause of a download that ran out of
// FetchTimeout.
var errFetchTimeout = errors.New("the download took too long")

// fetchURL checks an image URL herald is to download: http or https,
// with a host, and no user or password in it, since herald sends no
// credentials of any kind with a download.
func fetchURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("url is neither a data URL nor an http(s) URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url's scheme %q is not data, http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("url has no host")
	case u.User != nil:
		return nil, errors.New("url carries a user or password; herald sends no credentials with a download")
	}
	return u, nil
}

// newFetchClient is the HTTP client images are downloaded with: no
// cookie jar, no credentials, at most maxRedirects redirects, each to an
// http(s) URL without a user or password. The time limit is the
// download's context (fetchImage), on the server's clock.
func newFetchClient() *http.Client {
	return &http.Client{
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if _, err := fetchURL(req.URL.String()); err != nil {
				return fmt.Errorf("a redirect whose %v", err)
			}
			return nil
		},
	}
}

// fetchImage downloads the image at u for the part at where: within
// FetchTimeout and MaxFileBytes, answered 200 with an image. Errors:
// Invalid (the download failed, took too long, or is not an image),
// TooLarge; each names the part.
func (s *Server) fetchImage(ctx context.Context, where string, index int, u *url.URL) (upload, error) {
	const op = "api.fetchImage"
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := s.opts.Clock.AfterFunc(s.opts.FetchTimeout, func() { cancel(errFetchTimeout) })
	defer timer.Stop()

	data, contentType, final, err := s.download(ctx, op, where, u)
	if err != nil {
		if errors.Is(context.Cause(ctx), errFetchTimeout) {
			return upload{}, errs.E(op, errs.Invalid, "%s: the download of %s took over %s", where, u.Redacted(), s.opts.FetchTimeout)
		}
		return upload{}, err
	}
	mimeType := mediaType(contentType)
	if !strings.HasPrefix(mimeType, "image/") {
		// A server that labels its images badly is common; the bytes
		// decide then.
		mimeType = mediaType(http.DetectContentType(data))
	}
	if !strings.HasPrefix(mimeType, "image/") {
		return upload{}, errs.E(op, errs.Invalid, "%s: %s is %s, not an image", where, u.Redacted(), mimeType)
	}
	// Named as the URL it came from last names it, redirects followed.
	name := path.Base(final.Path)
	if name == "." || name == "/" {
		name = ""
	} else if path.Ext(name) == "" {
		name += extensions[mimeType]
	}
	return upload{index: index, name: fileName(name, "image", index, mimeType), mime: mimeType, kind: sessions.AttachImage, data: data}, nil
}

// download GETs u and returns its body, its Content-Type and the URL it
// came from after redirects.
func (s *Server) download(ctx context.Context, op, where string, u *url.URL) ([]byte, string, *url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", nil, errs.E(op, errs.Invalid, "%s: %v", where, err)
	}
	req.Header.Set("Accept", "image/*")
	req.Header.Set("User-Agent", "herald")
	res, err := s.fetch.Do(req)
	if err != nil {
		return nil, "", nil, errs.E(op, errs.Invalid, "%s: the download of %s failed: %v", where, u.Redacted(), unwrapURLError(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, "", nil, errs.E(op, errs.Invalid, "%s: %s answered %s", where, u.Redacted(), res.Status)
	}
	if err := s.checkFile(op, where, res.ContentLength); err != nil {
		return nil, "", nil, err
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, s.opts.MaxFileBytes+1))
	if err != nil {
		return nil, "", nil, errs.E(op, errs.Invalid, "%s: the download of %s failed: %v", where, u.Redacted(), err)
	}
	if err := s.checkFile(op, where, int64(len(data))); err != nil {
		return nil, "", nil, err
	}
	return data, res.Header.Get("Content-Type"), res.Request.URL, nil
}

// unwrapURLError is the cause of a client's *url.Error, whose own words
// repeat the URL the message names already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
