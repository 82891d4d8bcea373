// Package metrics holds herald's Prometheus metrics: the registry, the
// hooks the turn worker, the router and the delivery worker count on,
// the model calls' timing, and the gauges refreshed from the store.
package metrics

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/errs"
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

	queueDepth       prometheus.Gauge
	outboxPending    prometheus.Gauge
	outboxDead       prometheus.Gauge
	deliveryAttempts *prometheus.CounterVec
	streamCalls      *prometheus.CounterVec
	deliveryResends  *prometheus.CounterVec
	ackSeconds       prometheus.Histogram

	modelSeconds   *prometheus.HistogramVec
	modelTokens    *prometheus.CounterVec
	keyCooldowns   *prometheus.CounterVec
	keyRotations   *prometheus.CounterVec
	modelFallbacks *prometheus.CounterVec

	controllerFires *prometheus.CounterVec
	controllerStale *prometheus.CounterVec

	mcpSeconds *prometheus.HistogramVec

	// tally counts the same events for this process's record among
	// the instances, which shows what it did over the last minute.
	tally *instances.Tally

	adapterOwned *prometheus.GaugeVec
}

// NewMetrics returns the metrics on a fresh registry that also carries
// the Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg, tally: instances.NewTally()}

	m.turnsStarted = counter(reg, "herald_turns_started_total", "Agent turns started by this process.")
	m.turnsFinished = counterVec(reg, "herald_turns_finished_total",
		"Turns committed, by how they ended (done, clarify, budget, model_error, interrupted).", "end")
	m.turnSeconds = histogram(reg, "herald_turn_duration_seconds",
		"Time from claiming a turn to committing it.", prometheus.ExponentialBuckets(0.01, 2.5, 12)) // 10 ms … ~10 min
	m.turnsFailed = counterVec(reg, "herald_turns_failed_total",
		"Turns that could not run or commit, by reason (history, runner, commit, control, dropped).", "reason")
	m.leaseTakeovers = counter(reg, "herald_lease_takeovers_total",
		"Entries claimed after an earlier holder died or gave them back mid-turn.")
	m.leasesLost = counter(reg, "herald_leases_lost_total",
		"Turns that lost their lease and committed nothing.")
	m.inboundQueued = counterVec(reg, "herald_inbound_queued_total",
		"Inbound messages queued, by kind.", "kind")
	m.inboundDuplicates = counter(reg, "herald_inbound_duplicates_total",
		"Inbound messages that were redeliveries and added nothing.")
	m.commands = counterVec(reg, "herald_commands_total", "Chat commands handled, by command.", "command")
	m.signals = counterVec(reg, "herald_signals_total",
		"Signals sent to running turns, by kind (stop, interrupt, steer).", "kind")
	m.queueDepth = gauge(reg, "herald_queue_depth",
		"Entries in the turn queues of every conversation, waiting or being run, as last counted; capped like herald_outbox_pending.")
	m.outboxPending = gauge(reg, "herald_outbox_pending",
		"Outbox messages not yet delivered, as last listed; the listing is capped, so the value is at most the cap.")
	m.outboxDead = gauge(reg, "herald_outbox_dead",
		"Dead-lettered outbox messages, as last listed; capped like herald_outbox_pending.")
	m.streamCalls = counterVec(reg, "herald_stream_calls_total",
		"Platform calls showing replies as they are written, by platform, call (post, edit) and result (ok, failed, refused).",
		"platform", "call", "result")
	m.deliveryAttempts = counterVec(reg, "herald_delivery_attempts_total",
		"Sends to platforms, by platform and result (accepted, rate_limited, transient, permanent, route_missing).", "platform", "result")
	m.deliveryResends = counterVec(reg, "herald_delivery_resends_total",
		"Claims by this process, by platform, of a message whose earlier claim (by any worker, in any process) ended with nothing written: it ran out, or its worker's heartbeat did, so that worker may have sent it; each a possible duplicate, counted whether this claim sends the message or hands it back unsent.", "platform")
	m.ackSeconds = histogram(reg, "herald_delivery_ack_seconds",
		"Time from a platform accepting a message to its ack: the window in which a crash sends it twice.", prometheus.ExponentialBuckets(0.0005, 2.5, 10)) // 0.5 ms … ~2 s
	m.controllerFires = counterVec(reg, "herald_controller_fires_total",
		"Session controllers' fires run by this process, by kind (goal, loop, heartbeat) and outcome (queued, requeued, moved).", "kind", "outcome")
	m.controllerStale = counterVec(reg, "herald_controller_stale_total",
		"Session controllers' entries dropped unrun because their controller changed since they were queued, by kind.", "kind")
	m.modelTokens = counterVec(reg, "herald_model_tokens_total",
		"Tokens the model calls of this process used, as their servers reported, by model and kind (prompt, completion).", "model", "kind")
	m.modelSeconds = histogramVec(reg, "herald_model_request_duration_seconds",
		"Model calls, retries included, by result (ok or the failure class).", prometheus.ExponentialBuckets(0.05, 2, 13), "result") // 50 ms … ~3.4 min
	m.keyCooldowns = counterVec(reg, "herald_model_key_cooldowns_total",
		"API keys this process set aside after a failure, by pool (the model server's host) and reason (rate_limited, payment, auth, revoked).", "pool", "reason")
	m.keyRotations = counterVec(reg, "herald_model_key_rotations_total",
		"Model requests of this process that left a key for another of its pool, by pool and the failure's class.", "pool", "reason")
	m.modelFallbacks = counterVec(reg, "herald_model_fallbacks_total",
		"Model requests of this process that went on to a fallback (model.fallbacks), by the model left (from), the one asked next (to), both model@host, and the failure's class.", "from", "to", "reason")
	m.mcpSeconds = histogramVec(reg, "herald_mcp_call_duration_seconds",
		"MCP tool calls of this process, by server, tool (the server's name for it, of the configured servers') and result (ok, error, timeout, not_ready).", prometheus.ExponentialBuckets(0.005, 2.5, 10), "server", "tool", "result") // 5 ms … ~19 s
	m.adapterOwned = gaugeVec(reg, "herald_adapter_owned",
		"Exclusive adapters (a long poll, a gateway shard) this process holds the lease of and runs, by platform.", "platform")
	return m
}

// The constructors below make a metric and register it on reg.

func counter(reg *prometheus.Registry, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	reg.MustRegister(c)
	return c
}

func counterVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	reg.MustRegister(c)
	return c
}

func gauge(reg *prometheus.Registry, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	reg.MustRegister(g)
	return g
}

func gaugeVec(reg *prometheus.Registry, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	reg.MustRegister(g)
	return g
}

func histogram(reg *prometheus.Registry, name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	reg.MustRegister(h)
	return h
}

func histogramVec(reg *prometheus.Registry, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	reg.MustRegister(h)
	return h
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
	if m == nil {
		return
	}
	m.deliveryAttempts.WithLabelValues(platform, o.String()).Inc()
	switch o {
	case adapters.Accepted:
		m.tally.Sent()
	case adapters.RateLimited, adapters.Transient, adapters.Permanent:
		m.tally.SendFailed()
	}
}

// Tally is what this process did, counted as the metrics count it: turns
// run and failed, failed model calls, messages sent and sends failed
// (instances.Heartbeat records it). Nil for a nil *Metrics.
func (m *Metrics) Tally() *instances.Tally {
	if m == nil {
		return nil
	}
	return m.tally
}

// streamCall counts one call of the streaming driver: a post (no message
// yet) or an edit, and how it went.
func (m *Metrics) streamCall(platform string, edit bool, err error) {
	if m == nil {
		return
	}
	call, result := "post", "ok"
	if edit {
		call = "edit"
	}
	switch {
	case errs.Is(err, errs.Invalid):
		result = "refused"
	case err != nil:
		result = "failed"
	}
	m.streamCalls.WithLabelValues(platform, call, result).Inc()
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

func (m *Metrics) queue(depth int) {
	if m != nil {
		m.queueDepth.Set(float64(depth))
	}
}

func (m *Metrics) outbox(pending, dead int) {
	if m != nil {
		m.outboxPending.Set(float64(pending))
		m.outboxDead.Set(float64(dead))
	}
}

var _ llm.Observer = (*Metrics)(nil)

// KeyCooled counts a key set aside (llm.Observer).
func (m *Metrics) KeyCooled(pool, reason string) {
	if m != nil {
		m.keyCooldowns.WithLabelValues(pool, reason).Inc()
	}
}

// KeyRotated counts a request that moved to another key (llm.Observer).
func (m *Metrics) KeyRotated(pool string, reason llm.Class) {
	if m != nil {
		m.keyRotations.WithLabelValues(pool, string(reason)).Inc()
	}
}

// FellBack counts a switch to a fallback model (llm.Observer).
func (m *Metrics) FellBack(from, to string, reason llm.Class) {
	if m != nil {
		m.modelFallbacks.WithLabelValues(from, to, string(reason)).Inc()
	}
}

// TimeModel wraps c, whose calls run on model unless a request names
// another (or a fallback answered: Response.Answered), so that each
// call's latency and the tokens it used are observed.
func (m *Metrics) TimeModel(c llm.Client, model string) llm.Client {
	if m == nil || c == nil {
		return c
	}
	return &timedModel{c: c, m: m, model: model}
}

// timedModel is a client whose calls are observed. Its methods take a
// pointer, as the client interface holds it, so that no wrapper's frame
// copies it on the goroutine's stack while a call waits on the model.
type timedModel struct {
	c     llm.Client
	m     *Metrics
	model string
}

func (t *timedModel) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	start := time.Now()
	resp, err := t.c.Complete(ctx, req)
	t.observe(ctx, req.Model, start, resp, err)
	return resp, err
}

// observe records a call asked of asked, started at start, that
// answered resp and err. It is apart from Complete so that its locals
// are off the goroutine's stack while the call waits.
func (t *timedModel) observe(ctx context.Context, asked string, start time.Time, resp *llm.Response, err error) {
	result := "ok"
	if err != nil {
		result = string(llm.ClassOf(err))
		if result == "" {
			result = "error"
		}
	}
	t.m.modelSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
	if err != nil && ctx.Err() == nil {
		t.m.tally.ModelError()
	}
	if resp != nil {
		model := cmp.Or(resp.Answered.Model, asked, t.model)
		t.m.modelTokens.WithLabelValues(model, "prompt").Add(float64(resp.Usage.PromptTokens))
		t.m.modelTokens.WithLabelValues(model, "completion").Add(float64(resp.Usage.CompletionTokens))
	}
}
