package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunAll(t, storetest.Backend{
		Name: "sqlite",
		New: func(t *testing.T) storetest.Place {
			return place{path: filepath.Join(t.TempDir(), "herald.db")}
		},
	})
}

// place is one database file; stores opened on it see each other's
// commits, as a restarted herald sees its own.
type place struct{ path string }

func (p place) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) storetest.Store {
	t.Helper()
	d, err := Open(p.path, Options{Clock: clk, Limits: lim})
	if err != nil {
		t.Fatalf("Open(%s): %v", p.path, err)
	}
	return d
}

// Restart has nothing to restart: the database lives in this process.
func (place) Restart(*testing.T) {}
