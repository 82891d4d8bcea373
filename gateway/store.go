package gateway

import (
	"context"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// Store is one opened backend serving every domain's store interface.
type Store interface {
	Sessions() sessions.Store
	Signals() signals.Store      // the cluster's bus: stop, steer, a domain's own kinds
	Timeline() sessions.Timeline // what the local API's conversations were sent
	Notes() notes.Store          // what the agent remembers about each user
	Outbox() outbox.Store
	Leases() lease.Store       // ownership of the adapters that run in one process
	Cursors() adapters.Cursors // where an adapter's receiving got to, per channel
	Delegations() delegation.Store
	Cron() cronjobs.Store
	Once() lease.OnceStore // once-only claims on fires (cron jobs', controllers' ticks)
	Kanban() kanban.Store
	Controllers() controllers.Store
	Pools() llm.PoolStore // the model's credential pools
	Close() error
}

var (
	_ Store = (*sqlite.DB)(nil)
	_ Store = (*redis.DB)(nil)
)

// OpenStore opens the backend cfg names. clk is the store's clock for
// SQLite (nil: the wall clock). Redis takes clk only when it is set: left
// nil, lease expiry is decided by the Redis server's clock, the one every
// gateway process sharing it agrees on, which is what production wants.
func OpenStore(ctx context.Context, cfg config.Store, sqlitePath string, clk clock.Clock) (Store, error) {
	const op = "gateway.OpenStore"
	switch cfg.Backend {
	case config.BackendRedis:
		return redis.Open(ctx, redis.Options{URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, Clock: clk, Limits: cfg.Limits()})
	case config.BackendSQLite, "":
		return sqlite.Open(sqlitePath, sqlite.Options{Clock: clk, Limits: cfg.Limits()})
	}
	return nil, errs.E(op, errs.Invalid, "unknown store backend %q (sqlite or redis)", cfg.Backend)
}

// DeliveringSessions returns the turn worker's view of s: a Finish (or
// FinishAndClaim) that queues messages for delivery hands them to this
// process's delivery worker, claimed in the same step (Finish.Handoff),
// when it can take them, and wakes it otherwise, so a reply goes out at
// once instead of at the next poll.
func DeliveringSessions(s sessions.Store, d *Delivery) sessions.Store {
	return deliveringSessions{Store: s, delivery: d}
}

type deliveringSessions struct {
	sessions.Store
	delivery *Delivery
}

func (s deliveringSessions) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	f, done := s.offer(f)
	err := s.Store.Finish(ctx, l, f)
	done(err == nil)
	return err
}

func (s deliveringSessions) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	f, done := s.offer(f)
	turn, err := s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
	done(err == nil)
	return turn, err
}

// offer asks the delivery worker to take f's messages as they are
// enqueued (see Delivery.Handoff); done is told whether f committed.
func (s deliveringSessions) offer(f sessions.Finish) (_ sessions.Finish, done func(committed bool)) {
	if f.Handoff != nil {
		return f, func(bool) {}
	}
	f.Handoff, done = s.delivery.Handoff(f.Outbox)
	return f, done
}

// notifyingOutbox wakes the delivery worker after each Enqueue: the
// router's command answers take this way.
type notifyingOutbox struct {
	outbox.Store
	notify func()
}

func (o notifyingOutbox) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	id, dup, err := o.Store.Enqueue(ctx, m)
	if err == nil && !dup {
		o.notify()
	}
	return id, dup, err
}
