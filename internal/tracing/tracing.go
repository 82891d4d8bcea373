// Package tracing sends herald's OpenTelemetry traces over OTLP/HTTP when
// the environment names a collector (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and is otel's no-op otherwise.
//
// The spans are made through otel's global tracer provider, which Setup
// replaces while traces are on: a part that makes a span needs nothing
// passed to it. Work that one turn queues for another place (a
// delegation's children, its completion's turn, the delivery of a
// reply) carries the turn's span context in the store (Inject), and the
// place that picks it up continues the trace from it (Extract), on
// whichever instance that is.
package tracing

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Environment variables Setup reads.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// DefaultServiceName is the service traces are sent as when
// OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "herald"

// instrumentation names the tracer herald's spans come from.
const instrumentation = "github.com/heraldgw/herald"

// Span names.
const (
	SpanTurn            = "herald.turn"
	SpanModel           = "herald.model"
	SpanTool            = "herald.tool"
	SpanDelegationChild = "herald.delegation.child"
	SpanCronFire        = "herald.cron.fire"
	SpanKanbanRun       = "herald.kanban.run"
	SpanDeliverySend    = "herald.delivery.send"
)

// Keys of the span context in a map kept in the store (an entry's
// Meta, an outbox message's Meta, a delegation's Trace): the W3C
// traceparent and tracestate.
const (
	MetaTraceparent = "herald.traceparent"
	MetaTracestate  = "herald.tracestate"
)

// Setup sends traces to the OTLP/HTTP endpoint the environment names,
// as lookup (os.LookupEnv, say) reads it: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// as it is, else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces added; as
// the service OTEL_SERVICE_NAME names (DefaultServiceName when unset).
// It returns what flushes and stops them. With neither endpoint set it
// changes nothing and the returned function does nothing: every span is
// otel's no-op. The exporter reads its other settings (headers, timeout,
// compression) from the process's environment, as the OpenTelemetry SDK
// documents.
func Setup(lookup func(name string) (string, bool)) (shutdown func(context.Context) error, err error) {
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	name, endpoint := EnvTracesEndpoint, get(EnvTracesEndpoint)
	if endpoint == "" {
		if base := get(EnvEndpoint); base != "" {
			name, endpoint = EnvEndpoint, strings.TrimRight(base, "/")+"/v1/traces"
		}
	}
	if endpoint == "" {
		return func(context.Context) error { return nil }, nil
	}
	// The exporter would log a bad URL and send to its default instead.
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s is %q: want an http:// or https:// URL of an OTLP/HTTP collector", name, get(name))
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(cmp.Or(get(EnvServiceName), DefaultServiceName)))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		err := tp.Shutdown(ctx)
		// Spans made after the stop go nowhere rather than to a stopped
		// provider.
		if otel.GetTracerProvider() == tp {
			otel.SetTracerProvider(noop.NewTracerProvider())
		}
		if err != nil {
			return fmt.Errorf("flushing traces: %w", err)
		}
		return nil
	}, nil
}

// Start starts a span named name as a child of ctx's, from herald's
// tracer (otel's no-op unless Setup turned traces on). With no tracer
// provider set, or a no-op one, and no trace in ctx to continue, it
// returns ctx as it is and a no-op span: otel's no-op would make a span
// and a context for each call, kept while the work runs, that record
// nothing and carry nothing further.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !on() && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noop.Span{}
	}
	return otel.Tracer(instrumentation).Start(ctx, name, trace.WithAttributes(attrs...))
}

// unset is otel's global tracer provider before one is set.
var unset = otel.GetTracerProvider()

// on says whether a tracer provider that may record is set.
func on() bool {
	p := otel.GetTracerProvider()
	if p == unset {
		return false
	}
	_, off := p.(noop.TracerProvider)
	return !off
}

// End ends span, marked failed when err is not nil (never with err's
// text, which may quote a message).
func End(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(attribute.Bool("error", true))
	}
	span.End()
}

// EndWith ends span failed (with why, a word naming what went wrong)
// when failed is set.
func EndWith(span trace.Span, failed bool, why string) {
	if failed {
		span.SetStatus(codes.Error, why)
		span.SetAttributes(attribute.Bool("error", true))
	}
	span.End()
}

// Inject returns meta with ctx's span context added under MetaTraceparent
// (and MetaTracestate), a copy when it adds anything; meta itself when
// ctx has no span to continue. The caller's map is never written.
func Inject(ctx context.Context, meta map[string]string) map[string]string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return meta
	}
	c := carrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	out := make(map[string]string, len(meta)+len(c))
	for k, v := range meta {
		out[k] = v
	}
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Extract returns ctx continuing the trace whose span context meta
// carries (Inject), or ctx as it is when meta carries none.
func Extract(ctx context.Context, meta map[string]string) context.Context {
	if meta[MetaTraceparent] == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, carrier(meta))
}

// carrier is a Meta map as a propagation.TextMapCarrier, with the W3C
// header names kept under herald's keys.
type carrier map[string]string

var metaKeys = map[string]string{"traceparent": MetaTraceparent, "tracestate": MetaTracestate}

func (c carrier) Get(key string) string { return c[metaKeys[key]] }

func (c carrier) Set(key, value string) {
	if k, ok := metaKeys[key]; ok && value != "" {
		c[k] = value
	}
}

func (c carrier) Keys() []string {
	var out []string
	for h, k := range metaKeys {
		if _, ok := c[k]; ok {
			out = append(out, h)
		}
	}
	return out
}
