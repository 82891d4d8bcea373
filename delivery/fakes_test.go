package delivery

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeOutbox is an outbox.Store whose methods can be replaced one by one;
// the rest go to the real store inside.
type fakeOutbox struct {
	outbox.Store
	ack func(ctx context.Context, c outbox.Claimed) error
}

func (f *fakeOutbox) Ack(ctx context.Context, c outbox.Claimed) error {
	if f.ack != nil {
		return f.ack(ctx, c)
	}
	return f.Store.Ack(ctx, c)
}

// AckAll goes through ack, when set, one message at a time.
func (f *fakeOutbox) AckAll(ctx context.Context, cs []outbox.Claimed) ([]error, error) {
	if f.ack == nil {
		return f.Store.AckAll(ctx, cs)
	}
	acked := make([]error, len(cs))
	for i, c := range cs {
		acked[i] = f.ack(ctx, c)
	}
	return acked, nil
}

// counts counts what the worker's metric hooks are told.
type counts struct {
	mu       sync.Mutex
	attempts map[string]int // by platform and outcome, "telegram/accepted"
	resends  map[string]int // by platform
}

func newCounts() *counts {
	return &counts{attempts: map[string]int{}, resends: map[string]int{}}
}

func (c *counts) hooks() Metrics {
	return Metrics{
		Attempt: func(platform string, o adapters.Outcome) {
			c.mu.Lock()
			c.attempts[platform+"/"+o.String()]++
			c.mu.Unlock()
		},
		Resent: func(platform string) {
			c.mu.Lock()
			c.resends[platform]++
			c.mu.Unlock()
		},
	}
}

// attempted is how many sends to platform ended with outcome.
func (c *counts) attempted(platform, outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[platform+"/"+outcome]
}

// resent is how many messages to platform were sent again.
func (c *counts) resent(platform string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resends[platform]
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
