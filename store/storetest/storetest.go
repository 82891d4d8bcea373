// Package storetest is the conformance suite every store backend must
// pass. A backend's test calls RunAll with a Backend that makes fresh
// places to keep data; the suite opens stores on them and checks every
// promise the domains' store interfaces make.
package storetest

import (
	"io"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// Store is what a backend provides: one opened database serving every
// domain's store interface, each a view of its own because the
// interfaces share method names (Claim, Release). A backend that forgets
// a domain does not compile against the suite; a new domain is a method
// here, a Domain and its group in RunAll.
type Store interface {
	Sessions() sessions.Store
	Signals() signals.Store
	Timeline() sessions.Timeline
	Conversations() sessions.Conversations
	Notes() notes.Store
	Outbox() outbox.Store
	Leases() lease.Store
	Cursors() adapters.Cursors
	Delegations() delegation.Store
	Cron() cronjobs.Store
	Once() lease.OnceStore
	Kanban() kanban.Store
	Controllers() controllers.Store
	Pools() llm.PoolStore
	Files() media.Store
	Approvals() approvals.Store
	Instances() instances.Store
	io.Closer
}

// Domain names one of Store's views, as its accessor does.
type Domain string

const (
	Sessions    Domain = "Sessions"
	Outbox      Domain = "Outbox"
	Leases      Domain = "Leases"
	Cursors     Domain = "Cursors"
	Delegations Domain = "Delegations"
	Cron        Domain = "Cron"
	Once        Domain = "Once"
	Kanban      Domain = "Kanban"
	Controllers Domain = "Controllers"
	Pools       Domain = "Pools"
	Files       Domain = "Files"
	Approvals   Domain = "Approvals"
	Instances   Domain = "Instances"
)

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

// Backend is one store backend under test.
type Backend struct {
	// Name names the backend in what the suite skips.
	Name string
	// New returns a fresh, empty place cleaned up with t.
	New func(t *testing.T) Place
	Features
}

// Features is what a backend legitimately lacks. The zero value is a
// backend that runs every group, as every backend the gateway opens must.
type Features struct {
	// Lacks lists the domains the backend does not keep: their groups
	// skip, naming the domain, and the suite never calls their accessors.
	Lacks []Domain
}
