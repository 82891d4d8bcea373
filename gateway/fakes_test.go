package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeAdapter is an adapter made of functions; a nil function does the
// obvious nothing.
type fakeAdapter struct {
	platform string
	send     func(ctx context.Context, m outbox.Message) adapters.SendResult
	run      func(ctx context.Context, inbox adapters.Inbox) error
}

var _ adapters.Adapter = (*fakeAdapter)(nil)

func (f *fakeAdapter) Platform() string { return f.platform }

func (f *fakeAdapter) Run(ctx context.Context, inbox adapters.Inbox) error {
	if f.run != nil {
		return f.run(ctx, inbox)
	}
	<-ctx.Done()
	return nil
}

func (f *fakeAdapter) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	if f.send != nil {
		return f.send(ctx, m)
	}
	return adapters.SendResult{Outcome: adapters.Accepted}
}

// exclusiveAdapter is a fakeAdapter whose Run needs the lease named by
// name.
type exclusiveAdapter struct {
	fakeAdapter
	name string
}

var _ adapters.Exclusive = (*exclusiveAdapter)(nil)

func (e *exclusiveAdapter) Exclusive() string { return e.name }

// mountAdapter is a fakeAdapter that receives over the HTTP server.
type mountAdapter struct {
	fakeAdapter
	mount func(mux *http.ServeMux, inbox adapters.Inbox)
}

var _ adapters.Mounter = (*mountAdapter)(nil)

func (m *mountAdapter) Mount(mux *http.ServeMux, inbox adapters.Inbox) { m.mount(mux, inbox) }

// presenceCall is one call a presenceAdapter got: typing, post (a new
// status line), edit or clear.
type presenceCall struct {
	kind   string
	target outbox.Target
	id     string // the status line's
	text   string
	at     time.Time // the wall clock at the call
}

// presenceAdapter is a fakeAdapter that records its presence calls; a nil
// function answers at once without error, and a posted status line gets
// the id "s1", "s2", ….
type presenceAdapter struct {
	fakeAdapter
	typing func(ctx context.Context) error
	status func(ctx context.Context, id, text string) error

	mu    sync.Mutex
	calls []presenceCall
	posts int
}

var _ adapters.Presence = (*presenceAdapter)(nil)

func (p *presenceAdapter) record(c presenceCall) {
	c.at = time.Now()
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

func (p *presenceAdapter) Typing(ctx context.Context, t outbox.Target) error {
	p.record(presenceCall{kind: "typing", target: t})
	if p.typing != nil {
		return p.typing(ctx)
	}
	return nil
}

func (p *presenceAdapter) Status(ctx context.Context, t outbox.Target, id, text string) (string, error) {
	kind := "edit"
	if id == "" {
		kind = "post"
	}
	p.record(presenceCall{kind: kind, target: t, id: id, text: text})
	if p.status != nil {
		if err := p.status(ctx, id, text); err != nil {
			return "", err
		}
	}
	if id != "" {
		return id, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	return fmt.Sprintf("s%d", p.posts), nil
}

func (p *presenceAdapter) ClearStatus(ctx context.Context, t outbox.Target, id string) error {
	p.record(presenceCall{kind: "clear", target: t, id: id})
	return nil
}

// got returns the calls so far.
func (p *presenceAdapter) got() []presenceCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]presenceCall(nil), p.calls...)
}

// count counts the calls of kind so far.
func (p *presenceAdapter) count(kind string) int {
	n := 0
	for _, c := range p.got() {
		if c.kind == kind {
			n++
		}
	}
	return n
}

// quietLogger drops what it is given; tests that read logs make their own.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openSQLite opens a store on a fresh file with clk.
func openSQLite(t *testing.T, clk clock.Clock) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// eventually polls cond until it holds or 10 s passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// metricValue reads one counter or gauge sample; labels are name=value
// pairs. A metric with no sample yet reads 0.
func metricValue(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if !hasLabels(s, labels) {
				continue
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue()
			case s.Gauge != nil:
				return s.Gauge.GetValue()
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(s *dto.Metric, labels []string) bool {
	for _, kv := range labels {
		name, value, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
