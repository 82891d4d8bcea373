package slack

import (
	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/outbox"
)

// progress is how far a message split into parts got: its retry resumes
// at part sent instead of posting the first parts again. Between
// attempts it is kept with the outbox message (outbox.Parts).
type progress struct {
	l     adapters.Layout // the text's parts, then the files
	plain bool            // Slack refused the formatting; the text's parts go with markup off
	sent  int             // parts Slack accepted
	first string          // the ts of the first part
	// unstreamed: Slack refused to update the reply in progress with the
	// first part, which is posted anew (SendStreamed); kept with the parts
	// once one went, so the attempt that sends the last deletes it.
	unstreamed bool
}

// modePlain is the outbox.Parts mode of a message whose parts go with
// Slack's markup off.
const modePlain = "plain"

// record is p as the outbox keeps it.
func (p *progress) record() outbox.Parts {
	r := outbox.Parts{Done: p.sent, First: p.first, Unstreamed: p.unstreamed}
	if p.plain {
		r.Mode = modePlain
	}
	return r
}
