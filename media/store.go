// Package media is what herald does with files: the ones a person sends
// (downloaded from the platform, images shown to the model or described,
// voice notes transcribed, documents saved where the agent can read them)
// and the ones the agent sends back (send_file, through the outbox).
package media

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
)

// Store keeps the bytes of files that no platform can give again: an
// upload through the local API until its turn has committed, and a file
// send_file queued until its message was accepted. Ids are herald's own.
type Store interface {
	// PutFile keeps data under id, replacing what was there: a turn run
	// again puts the same bytes again. Errors: Invalid (a bad id),
	// TooLarge (over MaxFileBytes).
	PutFile(ctx context.Context, id string, data []byte) error
	// File returns the bytes kept under id. Errors: NotFound.
	File(ctx context.Context, id string) ([]byte, error)
	// DeleteFile forgets id; forgetting what is not there is no error.
	DeleteFile(ctx context.Context, id string) error
}

// MaxFileBytes bounds one file kept in the store, whatever
// attachments.max_bytes says.
const MaxFileBytes = 64 << 20

// maxIDBytes bounds a file's id.
const maxIDBytes = 200

// CheckFileID reports an Invalid error for an id a store does not take:
// empty, longer than 200 bytes, bad UTF-8 or with control characters.
// Backends call it so that each refuses the same.
func CheckFileID(op, id string) error {
	if id == "" || len(id) > maxIDBytes || !utf8.ValidString(id) ||
		strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errs.E(op, errs.Invalid, "file id %q is empty, over %d bytes, or has control characters", id, maxIDBytes)
	}
	return nil
}

// CheckFile is CheckFileID, and TooLarge for data over MaxFileBytes.
func CheckFile(op, id string, data []byte) error {
	if err := CheckFileID(op, id); err != nil {
		return err
	}
	if len(data) > MaxFileBytes {
		return errs.E(op, errs.TooLarge, "file %q is %d bytes, over the limit of %d", id, len(data), MaxFileBytes)
	}
	return nil
}
