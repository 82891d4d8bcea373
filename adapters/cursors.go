package adapters

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Cursors keeps, per platform and channel, where an adapter's receiving
// got to: the id of the last message it received there, with when it was
// put by the store's clock. A platform whose events are not sent again
// (Discord's gateway) reads them when a process takes its receiving over,
// to fetch what came while no process received (a backfill). Both store
// backends implement it.
type Cursors interface {
	// PutCursor records value as channel's cursor on platform, at the
	// store's time, in place of any before. Errors: Invalid (an empty or
	// overlong platform, channel or value), Closed, Unavailable.
	PutCursor(ctx context.Context, platform, channel, value string) error
	// Cursors returns platform's cursors put within the last within, by
	// channel. Errors: Invalid (an empty or overlong platform, within
	// not positive), Closed, Unavailable.
	Cursors(ctx context.Context, platform string, within time.Duration) (map[string]string, error)
}

// MaxCursorBytes bounds a cursor's platform, channel and value.
const MaxCursorBytes = 256

// CheckCursor validates PutCursor's arguments for a backend.
func CheckCursor(op, platform, channel, value string) error {
	for _, p := range []struct{ what, s string }{{"platform", platform}, {"channel", channel}, {"value", value}} {
		if p.s == "" || len(p.s) > MaxCursorBytes {
			return errs.E(op, errs.Invalid, "cursor %s %q is empty or over %d bytes", p.what, p.s, MaxCursorBytes)
		}
	}
	return nil
}

// CheckCursors validates Cursors' arguments for a backend.
func CheckCursors(op, platform string, within time.Duration) error {
	if platform == "" || len(platform) > MaxCursorBytes {
		return errs.E(op, errs.Invalid, "cursor platform %q is empty or over %d bytes", platform, MaxCursorBytes)
	}
	if within <= 0 {
		return errs.E(op, errs.Invalid, "cursor window %s is not positive", within)
	}
	return nil
}
