package sessions

import "sync"

// Deltas carries the text a running turn's model streams, piece by
// piece, to whoever in this process waits on that turn's reply (the
// local API's streamed completions). It is best effort by design: a
// turn that runs in another process streams nothing here, and its
// waiter gets the reply whole from the timeline, which stays the truth.
// The turn is never held up by a slow waiter: pieces queue without
// bound until taken.
type Deltas struct {
	// Redact, when set, masks herald's secrets in each piece before a
	// waiter gets it, as the delivered reply is masked.
	Redact func(string) string
	// Hold, when set, says how many bytes at the end of the text not yet
	// handed on may be the start of a secret (redact.Redactor.Unsettled):
	// they wait for the turn's next piece, or its end (End), so that a
	// secret the model writes across two pieces is masked whole rather
	// than handed on in two unmasked parts.
	Hold func(string) int

	mu   sync.Mutex
	subs map[deltaKey][]*DeltaSub
	held map[deltaKey]string // the end of a turn's text Hold kept back
}

type deltaKey struct{ conv, msgID string }

// DeltaSub is one waiter's subscription to a turn's pieces.
type DeltaSub struct {
	d     *Deltas
	key   deltaKey
	ready chan struct{}

	mu  sync.Mutex
	buf []string
}

// Subscribe waits for the pieces of the turn that answers message msgID
// of conv. Subscribe before the message is delivered: its turn may start
// within the delivery.
func (d *Deltas) Subscribe(conv, msgID string) *DeltaSub {
	s := &DeltaSub{d: d, key: deltaKey{conv, msgID}, ready: make(chan struct{}, 1)}
	d.mu.Lock()
	if d.subs == nil {
		d.subs = map[deltaKey][]*DeltaSub{}
	}
	d.subs[s.key] = append(d.subs[s.key], s)
	d.mu.Unlock()
	return s
}

// Listening reports whether anyone waits on the pieces of msgID's turn:
// a turn streams only then.
func (d *Deltas) Listening(conv, msgID string) bool {
	if d == nil || msgID == "" {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.subs[deltaKey{conv, msgID}]) > 0
}

// Publish hands text to the waiters on msgID's turn; with none, it is
// dropped. A turn's pieces are published one at a time.
func (d *Deltas) Publish(conv, msgID, text string) {
	key := deltaKey{conv, msgID}
	d.mu.Lock()
	subs := d.subs[key]
	if len(subs) > 0 && d.Hold != nil {
		text = d.held[key] + text
		n := d.Hold(text)
		if n > 0 {
			if d.held == nil {
				d.held = map[deltaKey]string{}
			}
			d.held[key] = text[len(text)-n:]
		} else {
			delete(d.held, key)
		}
		text = text[:len(text)-n]
	}
	d.mu.Unlock()
	d.hand(subs, text)
}

// End ends what msgID's turn publishes: what Hold kept back of it is
// handed on when the turn made its reply (replied), else dropped, being
// in no reply and perhaps the start of a secret.
func (d *Deltas) End(conv, msgID string, replied bool) {
	if d == nil {
		return
	}
	key := deltaKey{conv, msgID}
	d.mu.Lock()
	text, subs := d.held[key], d.subs[key]
	delete(d.held, key)
	d.mu.Unlock()
	if replied {
		d.hand(subs, text)
	}
}

// hand gives text, masked, to subs.
func (d *Deltas) hand(subs []*DeltaSub, text string) {
	if len(subs) == 0 || text == "" {
		return
	}
	if d.Redact != nil {
		text = d.Redact(text)
	}
	for _, s := range subs {
		s.mu.Lock()
		s.buf = append(s.buf, text)
		s.mu.Unlock()
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

// Ready is signalled when pieces wait to be taken.
func (s *DeltaSub) Ready() <-chan struct{} { return s.ready }

// Take returns the pieces that arrived since the last Take, in order.
func (s *DeltaSub) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.buf
	s.buf = nil
	return out
}

// Close ends the subscription.
func (s *DeltaSub) Close() {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	subs := d.subs[s.key]
	for i, o := range subs {
		if o == s {
			subs = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if len(subs) == 0 {
		delete(d.subs, s.key)
		delete(d.held, s.key)
	} else {
		d.subs[s.key] = subs
	}
}
