package gateway

import (
	"time"

	"github.com/heraldgw/herald/delivery"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// TurnHooks are the turn worker's metric hooks.
func (m *Metrics) TurnHooks() sessions.TurnMetrics {
	return sessions.TurnMetrics{
		Started: m.turnsStarted.Inc,
		Finished: func(end sessions.TurnEnd, took time.Duration) {
			m.turnsFinished.WithLabelValues(string(end)).Inc()
			m.turnSeconds.Observe(took.Seconds())
		},
		Failed:    func(reason string) { m.turnsFailed.WithLabelValues(reason).Inc() },
		Takeover:  m.leaseTakeovers.Inc,
		LeaseLost: m.leasesLost.Inc,
	}
}

// RouterHooks are the router's metric hooks.
func (m *Metrics) RouterHooks() sessions.RouterMetrics {
	return sessions.RouterMetrics{
		Appended:  func(k sessions.Kind) { m.inboundQueued.WithLabelValues(string(k)).Inc() },
		Duplicate: m.inboundDuplicates.Inc,
		Command:   func(name string) { m.commands.WithLabelValues(name).Inc() },
		Signaled:  func(k signals.Kind) { m.signals.WithLabelValues(string(k)).Inc() },
	}
}

// DeliveryHooks are the delivery worker's and the streaming driver's
// metric hooks.
func (m *Metrics) DeliveryHooks() delivery.Metrics {
	return delivery.Metrics{
		Attempt:    m.attempt,
		Resent:     m.resent,
		Acked:      m.acked,
		StreamCall: m.streamCall,
	}
}
