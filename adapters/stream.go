package adapters

import "github.com/heraldgw/herald/internal/errs"

// StreamError is the error a Streamer's StreamText returns for a platform
// call that went as res says: nil when Accepted, Invalid with the
// platform's words when it refused for good (Permanent), Unavailable
// otherwise.
func StreamError(op string, res SendResult) error {
	switch res.Outcome {
	case Accepted:
		return nil
	case Permanent:
		return errs.E(op, errs.Invalid, "%s", res.Reason)
	}
	return errs.E(op, errs.Unavailable, "%s: %s", res.Outcome, res.Reason)
}
