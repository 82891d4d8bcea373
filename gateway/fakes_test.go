package gateway

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

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
