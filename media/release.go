package media

import (
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// ReleaseFiles forgets files kept in the Store, in a turn's commit (a
// sessions.Write): the bytes of an upload through the local API are
// kept until the turn that read them has committed, and go with that
// commit. A turn that lost its lease deletes nothing, so the turn that
// runs the message again still finds them. A file that is not there
// (forgotten since) is no error: the commit goes through.
type ReleaseFiles struct {
	IDs []string
}

var _ sessions.Write = ReleaseFiles{}

// WriteKind is "media.release".
func (ReleaseFiles) WriteKind() string { return "media.release" }

// maxReleaseIDs bounds the files one write forgets: more than a message
// carries, few enough for one step of a commit.
const maxReleaseIDs = 1000

// Check refuses a ReleaseFiles a store must not apply: Invalid for an id
// CheckFileID refuses, or for more than 1000 ids.
func (r ReleaseFiles) Check(op string) error {
	if len(r.IDs) > maxReleaseIDs {
		return errs.E(op, errs.Invalid, "a release names %d files, over %d", len(r.IDs), maxReleaseIDs)
	}
	for _, id := range r.IDs {
		if err := CheckFileID(op, id); err != nil {
			return err
		}
	}
	return nil
}
