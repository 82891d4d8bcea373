package delivery

import (
	"sync"

	"github.com/heraldgw/herald/outbox"
)

// settlements tell the domain that sent a message how its delivery ended
// (Options.Settled), each on a goroutine of its own.
type settlements struct {
	fn      func(m outbox.Message, accepted bool, reason string) // nil tells nothing
	running sync.WaitGroup
}

// tell passes how m's delivery ended to fn, for a message with a Ref
// or with files (whose bytes are forgotten once it was accepted).
func (s *settlements) tell(m outbox.Message, accepted bool, reason string) {
	if s.fn != nil && (m.Ref != "" || len(m.Files) > 0) {
		s.running.Go(func() { s.fn(m, accepted, reason) })
	}
}

// wait returns when every call of fn has returned.
func (s *settlements) wait() { s.running.Wait() }
