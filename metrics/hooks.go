package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
			m.tally.Turn()
			if end == sessions.TurnModelError {
				m.tally.TurnError()
			}
		},
		Failed: func(reason string) {
			m.turnsFailed.WithLabelValues(reason).Inc()
			m.tally.TurnError()
		},
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

// ControllerFired counts a fire of a session controller of kind run by
// this process (controllers.SchedulerOptions.Fired).
func (m *Metrics) ControllerFired(kind, outcome string) {
	m.controllerFires.WithLabelValues(kind, outcome).Inc()
}

// MCPCall times one MCP tool call of server's tool that ended in
// result (mcp.Options.Observe).
func (m *Metrics) MCPCall(server, tool, result string, d time.Duration) {
	m.mcpSeconds.WithLabelValues(server, tool, result).Observe(d.Seconds())
}

// ControllerDropped counts an entry of a controller of kind dropped
// unrun (controllers.RunnerOptions.Dropped).
func (m *Metrics) ControllerDropped(kind string) {
	m.controllerStale.WithLabelValues(kind).Inc()
}

// AdapterOwned is herald_adapter_owned of platform: 1 while this process
// holds an exclusive adapter's lease and runs it, else 0.
func (m *Metrics) AdapterOwned(platform string) prometheus.Gauge {
	return m.adapterOwned.WithLabelValues(platform)
}
