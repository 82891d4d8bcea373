package tracing

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// With no endpoint Setup turns nothing on: spans are no-ops and carry
// nothing into the store.
func TestSetupOff(t *testing.T) {
	stop, err := Setup(env(map[string]string{EnvServiceName: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := Start(context.Background(), SpanTurn)
	if span.IsRecording() {
		t.Error("a span records with traces off")
	}
	meta := map[string]string{"target": "t"}
	if got := Inject(ctx, meta); !maps.Equal(got, meta) {
		t.Errorf("Inject with traces off gave %v", got)
	}
	span.End()
	if err := stop(context.Background()); err != nil {
		t.Error(err)
	}
}

// A span's context goes through a Meta map and back, under herald's
// keys, and the spans are sent to the traces endpoint on stop, as the
// service named.
func TestSetupSendsAndPropagates(t *testing.T) {
	rcv := testkit.NewTraceReceiver(t)
	stop, err := Setup(env(map[string]string{EnvTracesEndpoint: rcv.URL + "/v1/traces", EnvEndpoint: "http://127.0.0.1:1", EnvServiceName: "herald-a"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := Start(context.Background(), SpanTurn)
	meta := Inject(ctx, map[string]string{"target": "t"})
	if meta[MetaTraceparent] == "" || meta["target"] != "t" {
		t.Fatalf("Inject gave %v", meta)
	}
	parent.End()
	_, child := Start(Extract(context.Background(), meta), SpanDeliverySend)
	End(child, context.Canceled)
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans sent, want 2: %+v", len(spans), spans)
	}
	p, c := spans[0], spans[1]
	if p.Name != SpanTurn {
		p, c = c, p
	}
	if c.Trace != p.Trace || c.Parent != p.ID || p.Service != "herald-a" || !c.ErrorSet {
		t.Errorf("parent %+v, child %+v: want the child under the parent, failed, of herald-a", p, c)
	}
}

// A bad endpoint is refused, naming the variable.
func TestSetupBadEndpoint(t *testing.T) {
	_, err := Setup(env(map[string]string{EnvEndpoint: "://nope"}))
	if err == nil || !strings.Contains(err.Error(), EnvEndpoint) {
		t.Fatalf("Setup of a bad endpoint: %v, want an error naming %s", err, EnvEndpoint)
	}
}
