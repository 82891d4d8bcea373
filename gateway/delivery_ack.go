package gateway

import (
	"context"
	"time"

	"github.com/heraldgw/herald/outbox"
)

// maxAckBatch bounds the acks one store call carries.
const maxAckBatch = 256

// Once an ack is queued, the acker waits up to its linger
// (DeliveryOptions.AckLinger) for others to join it, or until ackEnough
// are queued, so that under load one store call carries many: the
// call's own cost (on Redis a script, whose ZREM and DEL serve the whole
// batch) is then shared by dozens of messages instead of a few. An ack
// decides nothing about later sends; waiting only holds the claim a
// little longer (a process that dies meanwhile leaves the message to be
// sent again once its claim runs out, as one that dies before the ack
// always did).
const ackEnough = 64

// acceptedMsg is a message the platform accepted, waiting for its ack.
type acceptedMsg struct {
	c          outbox.Claimed
	at         time.Time // when the send returned, for the ack-window metric
	platformID string    // the platform's id for it, for the log
}

// queueAck hands an accepted message to the acker. The sender moves on
// at once: an ack decides nothing about the next send to the target, and
// acks that pile up while one store call is out go together in the next.
func (d *Delivery) queueAck(c outbox.Claimed, platformID string) {
	d.ackMu.Lock()
	d.ackQueue = append(d.ackQueue, acceptedMsg{c: c, at: time.Now(), platformID: platformID})
	d.ackMu.Unlock()
	select {
	case d.ackWake <- struct{}{}:
	default:
	}
}

// queuedAcks is how many acks wait for the acker.
func (d *Delivery) queuedAcks() int {
	d.ackMu.Lock()
	defer d.ackMu.Unlock()
	return len(d.ackQueue)
}

// lingerForAcks waits until ackEnough acks are queued, the linger has
// passed or the senders are done, whichever comes first.
func (d *Delivery) lingerForAcks() {
	linger := time.NewTimer(d.ackLinger)
	defer linger.Stop()
	for d.queuedAcks() < ackEnough {
		select {
		case <-d.ackWake:
		case <-linger.C:
			return
		case <-d.sendersDone:
			return
		}
	}
}

// takeAcks takes up to maxAckBatch queued acks, oldest first.
func (d *Delivery) takeAcks() []acceptedMsg {
	d.ackMu.Lock()
	defer d.ackMu.Unlock()
	n := min(len(d.ackQueue), maxAckBatch)
	if n == 0 {
		return nil
	}
	batch := make([]acceptedMsg, n)
	copy(batch, d.ackQueue)
	d.ackQueue = d.ackQueue[n:]
	if len(d.ackQueue) == 0 {
		d.ackQueue = nil // let the backing array go after a burst
	}
	return batch
}

// acker writes the acks of accepted messages, as many in one AckAll as
// have queued since the last. It returns once every sender has ended (the
// claim loop returned, so none starts again) and every ack queued by then
// was written: a message the platform accepted is acked even while the
// process stops.
func (d *Delivery) acker() {
	defer close(d.ackDone)
	for {
		if d.queuedAcks() > 0 {
			d.lingerForAcks()
			d.ackAll(d.takeAcks())
			continue
		}
		select {
		case <-d.ackWake:
		case <-d.sendersDone:
			if batch := d.takeAcks(); len(batch) > 0 {
				d.ackAll(batch)
				continue
			}
			return
		}
	}
}

// ackAll acks batch in one store call. A failed call leaves every claim
// of the batch to run out, as a failed Ack leaves one.
func (d *Delivery) ackAll(batch []acceptedMsg) {
	cs := make([]outbox.Claimed, len(batch))
	for i, a := range batch {
		cs[i] = a.c
	}
	ctx, cancel := context.WithTimeout(d.base, storeTimeout)
	acked, err := d.outbox.AckAll(ctx, cs)
	cancel()
	now := time.Now()
	for i, a := range batch {
		e := err
		if err == nil {
			e = acked[i]
		}
		d.metrics.acked(now.Sub(a.at))
		d.outcome(a.c, "ack", e)
		if e == nil {
			d.tell(a.c.Message, true, "")
			d.log.Debug("message delivered", "conv", a.c.Conv, "outbox_id", a.c.ID, "platform", a.c.Target.Platform, "platform_message_id", a.platformID)
		}
	}
}
