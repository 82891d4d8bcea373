package gateway

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// exclusiveAdapter is an adaptertest.Adapter whose Run needs the lease
// named by name.
type exclusiveAdapter struct {
	adaptertest.Adapter
	name string
}

var _ adapters.Exclusive = (*exclusiveAdapter)(nil)

func (e *exclusiveAdapter) Exclusive() string { return e.name }

// mountAdapter is an adaptertest.Adapter that receives over the HTTP server.
type mountAdapter struct {
	adaptertest.Adapter
	mount func(mux *http.ServeMux, inbox adapters.Inbox)
}

var _ adapters.Mounter = (*mountAdapter)(nil)

func (m *mountAdapter) Mount(mux *http.ServeMux, inbox adapters.Inbox) { m.mount(mux, inbox) }

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
