package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/sessions"
)

// TestSignalsPruned checks that the signals table forgets what is older
// than the keep window.
func TestSignalsPruned(t *testing.T) {
	d, clk, _ := testDB(t)
	s, ctx := d.Sessions(), context.Background()
	for range 20 {
		if err := s.Signal(ctx, sessions.Signal{Conv: "c", Kind: sessions.SignalStop}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(signalsKeep + time.Minute)
	if err := s.Signal(ctx, sessions.Signal{Conv: "c", Kind: sessions.SignalInterrupt}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.rdb.QueryRowContext(ctx, `SELECT count(*) FROM signals`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d signals kept, want 1: the older ones are past the keep window", n)
	}
}
