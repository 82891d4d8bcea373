package delivery

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/outbox"
)

// sender sends one claimed message and writes the outcome: an ack (by
// the acker), a release for a retry, a dead letter, or a hand-back.
type sender struct {
	outbox      outbox.Store
	routes      *Routes
	claimTTL    time.Duration
	margin      time.Duration // the part of a claim kept free at its end (claimMargin)
	sendTimeout time.Duration
	maxAttempts int
	retry       adapters.Backoff // between a failed message's attempts
	routeRetry  time.Duration
	redact      func(string) string
	streamed    func(ctx context.Context, a adapters.Adapter, m outbox.Message) (adapters.SendResult, bool)
	clock       clock.Clock
	log         *slog.Logger
	metrics     Metrics
	beat        *heartbeat // nil without a heartbeat
	room        *room      // times the sends
	acks        *acker
	settled     *settlements
	files       Files // nil: a message with files cannot be sent
}

// handle sends c unless it must go back unsent: the process stops, an
// earlier message of its lane was handed back (stalled, due at hold), or
// its claim or the heartbeat would run out before the send returns. It
// returns when c is due again if it went back unsent, else the zero time.
func (s *sender) handle(ctx context.Context, c outbox.Claimed, stalled bool, hold, now time.Time) time.Time {
	if c.Resend {
		// Its earlier claim ended unsettled: that holder may have sent it.
		// Counted at this claim, which sends it or hands it back: a
		// hand-back settles the claim, so the one that sends it after is
		// no resend.
		s.metrics.resent(c.Target.Platform)
		s.log.Warn("claimed again a message whose earlier claim ended unsettled: it may reach the platform twice", "conv", c.Conv, "outbox_id", c.ID, "platform", c.Target.Platform)
	}
	switch {
	case ctx.Err() != nil:
		return s.postpone(ctx, c, now, "the process is stopping")
	case stalled:
		return s.postpone(ctx, c, later(hold, now), "an earlier message to the same target waits")
	case c.Expires.Sub(now) < 2*s.margin:
		// Sending now could outlast the claim and race another
		// worker's send of the same message.
		return s.postpone(ctx, c, now, "its claim ran out while it waited")
	case s.beatLeft(now) < 2*s.beatMargin():
		// The heartbeat may run out before the send returns, and
		// another worker's claim then ends this one's claims.
		return s.postpone(ctx, c, now, "the worker's heartbeat ran out")
	}
	return s.deliver(ctx, c)
}

// beatLeft is how long the heartbeat holds from now, as far as this
// worker knows: its claims are its own no longer than that, however long
// they run. Without a heartbeat it is as long as any claim.
func (s *sender) beatLeft(now time.Time) time.Duration {
	if s.beat == nil {
		return s.claimTTL + s.sendTimeout
	}
	return s.beat.left(now)
}

// beatMargin is the part of a beat kept free at its end; none without a
// heartbeat.
func (s *sender) beatMargin() time.Duration {
	if s.beat == nil {
		return 0
	}
	return s.beat.margin
}

// deliver sends c and writes the outcome. When c was handed back unsent
// (the platform asked to wait, the send failed, no route), it returns when
// c is due again, and the messages behind it wait as long; else the zero
// time.
func (s *sender) deliver(hard context.Context, c outbox.Claimed) time.Time {
	platform := c.Target.Platform
	a, ok := s.routes.Get(platform)
	if !ok {
		s.metrics.attempt(platform, adapters.RouteMissing)
		return s.postpone(hard, c, s.clock.Now().Add(s.routeRetry), "no adapter serves "+platform)
	}
	now := s.clock.Now()
	timeout := min(s.sendTimeout, c.Expires.Sub(now)-s.margin, s.beatLeft(now)-s.beatMargin())
	ctx, cancel := context.WithTimeout(hard, timeout)
	ctx = adapters.WithParts(ctx, func(p outbox.Parts) error { return s.keepParts(hard, c, p) })
	// The send continues the trace of the turn that wrote the message.
	ctx, span := tracing.Start(tracing.Extract(ctx, c.Meta), tracing.SpanDeliverySend,
		attribute.String("herald.platform", platform), attribute.String("herald.outbox.kind", c.Kind))
	start := time.Now()
	res := s.send(ctx, a, c.Message)
	s.room.timed(time.Since(start))
	span.SetAttributes(attribute.String("herald.delivery.outcome", res.Outcome.String()))
	tracing.EndWith(span, res.Outcome != adapters.Accepted, res.Outcome.String())
	cancel()
	now = s.clock.Now()
	if res.Outcome != adapters.Accepted && hard.Err() != nil {
		// The send failed because this process stops, not because of
		// the platform: no attempt is spent on it.
		return s.postpone(hard, c, now, "the process is stopping")
	}
	s.metrics.attempt(platform, res.Outcome)
	if res.Outcome == adapters.Accepted {
		s.acks.queue(c, res.MessageID)
		return time.Time{}
	}
	reason := s.redact(res.Reason)
	log := s.log.With("conv", c.Conv, "outbox_id", c.ID, "platform", platform, "outcome", res.Outcome.String())

	switch res.Outcome {
	case adapters.Permanent:
		if reason == "" {
			reason = platform + " refused the message"
		}
		log.Warn("message dead-lettered", "reason", reason)
		return s.dead(hard, c, reason)

	case adapters.RouteMissing:
		next := now.Add(s.routeRetry)
		log.Info("no route to send; the message waits without spending an attempt", "reason", reason)
		return s.postpone(hard, c, next, "")
	}

	// RateLimited, Transient, and any outcome herald does not know yet:
	// an attempt is spent.
	if reason == "" {
		reason = res.Outcome.String()
	}
	attempts := c.Attempts + 1
	if attempts >= s.maxAttempts {
		why := fmt.Sprintf("gave up after %d attempts: %s", attempts, reason)
		log.Warn("message dead-lettered", "reason", why)
		return s.dead(hard, c, why)
	}
	next := now.Add(s.backoff(c.ID, attempts))
	if res.Outcome == adapters.RateLimited && res.RetryAfter > 0 {
		next = now.Add(res.RetryAfter)
	}
	log.Info("send failed; retrying later", "attempts", attempts, "next_attempt", next, "reason", reason)
	if !s.write(hard, c, "release", func(ctx context.Context) error { return s.outbox.Release(ctx, c, next, reason) }) {
		return later(next, c.Expires)
	}
	return next
}

// keepParts records under c's claim how far c got, before its next part
// goes (see adapters.KeepParts).
func (s *sender) keepParts(ctx context.Context, c outbox.Claimed, p outbox.Parts) error {
	ctx, cancel := storeContext(ctx)
	defer cancel()
	return s.outbox.KeepParts(ctx, c, p)
}

// send calls the adapter, turning a panic into a transient failure: one
// bad message must not take the sender down.
func (s *sender) send(ctx context.Context, a adapters.Adapter, m outbox.Message) (res adapters.SendResult) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("the adapter panicked sending a message", "platform", a.Platform(), "outbox_id", m.ID, "panic", p)
			res = adapters.SendResult{Outcome: adapters.Transient, Reason: fmt.Sprintf("the %s adapter panicked", a.Platform())}
		}
	}()
	m.Text = s.redact(m.Text)
	m, res, ok := s.withFiles(ctx, m)
	if !ok {
		return res
	}
	if s.streamed != nil {
		if res, ok := s.streamed(ctx, a, m); ok {
			return res
		}
	}
	return a.Send(ctx, m)
}

// backoff is the wait after a message's attempts-th failed send:
// BackoffMin doubled per attempt up to BackoffMax, spread by up to a tenth
// by the message id, so messages that failed together do not all come
// back in the same instant.
func (s *sender) backoff(id string, attempts int) time.Duration {
	wait := s.retry.Wait(attempts)
	h := fnv.New32a()
	h.Write([]byte(id))
	return wait + time.Duration(uint64(wait/10)*uint64(h.Sum32()%1000)/1000)
}

// dead moves c to the dead-letter list with reason. When the write
// failed, it returns c's claim expiry, as c stays claimed until then;
// else the zero time.
func (s *sender) dead(ctx context.Context, c outbox.Claimed, reason string) time.Time {
	var err error
	ok := s.write(ctx, c, "dead-letter", func(ctx context.Context) error {
		err = s.outbox.Dead(ctx, c, reason)
		return err
	})
	if err == nil {
		s.settled.tell(c.Message, false, reason)
	}
	if !ok {
		return c.Expires
	}
	return time.Time{}
}

// postpone gives c back without spending an attempt, due at next, and
// returns when it is due: next, or c's claim expiry when the write
// failed, as c stays claimed until then.
func (s *sender) postpone(ctx context.Context, c outbox.Claimed, next time.Time, why string) time.Time {
	if why != "" {
		s.log.Debug("message handed back", "conv", c.Conv, "outbox_id", c.ID, "why", why)
	}
	if !s.write(ctx, c, "postpone", func(ctx context.Context) error { return s.outbox.Postpone(ctx, c, next) }) {
		return later(next, c.Expires)
	}
	return next
}

// write runs one outbox write for c, logging a failure, and reports
// whether the claim was settled (or is no longer this worker's). A failed
// write leaves the claim to run out: the message is then due again, and
// the claim that takes it reports a resend; meanwhile the store shows it
// held by this worker, so the messages behind it must wait until then
// (see order.stalls).
func (s *sender) write(ctx context.Context, c outbox.Claimed, what string, fn func(ctx context.Context) error) bool {
	ctx, cancel := storeContext(ctx)
	defer cancel()
	err := fn(ctx)
	logOutcome(s.log, c, what, err)
	return err == nil || errs.Is(err, errs.NotFound) || errs.Is(err, errs.LeaseLost)
}

// storeContext is ctx for one outbox write after a send: not cancelled
// with ctx, as a write about a send must land even while the process
// stops, and bounded by storeTimeout.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

// logOutcome logs a failure of the write what of c's claim.
func logOutcome(log *slog.Logger, c outbox.Claimed, what string, err error) {
	switch {
	case err == nil, errs.Is(err, errs.NotFound):
	case errs.Is(err, errs.LeaseLost):
		log.Warn("the message's claim ran out and another worker took it; it may be sent twice",
			"conv", c.Conv, "outbox_id", c.ID, "platform", c.Target.Platform, "write", what)
	default:
		log.Warn("writing a delivery outcome failed; the message is due again when its claim runs out",
			"conv", c.Conv, "outbox_id", c.ID, "platform", c.Target.Platform, "write", what, "err", err)
	}
}
