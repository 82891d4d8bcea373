package adapters

import (
	"fmt"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// StreamError is the error a Streamer's StreamText returns for a platform
// call that went as res says: nil when Accepted, Invalid with the
// platform's words when it refused for good (Permanent), Unavailable
// otherwise, wrapping a *WaitError when the platform rate-limited the
// call (it was not made; After is the platform's wait, if it said one).
func StreamError(op string, res SendResult) error {
	switch res.Outcome {
	case Accepted:
		return nil
	case Permanent:
		return errs.E(op, errs.Invalid, "%s", res.Reason)
	case RateLimited:
		return errs.Wrap(op, errs.Unavailable, &WaitError{After: res.RetryAfter, Reason: res.Reason})
	}
	return errs.E(op, errs.Unavailable, "%s: %s", res.Outcome, res.Reason)
}

// WaitError is a platform's rate limit on a call that shows a reply in
// progress: the call was not made, and the next one waits After.
type WaitError struct {
	After  time.Duration
	Reason string
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("rate limited for %s: %s", e.After, e.Reason)
}
