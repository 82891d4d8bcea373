package slack

import (
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
)

// progressTTL is how long the parts already sent of a message are
// remembered. The delivery worker retries within minutes; an entry older
// than this belongs to a message that was dead-lettered or taken over by
// another process.
const progressTTL = time.Hour

// progress is how far a message split into parts got: its retry resumes
// at parts[sent] instead of posting the first parts again.
type progress struct {
	parts []string
	plain bool   // Slack refused the formatting; parts go with markup off
	sent  int    // parts Slack accepted
	first string // the ts of the first part
	at    time.Time
}

// progressMap is the progress of partly sent messages, by outbox message
// id. It lives in memory: after a restart a retry posts every part again,
// which is the rare duplicate the outbox's at-least-once allows.
type progressMap struct {
	clock clock.Clock
	mu    sync.Mutex
	m     map[string]*progress
}

func (pm *progressMap) init(c clock.Clock) {
	pm.clock = c
	pm.m = map[string]*progress{}
}

// take removes and returns the progress of message id, or nil. The
// caller owns it until it puts it back.
func (pm *progressMap) take(id string) *progress {
	if id == "" {
		return nil
	}
	pm.mu.Lock()
	defer pm.mu.Unlock()
	p := pm.m[id]
	delete(pm.m, id)
	return p
}

// put keeps p for the next attempt of message id when some of its parts
// went out or it turned plain, and forgets entries older than progressTTL.
func (pm *progressMap) put(id string, p *progress) {
	if id == "" || (p.sent == 0 && !p.plain) {
		return
	}
	pm.mu.Lock()
	defer pm.mu.Unlock()
	now := pm.clock.Now()
	for k, old := range pm.m {
		if now.Sub(old.at) > progressTTL {
			delete(pm.m, k)
		}
	}
	p.at = now
	pm.m[id] = p
}
