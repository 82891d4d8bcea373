package media

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// errNoFetcher is the error of an attachment no adapter of this process
// can fetch again: its platform is not served here, or its adapter
// downloads nothing.
var errNoFetcher = errs.E("media.fetch", errs.Unavailable, "no adapter here downloads files of this platform")

// bytesOf returns the bytes of one of a turn's files and keeps them at
// path, from where they are first found: the file at path, kept by an
// earlier run of the turn; the store (Attachment.Blob); the platform,
// through its adapter. A file over max is not fetched: a TooLarge error.
func (r *Runner) bytesOf(ctx context.Context, platform, path string, att sessions.Attachment) ([]byte, error) {
	const op = "media.fetch"
	data, err := os.ReadFile(path)
	if err == nil {
		return data, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	max := r.opts.MaxBytes
	if att.Size > max {
		return nil, errs.E(op, errs.TooLarge, "%d bytes, over %d", att.Size, max)
	}
	switch {
	case att.Blob != "" && r.opts.Files != nil:
		data, err = r.opts.Files.File(ctx, att.Blob)
	case att.Blob != "":
		return nil, errs.E(op, errs.Unavailable, "no store of files here")
	default:
		f := r.fetcher(platform)
		if f == nil {
			return nil, errNoFetcher
		}
		data, err = f.Fetch(ctx, att, max)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errs.E(op, errs.TooLarge, "%d bytes, over %d", len(data), max)
	}
	if err := writeFile(path, data); err != nil {
		// The turn has the bytes; only a run after this one must
		// fetch them again.
		r.log.Warn("keeping a file on the disk failed", "path", path, "err", err)
	}
	return data, nil
}

// fetcher is the adapter of platform when it downloads files.
func (r *Runner) fetcher(platform string) adapters.Fetcher {
	if r.opts.Fetcher == nil {
		return nil
	}
	return r.opts.Fetcher(platform)
}

// writeFile writes data to path whole or not at all: to a file beside
// it, synced, then renamed over it. A reader (a turn run again after a
// crash) never finds half a file.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
