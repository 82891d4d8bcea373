package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/outbox"
)

// maxAckBatch bounds the acks one store call carries.
const maxAckBatch = 256

// Once an ack is queued, the acker waits up to its linger
// (Options.AckLinger) for others to join it, or until ackEnough
// are queued, so that under load one store call carries many: the
// call's own cost (on Redis a script, whose ZREM and DEL serve the whole
// batch) is then shared by dozens of messages instead of a few. An ack
// decides nothing about later sends; waiting only holds the claim a
// little longer (a process that dies meanwhile leaves the message to be
// sent again once its claim runs out, as one that dies before the ack
// always did).
const ackEnough = 64

// acker writes the acks of accepted messages, as many in one AckAll as
// have queued since the last.
type acker struct {
	outbox  outbox.Store
	linger  time.Duration
	metrics Metrics
	log     *slog.Logger
	settled *settlements
	senders <-chan struct{} // closed once the claim loop returned and every sender ended
	wake    chan struct{}   // a token: acks are queued

	mu      sync.Mutex
	pending []acceptedMsg

	loop bgloop.Loop
}

// acceptedMsg is a message the platform accepted, waiting for its ack.
type acceptedMsg struct {
	c          outbox.Claimed
	at         time.Time // when the send returned, for the ack-window metric
	platformID string    // the platform's id for it, for the log
}

// start runs the acker. It returns once every sender has ended (the
// claim loop returned, so none starts again) and every ack queued by then
// was written: a message the platform accepted is acked even while the
// process stops, so the end of ctx does not stop it.
func (a *acker) start(ctx context.Context, op string) error {
	return a.loop.Start(ctx, op, a.run)
}

// wait waits, until ctx ends (its error then), for the acker to return.
func (a *acker) wait(ctx context.Context) error { return a.loop.Stop(ctx) }

// queue hands an accepted message to the acker. The sender moves on at
// once: an ack decides nothing about the next send to the target, and
// acks that pile up while one store call is out go together in the next.
func (a *acker) queue(c outbox.Claimed, platformID string) {
	a.mu.Lock()
	a.pending = append(a.pending, acceptedMsg{c: c, at: time.Now(), platformID: platformID})
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// queued is how many acks wait for the acker.
func (a *acker) queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

// lingerForAcks waits until ackEnough acks are queued, the linger has
// passed or the senders are done, whichever comes first.
func (a *acker) lingerForAcks() {
	linger := time.NewTimer(a.linger)
	defer linger.Stop()
	for a.queued() < ackEnough {
		select {
		case <-a.wake:
		case <-linger.C:
			return
		case <-a.senders:
			return
		}
	}
}

// take takes up to maxAckBatch queued acks, oldest first.
func (a *acker) take() []acceptedMsg {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(len(a.pending), maxAckBatch)
	if n == 0 {
		return nil
	}
	batch := make([]acceptedMsg, n)
	copy(batch, a.pending)
	a.pending = a.pending[n:]
	if len(a.pending) == 0 {
		a.pending = nil // let the backing array go after a burst
	}
	return batch
}

func (a *acker) run(ctx context.Context) {
	for {
		if a.queued() > 0 {
			a.lingerForAcks()
			a.ackAll(ctx, a.take())
			continue
		}
		select {
		case <-a.wake:
		case <-a.senders:
			if batch := a.take(); len(batch) > 0 {
				a.ackAll(ctx, batch)
				continue
			}
			return
		}
	}
}

// ackAll acks batch in one store call. A failed call leaves every claim
// of the batch to run out, as a failed Ack leaves one.
func (a *acker) ackAll(ctx context.Context, batch []acceptedMsg) {
	cs := make([]outbox.Claimed, len(batch))
	for i, m := range batch {
		cs[i] = m.c
	}
	ctx, cancel := storeContext(ctx)
	acked, err := a.outbox.AckAll(ctx, cs)
	cancel()
	now := time.Now()
	for i, m := range batch {
		e := err
		if err == nil {
			e = acked[i]
		}
		a.metrics.acked(now.Sub(m.at))
		logOutcome(a.log, m.c, "ack", e)
		if e == nil {
			a.settled.accepted(m.c.Message, m.platformID)
			a.log.Debug("message delivered", "conv", m.c.Conv, "outbox_id", m.c.ID, "platform", m.c.Target.Platform, "platform_message_id", m.platformID)
		}
	}
}
