package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/tracing"
)

// A turn that delegates is one trace, on each store: the turn, its model
// calls and its tool call, the sub-agent's run (and its own model and
// tool calls), the completion's turn and the deliveries of both turns'
// replies, each span under the one that caused it, though each went
// through the store to get there. The model calls carry
// the GenAI attributes, and no attribute says what anyone wrote.
func TestGatewayTracesATurnThatDelegates(t *testing.T) {
	for _, st := range gatewayStores {
		t.Run(st.name, func(t *testing.T) {
			rcv := testkit.NewTraceReceiver(t)
			t.Setenv(tracing.EnvEndpoint, rcv.URL)
			t.Setenv(tracing.EnvTracesEndpoint, "")
			t.Setenv(tracing.EnvServiceName, "")
			h, chat := approvalsGateway(t, st.set, nil)
			const conv = "chatfake:7"
			const secret = "zebra-quartz"
			h.say(conv, "u1", "delegate run echo "+secret)
			// The parent's reply to the tool's result, then the
			// completion's turn's reply.
			testkit.Eventually(t, "two replies", func() bool {
				n := 0
				for _, m := range chat.messages() {
					if m.Conv == conv && m.Kind == "reply" {
						n++
					}
				}
				return n >= 2
			})
			h.stop()

			spans := rcv.Spans()
			byID := map[string]testkit.Span{}
			count := map[string]int{}
			for _, s := range spans {
				byID[s.ID] = s
				count[s.Name]++
				for k, v := range s.Attrs {
					if strings.Contains(v, secret) {
						t.Errorf("span %s: attribute %s=%q holds what was written", s.Name, k, v)
					}
				}
				if s.Service != tracing.DefaultServiceName {
					t.Errorf("span %s of service %q, want %q", s.Name, s.Service, tracing.DefaultServiceName)
				}
			}
			if t.Failed() || len(spans) == 0 {
				t.Fatalf("spans: %s", spanTree(spans))
			}
			for name, want := range map[string]int{
				tracing.SpanTurn: 2, tracing.SpanDelegationChild: 1, tracing.SpanDeliverySend: 2,
				tracing.SpanTool: 2, tracing.SpanModel: 4,
			} {
				if count[name] < want {
					t.Errorf("%d %s spans, want at least %d; spans:\n%s", count[name], name, want, spanTree(spans))
				}
			}
			var root testkit.Span
			for _, s := range spans {
				if s.Parent == "" {
					if root.ID != "" {
						t.Fatalf("two roots, %s and %s:\n%s", root.Name, s.Name, spanTree(spans))
					}
					root = s
				}
			}
			if root.Name != tracing.SpanTurn || root.Attrs["herald.conversation"] != conv || root.Attrs["herald.entry.kind"] != "user" {
				t.Fatalf("root %+v, want the user's turn in %s", root, conv)
			}
			for _, s := range spans {
				if s.Trace != root.Trace {
					t.Errorf("span %s in trace %s, want %s", s.Name, s.Trace, root.Trace)
				}
				if s.Parent != "" {
					if _, ok := byID[s.Parent]; !ok {
						t.Errorf("span %s's parent %s was not sent", s.Name, s.Parent)
					}
				}
			}
			// Each is where it belongs: the sub-agent and the completion's
			// turn under the parent's delegate_task call, which dispatched
			// them, each send under its turn.
			parentOf := func(s testkit.Span) string { return byID[s.Parent].Name }
			for _, s := range spans {
				switch s.Name {
				case tracing.SpanDelegationChild:
					if p := byID[s.Parent]; p.Name != tracing.SpanTool || p.Attrs["herald.tool"] != "delegate_task" {
						t.Errorf("the sub-agent's parent is %s %v, want the delegate_task call", p.Name, p.Attrs)
					}
				case tracing.SpanTurn:
					if p := byID[s.Parent]; s.Parent != "" && (p.Attrs["herald.tool"] != "delegate_task" || s.Attrs["herald.entry.kind"] != "synthetic") {
						t.Errorf("a turn of kind %q under %s %v, want the completion's under the delegate_task call", s.Attrs["herald.entry.kind"], p.Name, p.Attrs)
					}
					if s.Attrs["herald.turn.end"] == "" {
						t.Errorf("turn %v says no end", s.Attrs)
					}
				case tracing.SpanDeliverySend:
					if parentOf(s) != tracing.SpanTurn || s.Attrs["herald.delivery.outcome"] != "accepted" {
						t.Errorf("a send under %s with %v, want an accepted send under a turn", parentOf(s), s.Attrs)
					}
				case tracing.SpanModel:
					for _, k := range []string{"gen_ai.request.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"} {
						if s.Attrs[k] == "" {
							t.Errorf("model span without %s: %v", k, s.Attrs)
						}
					}
				}
			}
		})
	}
}

// Without an endpoint every span is otel's no-op, and nothing carries a
// trace context.
func TestGatewayTracesOff(t *testing.T) {
	t.Setenv(tracing.EnvEndpoint, "")
	t.Setenv(tracing.EnvTracesEndpoint, "")
	h, chat := approvalsGateway(t, gatewayStores[0].set, nil)
	h.say("chatfake:8", "u1", "run echo hi")
	waitSent(t, chat, "chatfake:8", "result: ")
	_, span := otel.Tracer("test").Start(context.Background(), "probe")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("a span while traces are off records (%v) or has a context (%v)", span.IsRecording(), span.SpanContext())
	}
	span.End()
	for _, m := range chat.messages() {
		if m.Meta[tracing.MetaTraceparent] != "" {
			t.Errorf("message %q carries a trace while traces are off", m.Text)
		}
	}
}

// spanTree shows spans one a line, for a failure's message.
func spanTree(spans []testkit.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "%s %s parent=%s trace=%s %v\n", s.Name, s.ID, s.Parent, s.Trace, s.Attrs)
	}
	return b.String()
}

// A cron fire is a trace of its own: its model call under it, and the
// send of its report continuing it from the outbox.
func TestGatewayTracesACronFire(t *testing.T) {
	rcv := testkit.NewTraceReceiver(t)
	t.Setenv(tracing.EnvEndpoint, rcv.URL)
	t.Setenv(tracing.EnvTracesEndpoint, "")
	model := testkit.NewModelServer(t)
	model.Respond(cronModel(func(testkit.RecordedRequest) (testkit.Step, bool) { return testkit.Step{}, false }))
	cfg := testConfig(t, model)
	cfg.HTTP.APIKey = "k-cron"
	h := startGateway(t, cfg, Options{})
	h.post("cr", "/cron add every 1h summarize the news")
	h.waitItem("cr", "Scheduled")
	j := h.cronJobs()[0]
	h.post("cr", "/cron run "+j.ID)
	h.waitItem("cr", "report: summarize the news")
	testkit.Eventually(t, "the run's delivery recorded", func() bool {
		_, runs := h.cronJob(j.ID)
		return len(runs) == 1 && runs[0].Delivery == cronjobs.DeliveryDelivered
	})
	h.stop()

	spans := rcv.Spans()
	var fire testkit.Span
	for _, s := range spans {
		if s.Name == tracing.SpanCronFire {
			fire = s
		}
	}
	if fire.ID == "" || fire.Parent != "" || fire.Attrs["herald.cron.job"] != j.ID || fire.Attrs["herald.cron.status"] != string(cronjobs.StatusOK) {
		t.Fatalf("no root cron fire of %s with its status; spans:\n%s", j.ID, spanTree(spans))
	}
	var called, send bool
	for _, s := range spans {
		called = called || s.Name == tracing.SpanModel && s.Trace == fire.Trace
		send = send || s.Name == tracing.SpanDeliverySend && s.Parent == fire.ID
	}
	if !called || !send {
		t.Errorf("model call in the fire's trace: %v, report's send under it: %v; spans:\n%s", called, send, spanTree(spans))
	}
}
