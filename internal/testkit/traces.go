package testkit

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TraceReceiver is an OTLP/HTTP traces endpoint (protobuf) that keeps
// the spans it is sent: point OTEL_EXPORTER_OTLP_ENDPOINT at URL.
type TraceReceiver struct {
	URL string

	mu       sync.Mutex
	spans    []Span
	requests int
}

// Span is one span a TraceReceiver was sent, its ids in hex and its
// attributes as strings.
type Span struct {
	Name     string
	Trace    string
	ID       string
	Parent   string // "" for a root span
	Attrs    map[string]string
	Service  string // the resource's service.name
	ErrorSet bool   // its status is an error
}

// NewTraceReceiver starts a receiver, closed when t ends.
func NewTraceReceiver(t testing.TB) *TraceReceiver {
	t.Helper()
	r := &TraceReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *TraceReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var export collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &export)
	}
	if req.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "want an ExportTraceServiceRequest at /v1/traces", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.requests++
	for _, rs := range export.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{
					Name: s.Name, Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
					Parent: hex.EncodeToString(s.ParentSpanId), Attrs: attrs(s.Attributes), Service: service,
					ErrorSet: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans are the spans received so far, in the order they came.
func (r *TraceReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the exports received.
func (r *TraceReceiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// attrs are kvs with their values as strings (a list's joined by ",").
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = value(kv.GetValue())
	}
	return out
}

func value(v *commonpb.AnyValue) string {
	switch v := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(v.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(v.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, len(v.ArrayValue.GetValues()))
		for i, e := range v.ArrayValue.GetValues() {
			parts[i] = value(e)
		}
		return strings.Join(parts, ",")
	}
	return v.GetStringValue()
}
