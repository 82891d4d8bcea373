// Package storetest is the conformance suite every store backend must
// pass. A backend's test calls Run with a Backend that makes fresh places
// to keep data; the suite opens stores on them and checks every promise
// the sessions and outbox interfaces make.
package storetest

import (
	"io"
	"testing"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// Store is what a backend provides: one opened database serving every
// domain's store interface. The domain interfaces share method names
// (Claim, Release), so each is a view of its own.
type Store interface {
	Sessions() sessions.Store
	Signals() signals.Store
	Timeline() sessions.Timeline
	Notes() notes.Store
	Outbox() outbox.Store
	Leases() lease.Store
	io.Closer
}

// Place is one isolated place to keep data: a SQLite file, or a
// redis-server (or a key prefix on one) of the test's own.
type Place interface {
	// Open opens a new store on this place. A store opened again on the
	// same place sees what the earlier ones committed. The suite closes
	// what it opens; Place cleans up the rest with t.
	Open(t *testing.T, clk clock.Clock, lim sessions.Limits) Store
	// Restart stops the server behind the place and starts it again on the
	// same data (a no-op for an embedded backend). Stores opened before are
	// closed by the suite first.
	Restart(t *testing.T)
}

// Backend makes places.
type Backend struct {
	Name string
	// New returns a fresh, empty place cleaned up with t.
	New func(t *testing.T) Place
}
