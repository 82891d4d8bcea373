package delivery

import (
	"time"

	"github.com/heraldgw/herald/adapters"
)

// Metrics are hooks the gateway hangs its counters on; nil fields count
// nothing. The worker calls Attempt, Resent and Acked; the streaming
// driver calls StreamCall.
type Metrics struct {
	// Attempt: a send to platform ended with o; RouteMissing too when no
	// adapter serves the platform.
	Attempt func(platform string, o adapters.Outcome)
	// Resent: a message to platform whose earlier claim ended unsettled
	// (that holder may have sent it) is claimed again, to be sent or
	// handed back unsent.
	Resent func(platform string)
	// Acked: an accepted message was acked, took after its platform
	// accepted it: the window in which a crash sends it twice.
	Acked func(took time.Duration)
	// StreamCall: a platform call showing a reply in progress, a post or
	// (edit) an edit, ended with err.
	StreamCall func(platform string, edit bool, err error)
}

func (m Metrics) attempt(platform string, o adapters.Outcome) {
	if m.Attempt != nil {
		m.Attempt(platform, o)
	}
}

func (m Metrics) resent(platform string) {
	if m.Resent != nil {
		m.Resent(platform)
	}
}

func (m Metrics) acked(took time.Duration) {
	if m.Acked != nil {
		m.Acked(took)
	}
}

func (m Metrics) streamCall(platform string, edit bool, err error) {
	if m.StreamCall != nil {
		m.StreamCall(platform, edit, err)
	}
}
