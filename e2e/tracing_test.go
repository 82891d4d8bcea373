package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/tracing"
)

// A trace goes on across gateways: gateway A runs the user's turn, whose
// delegate_task dispatches a sub-agent, and is SIGKILLed while the
// sub-agent runs; gateway B, started after, finds the sub-agent's owner
// gone, ends it and runs the completion's turn and sends its reply. B's
// turn and send are in A's trace, B's turn under A's delegate_task call:
// the trace's context went from one process to the other through the
// store alone. Each gateway exports to one OTLP receiver under its own
// service name.
func TestTraceGoesOnAcrossGateways(t *testing.T) {
	t.Parallel()
	rcv := testkit.NewTraceReceiver(t)
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(delegatingModel([]string{"slow"}, func(string) testkit.Step { return testkit.Hang(held) }))
	cfg := clusterConfig(redis, model) + `
delegation:
  owner_ttl: 3s
`
	env := func(service string) []string {
		// Spans leave within 0.1 s of their end, so a killed process has
		// sent those that ended before it died.
		return []string{tracing.EnvEndpoint + "=" + rcv.URL, tracing.EnvServiceName + "=" + service, "OTEL_BSP_SCHEDULE_DELAY=100"}
	}
	homeA := t.TempDir()
	writeConfig(t, homeA, cfg)
	a := startChild(t, "gateway A", homeA, env("herald-a")...)
	a.api().mustPost(t, "tr", askDelegate)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := a.api().timeline("tr")
		return len(ofKind(items, kindReply)) == 1 && held.Waiting() == 1, "the dispatch was never acknowledged"
	})
	// The user's turn and its delegate_task call, as A sent them.
	var turn, call testkit.Span
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		for _, s := range rcv.Spans() {
			switch {
			case s.Service == "herald-a" && s.Name == tracing.SpanTurn && s.Attrs["herald.entry.kind"] == "user":
				turn = s
			case s.Service == "herald-a" && s.Name == tracing.SpanTool && s.Attrs["herald.tool"] == "delegate_task":
				call = s
			}
		}
		return turn.ID != "" && call.ID != "", "A's turn and its delegate_task call were not exported"
	})
	if call.Trace != turn.Trace || call.Parent == "" {
		t.Fatalf("the delegate_task call %+v is not in the turn's trace %s", call, turn.Trace)
	}
	a.kill()

	homeB := t.TempDir()
	writeConfig(t, homeB, cfg)
	b := startChild(t, "gateway B", homeB, env("herald-b")...)
	items := b.api().settledTimeline(t, "tr", 2)
	if replies := texts(ofKind(items, kindReply)); len(replies) != 2 || replies[1] != gotResults {
		t.Fatalf("replies %q: want the acknowledgement, then the answer to the results", replies)
	}
	b.stop() // flushes B's spans

	spans := rcv.Spans()
	var bTurn testkit.Span
	for _, s := range spans {
		if s.Service == "herald-b" && s.Name == tracing.SpanTurn && s.Attrs["herald.entry.kind"] == "synthetic" {
			bTurn = s
		}
	}
	if bTurn.ID == "" {
		t.Fatalf("B sent no completion's turn; spans:\n%s", spanLines(spans))
	}
	if bTurn.Trace != turn.Trace || bTurn.Parent != call.ID {
		t.Errorf("B's completion turn is in trace %s under %s, want trace %s under A's delegate_task call %s; spans:\n%s",
			bTurn.Trace, bTurn.Parent, turn.Trace, call.ID, spanLines(spans))
	}
	sent := false
	for _, s := range spans {
		sent = sent || s.Service == "herald-b" && s.Name == tracing.SpanDeliverySend && s.Parent == bTurn.ID && s.Trace == turn.Trace
	}
	if !sent {
		t.Errorf("B's send of the completion's reply is not under its turn in the trace; spans:\n%s", spanLines(spans))
	}
}

// spanLines shows spans one a line, for a failure's message.
func spanLines(spans []testkit.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "%s %s %s parent=%s trace=%s %v\n", s.Service, s.Name, s.ID, s.Parent, s.Trace, s.Attrs)
	}
	return b.String()
}
