package delivery

import (
	"maps"
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

// accepted tells that m was accepted, as platformID (the platform's id
// of its message, "" when it gave none), carried in Meta as
// outbox.MetaSentID: the copy is made only for a message fn is told of.
func (s *settlements) accepted(m outbox.Message, platformID string) {
	if s.fn == nil || (m.Ref == "" && len(m.Files) == 0) {
		return
	}
	if platformID != "" {
		meta := maps.Clone(m.Meta)
		if meta == nil {
			meta = map[string]string{}
		}
		meta[outbox.MetaSentID] = platformID
		m.Meta = meta
	}
	s.tell(m, true, "")
}

// wait returns when every call of fn has returned.
func (s *settlements) wait() { s.running.Wait() }
