package delivery

import (
	"context"
	"fmt"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Files is where the bytes of a message's files are kept until it was
// accepted (media.Store, by outbox.File's Blob).
type Files interface {
	// File returns the bytes kept under id. Errors: NotFound.
	File(ctx context.Context, id string) ([]byte, error)
}

// withFiles returns m with each file's bytes read into its Data, for the
// adapter's Send; m's own Files are left as they are, so the bytes leave
// memory with the send. When a file cannot be read it returns false and
// the outcome of the attempt: Permanent when its bytes are no longer
// kept (the message cannot be sent, ever), Transient when the store
// cannot be reached now (the message is tried again after a backoff).
func (s *sender) withFiles(ctx context.Context, m outbox.Message) (outbox.Message, adapters.SendResult, bool) {
	if len(m.Files) == 0 {
		return m, adapters.SendResult{}, true
	}
	if s.files == nil {
		return m, adapters.SendResult{Outcome: adapters.Permanent, Reason: "this gateway has no store of file bytes to send the message's files from"}, false
	}
	files := make([]outbox.File, len(m.Files))
	for i, f := range m.Files {
		data, err := s.files.File(ctx, f.Blob)
		switch {
		case errs.Is(err, errs.NotFound):
			return m, adapters.SendResult{Outcome: adapters.Permanent, Reason: fmt.Sprintf("the file's bytes are no longer kept: %s (%s)", f.Name, f.Blob)}, false
		case err != nil:
			return m, adapters.SendResult{Outcome: adapters.Transient, Reason: fmt.Sprintf("the bytes of %s could not be read: %s", f.Name, errs.Reason(err))}, false
		}
		f.Data = data
		files[i] = f
	}
	m.Files = files
	return m, adapters.SendResult{}, true
}
