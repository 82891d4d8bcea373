package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/llm"
)

// Metrics are the gateway's Prometheus metrics, on a registry of their
// own so that two gateways in one test process do not collide. A nil
// *Metrics counts nothing, so a piece run without a gateway needs none.
//
// Labels only take values from small fixed sets (outcomes, platforms,
// turn ends, command names): never a conversation key or a user.
type Metrics struct {
	reg *prometheus.Registry

	turnsStarted   prometheus.Counter
	turnsFinished  *prometheus.CounterVec
	turnSeconds    prometheus.Histogram
	turnsFailed    *prometheus.CounterVec
	leaseTakeovers prometheus.Counter
	leasesLost     prometheus.Counter

	inboundQueued     *prometheus.CounterVec
	inboundDuplicates prometheus.Counter
	commands          *prometheus.CounterVec
	signals           *prometheus.CounterVec

	outboxPending    prometheus.Gauge
	outboxDead       prometheus.Gauge
	deliveryAttempts *prometheus.CounterVec
	deliveryResends  *prometheus.CounterVec
	ackSeconds       prometheus.Histogram

	modelSeconds *prometheus.HistogramVec
}

// NewMetrics returns the metrics on a fresh registry that also carries
// the Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg}

	m.turnsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_turns_started_total",
		Help: "Agent turns started by this process.",
	})
	m.turnsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_turns_finished_total",
		Help: "Turns committed, by how they ended (done, clarify, budget, model_error, interrupted).",
	}, []string{"end"})
	m.turnSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "herald_turn_duration_seconds",
		Help:    "Time from claiming a turn to committing it.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12), // 10 ms … ~10 min
	})
	m.turnsFailed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_turns_failed_total",
		Help: "Turns that could not run or commit, by reason (history, runner, commit, control, dropped).",
	}, []string{"reason"})
	m.leaseTakeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_lease_takeovers_total",
		Help: "Entries claimed after an earlier holder died or gave them back mid-turn.",
	})
	m.leasesLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_leases_lost_total",
		Help: "Turns that lost their lease and committed nothing.",
	})
	m.inboundQueued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_inbound_queued_total",
		Help: "Inbound messages queued, by kind. Queued minus herald_turns_finished_total, summed over the cluster, is the growth of the turn queue.",
	}, []string{"kind"})
	m.inboundDuplicates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "herald_inbound_duplicates_total",
		Help: "Inbound messages that were redeliveries and added nothing.",
	})
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_commands_total",
		Help: "Chat commands handled, by command.",
	}, []string{"command"})
	m.signals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_signals_total",
		Help: "Signals sent to running turns, by kind (stop, interrupt, steer).",
	}, []string{"kind"})
	m.outboxPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_outbox_pending",
		Help: "Outbox messages not yet delivered, as last listed; the listing is capped, so the value is at most the cap.",
	})
	m.outboxDead = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "herald_outbox_dead",
		Help: "Dead-lettered outbox messages, as last listed; capped like herald_outbox_pending.",
	})
	m.deliveryAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_delivery_attempts_total",
		Help: "Sends to platforms, by platform and result (accepted, rate_limited, transient, permanent, route_missing).",
	}, []string{"platform", "result"})
	m.deliveryResends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_delivery_resends_total",
		Help: "Claims of a message whose earlier claim in this process ran out with no outcome written: possible duplicates.",
	}, []string{"platform"})
	m.ackSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "herald_delivery_ack_seconds",
		Help:    "Time from a platform accepting a message to its ack: the window in which a crash sends it twice.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 10), // 0.5 ms … ~2 s
	})
	m.modelSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_model_request_duration_seconds",
		Help:    "Model calls, retries included, by result (ok or the failure class).",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 13), // 50 ms … ~3.4 min
	}, []string{"result"})

	reg.MustRegister(
		m.turnsStarted, m.turnsFinished, m.turnSeconds, m.turnsFailed, m.leaseTakeovers, m.leasesLost,
		m.inboundQueued, m.inboundDuplicates, m.commands, m.signals,
		m.outboxPending, m.outboxDead, m.deliveryAttempts, m.deliveryResends, m.ackSeconds,
		m.modelSeconds,
	)
	return m
}

// Registry is where the metrics are registered; more can be added.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// RunningTurns exports how many turns this process runs and how many it
// may run at once: when the two meet, the turn queue is growing.
func (m *Metrics) RunningTurns(running func() int, slots int) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_turns_running",
			Help: "Turns running in this process.",
		}, func() float64 { return float64(running()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_turn_slots",
			Help: "Turns this process may run at once (workers.turns).",
		}, func() float64 { return float64(slots) }),
	)
}

func (m *Metrics) attempt(platform string, o adapters.Outcome) {
	if m != nil {
		m.deliveryAttempts.WithLabelValues(platform, o.String()).Inc()
	}
}

func (m *Metrics) resent(platform string) {
	if m != nil {
		m.deliveryResends.WithLabelValues(platform).Inc()
	}
}

func (m *Metrics) acked(took time.Duration) {
	if m != nil {
		m.ackSeconds.Observe(took.Seconds())
	}
}

func (m *Metrics) outbox(pending, dead int) {
	if m != nil {
		m.outboxPending.Set(float64(pending))
		m.outboxDead.Set(float64(dead))
	}
}

// TimeModel wraps c so that each call's latency is observed.
func (m *Metrics) TimeModel(c llm.Client) llm.Client {
	if m == nil || c == nil {
		return c
	}
	return timedModel{c: c, m: m}
}

type timedModel struct {
	c llm.Client
	m *Metrics
}

func (t timedModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	start := time.Now()
	resp, err := t.c.Complete(ctx, req)
	result := "ok"
	if err != nil {
		result = string(llm.ClassOf(err))
		if result == "" {
			result = "error"
		}
	}
	t.m.modelSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return resp, err
}
